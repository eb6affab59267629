"""The outcome of work over its task's throttle (``throttle=``, ``excess="drop"``; decided
by ``workers/admission/rates.py``): never run, to the poison store as ``throttled`` (so
no dropped call is lost: ``tickwork poison list`` shows it, a replay runs it after all),
its chain going on: a schedule's next occurrence is written as for an expired one."""

from __future__ import annotations

from tickwork.scheduler.backends import Failure
from tickwork.scheduler.schedules.ledger import RunOutcome
from tickwork.workers.intake.holdings import Work
from tickwork.workers.pools.execution import HandlerResult, Verdict
from tickwork.workers.settling.plan import Planning, Settled, Write


class Throttled:
    verdicts = frozenset({Verdict.THROTTLED})

    def settled(
        self, work: Work, result: HandlerResult, now: int, planning: Planning
    ) -> Settled | None:
        item = Settled(work, result, "throttled", Write.POISON, RunOutcome.THROTTLED)
        failure = Failure("throttled", result.error_type, result.error)
        return item.poisoned(failure, result.error)
