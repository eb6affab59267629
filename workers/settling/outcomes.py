"""The ways a run can end, one class each, in the order they are asked (``OUTCOMES``).

A finished run's handler verdict (``workers/pools/execution.py``) picks the outcomes
that may claim it; the first whose ``settled`` returns an item decides how the run is
written (``plan.Settled``). The riders (``riders.py``) then add what rides along.

- expired (not started before its ``expires``): never run, to the poison store as
  ``expired`` (a replay runs it after all), its chain going on; throttled (over its
  task's throttle, which drops the excess: ``throttled.py``) the same, as ``throttled``;
- missed (an occurrence older than its schedule's ``catch_up_window`` when it was due to
  start here): never run, acked, recorded as ``missed``, its schedule going on;
- aborted (``app.abort``, or a handler that raised ``Aborted``; also a run that failed,
  returned ``False`` or snoozed after its abort was asked): never retried, to the poison
  store as ``aborted``, its chain going on unless the abort ended it;
- succeeded (the handler returned): acked;
- redelivered (it returned ``False``): nothing written, due again after its lease;
- snoozed (it returned ``Snooze``): due again after its delay, the attempt not counted;
- failed (it raised, or can never run): retried after the delay
  ``scheduler.model.retry.decide`` gives while attempts remain, else poisoned.

A new outcome is a class with ``verdicts`` and ``settled`` in a module of its own and a
line adding it: ``OUTCOMES.add(Quarantined(), before=Failed)``.
"""

from __future__ import annotations

import math
from typing import Protocol

from tickwork.scheduler.backends import Failure
from tickwork.scheduler.model.retry import GiveUp, decide
from tickwork.scheduler.schedules.ledger import RunOutcome
from tickwork.workers.intake.holdings import Work
from tickwork.workers.pools.execution import HandlerResult, Verdict
from tickwork.workers.registered import Registered
from tickwork.workers.settling.deferred import Deferred
from tickwork.workers.settling.plan import Planning, Settled, Write
from tickwork.workers.settling.throttled import Throttled


class Outcome(Protocol):
    """One way a run can end."""

    #: the handler verdicts this outcome may claim (it is not asked about the others)
    verdicts: frozenset[Verdict]

    def settled(
        self, work: Work, result: HandlerResult, now: int, planning: Planning
    ) -> Settled | None:
        """How the run is written, or None when it is not this outcome's."""
        ...


class Expired:
    verdicts = frozenset({Verdict.EXPIRED})

    def settled(
        self, work: Work, result: HandlerResult, now: int, planning: Planning
    ) -> Settled | None:
        item = Settled(work, result, "expired", Write.POISON, RunOutcome.EXPIRED)
        return item.poisoned(Failure("expired", result.error_type, result.error), result.error)


class Aborted:
    verdicts = frozenset({Verdict.ABORTED, Verdict.FAIL, Verdict.REDELIVER, Verdict.SNOOZED})

    def settled(
        self, work: Work, result: HandlerResult, now: int, planning: Planning
    ) -> Settled | None:
        if result.verdict is not Verdict.ABORTED and work.abort is None:
            return None
        why = (
            result.error
            if result.verdict is Verdict.ABORTED
            else f"{result.error_type}: {result.error}"
        )
        item = Settled(work, result, "aborted", Write.POISON, RunOutcome.ABORTED)
        item.continues = work.abort.continue_chain if work.abort is not None else True
        return item.poisoned(Failure("aborted", "Aborted", why, result.traceback), why)


class Succeeded:
    verdicts = frozenset({Verdict.ACK})

    def settled(
        self, work: Work, result: HandlerResult, now: int, planning: Planning
    ) -> Settled | None:
        return Settled(work, result, "succeeded", Write.ACK, RunOutcome.SUCCEEDED)


class Redelivered:
    verdicts = frozenset({Verdict.REDELIVER})

    def settled(
        self, work: Work, result: HandlerResult, now: int, planning: Planning
    ) -> Settled | None:
        return Settled(work, result, "redelivered", Write.REDELIVER)


class Snoozed:
    verdicts = frozenset({Verdict.SNOOZED})

    def settled(
        self, work: Work, result: HandlerResult, now: int, planning: Planning
    ) -> Settled | None:
        due_ms = now + math.ceil(result.snooze_s * 1000)
        why = result.error or f"snoozed for {result.snooze_s:g} s"  # a Retry says why
        item = Settled(work, result, "snoozed", Write.SNOOZE, RunOutcome.SNOOZED)
        item.why, item.due_ms = why, due_ms
        return item


class Failed:
    """A handler raised (or the message can never run): retried or poisoned, one
    decision by the task's retry policy."""

    verdicts = frozenset({Verdict.FAIL, Verdict.POISON})

    def settled(
        self, work: Work, result: HandlerResult, now: int, planning: Planning
    ) -> Settled | None:
        claim = work.claim
        task = planning.app.registry.tasks.get(work.message.task)
        retryable = result.verdict is Verdict.FAIL and not result.rule
        decision = (
            decide(task.options.retry, claim.attempt, retryable)
            if task is not None
            else GiveUp("not_retryable")
        )
        error = f"{result.error_type}: {result.error}"
        if isinstance(decision, GiveUp):
            reason = "exception" if result.verdict is Verdict.FAIL else "invalid"
            reason = result.rule or reason  # the retry rule that refused it, if one did
            failure = Failure(reason, result.error_type, result.error, result.traceback)
            item = Settled(work, result, "poisoned", Write.POISON, RunOutcome.POISONED)
            return item.poisoned(failure, error)
        item = Settled(work, result, "retried", Write.RETRY, RunOutcome.RETRIED)
        item.why = error
        delay_s = result.snooze_s or decision.delay_s  # a Retry(counts=True)'s own delay
        item.due_ms = now + int(delay_s * 1000)
        item.delay_s = delay_s
        item.max_attempts = task.options.retry.max_attempts if task is not None else claim.attempt
        return item


class Missed:
    """An occurrence of a schedule found older than its ``catch_up_window`` when it was
    due to start here (workers were down or behind): never run, recorded as ``missed``,
    its schedule going on from its next occurrence."""

    verdicts = frozenset({Verdict.MISSED})

    def settled(
        self, work: Work, result: HandlerResult, now: int, planning: Planning
    ) -> Settled | None:
        item = Settled(work, result, "missed", Write.ACK, RunOutcome.MISSED)
        item.why, item.ran = result.error, False
        return item


#: the outcomes, asked in this order
OUTCOMES: Registered[Outcome] = Registered(
    Expired(),
    Missed(),
    Aborted(),
    Succeeded(),
    Redelivered(),
    Snoozed(),
    Failed(),
    Deferred(),
    Throttled(),
)
