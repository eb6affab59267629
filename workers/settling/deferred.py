"""The outcome of work whose task is not registered here (``Verdict.UNKNOWN_TASK``, decided
by ``workers/admission/unknown_tasks.py``): deferred (given back, due again after a
backoff, the attempt not counted, recorded in a schedule's ledger) while within its
grace, else poisoned as an unknown task (its chain stops there; a replay resumes it)."""

from __future__ import annotations

import math

from tickwork.scheduler.backends import Failure
from tickwork.scheduler.schedules.ledger import RunOutcome
from tickwork.workers.intake.holdings import Work
from tickwork.workers.pools.execution import HandlerResult, Verdict
from tickwork.workers.settling.plan import Planning, Settled, Write


class Deferred:
    verdicts = frozenset({Verdict.UNKNOWN_TASK})

    def settled(
        self, work: Work, result: HandlerResult, now: int, planning: Planning
    ) -> Settled | None:
        if result.snooze_s > 0:
            item = Settled(work, result, "deferred", Write.SNOOZE, RunOutcome.DEFERRED)
            item.why, item.due_ms = result.error, now + math.ceil(result.snooze_s * 1000)
            return item
        item = Settled(work, result, "poisoned", Write.POISON, RunOutcome.POISONED)
        item.continues = False  # as before the grace existed: a replay resumes the chain
        return item.poisoned(Failure("unknown_task", "UnknownTask", result.error), result.error)
