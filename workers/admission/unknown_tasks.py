"""Rolling deploys: a message for a task this worker does not know waits for a worker that
does. During a deploy, version 2 of an app may enqueue a task that version-1 workers have
never heard of (or a renamed one, or a queue shared by two apps): such a message is given
back without counting an attempt, due again after a short backoff, so that a worker that
knows the task takes it; it is poisoned (the reason saying how long it waited) only once
it has waited ``unknown_task_grace_s`` since its time (15 minutes by default; 0 poisons
at once, as before). Counted as ``deferred`` in the worker's stats, metrics and activity
log, and recorded in a schedule's ledger.

Choice: workers do not yet avoid claiming what they cannot run (a worker registry of task
names consulted at claim time); a claim that is given back costs one round trip per
backoff, and the backoff (a tenth of the grace, between 0.5 s and 30 s) keeps that small.
"""

from __future__ import annotations

from tickwork.scheduler.clock import to_ms
from tickwork.workers.context import WorkerContext
from tickwork.workers.intake.holdings import Work
from tickwork.workers.pools.execution import HandlerResult, Verdict


class UnknownTasks:
    """Decides what happens to work whose task is not registered here."""

    def __init__(self, context: WorkerContext) -> None:
        self.tasks = context.app.registry.tasks  # the registry's own dict: aliases included
        self._grace_ms = int(context.config.unknown_task_grace_s * 1000)
        self._backoff_s = min(max(context.config.unknown_task_grace_s / 10, 0.5), 30.0)

    def result(self, work: Work, now_ms: int) -> HandlerResult:
        """How work whose task is unknown here ends: deferred (``snooze_s`` set: due again
        then) while within the grace, else poisoned."""
        task = work.message.task
        waited_ms = max(now_ms - to_ms(work.message.scheduled_at), 0)
        if waited_ms < self._grace_ms:
            why = (
                f"no task named {task!r} is registered here: given back for a worker that "
                f"knows it (waited {_duration(waited_ms)} of {_duration(self._grace_ms)})"
            )
            return HandlerResult(Verdict.UNKNOWN_TASK, "UnknownTask", why, snooze_s=self._backoff_s)
        why = f"no task named {task!r} is registered here"
        if self._grace_ms:
            why += f" (no worker that knows it took it in {_duration(waited_ms)})"
        return HandlerResult(Verdict.UNKNOWN_TASK, "UnknownTask", why)


def _duration(ms: int) -> str:
    seconds = ms / 1000
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds} s"
