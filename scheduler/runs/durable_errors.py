"""What stops a durable run (``scheduler/runs/durable.py``): the errors that end it for
good, each naming its reason in the poison record, and ``Suspended``, which gives it back
to storage until it is due again."""

from __future__ import annotations

from tickwork.scheduler.errors import TickworkError
from tickwork.scheduler.runs.snooze import MOST_S

#: the most entries (steps, sleeps, recorded values) one durable run may journal
MAX_JOURNAL_ENTRIES = 10_000


class DurableRunError(TickworkError):
    """A durable run cannot go on; the run fails for good (it is not retried: a replay
    would stop at the same point). ``reason`` names it in the poison record."""

    reason = "durable"


class StepFailed(DurableRunError):
    """A durable step failed for good (its retries used): raised where the handler called
    it, and again at that point whenever the run replays. ``step``, ``error_type`` and
    ``error`` say which step and what it raised."""

    reason = "step_failed"

    def __init__(self, step: str, error_type: str, error: str, attempts: int) -> None:
        self.step, self.error_type, self.error, self.attempts = step, error_type, error, attempts
        tries = "attempt" if attempts == 1 else "attempts"
        super().__init__(f"step {step!r} failed after {attempts} {tries}: {error_type}: {error}")


class JournalFull(DurableRunError):
    """A durable run asked for more journal entries than ``MAX_JOURNAL_ENTRIES``."""

    reason = "journal_full"


class NonDeterminismError(BaseException):
    """A durable run's replay asked for another step than its journal holds at that point
    (the code changed under a run in flight, or it branches on something not journaled):
    the run stops for good, the error naming both. A ``BaseException``, so that a
    handler's ``except Exception`` does not let the run go on mixed."""

    reason = "nondeterminism"


class Suspended(BaseException):
    """Raised out of a durable run that waits (a sleep, a step's retry backoff): the
    worker gives its message back to storage, due in ``delay_s``, the attempt not
    counted. Not an error: the run resumes from its journal then."""

    def __init__(self, delay_s: float, why: str) -> None:
        self.delay_s = min(max(delay_s, 0.001), MOST_S)
        self.why = why
        super().__init__(why)
