"""A run outcome made up for the tests (``tests/integration/test_plug_ins.py``): a run
whose handler raised ``Quarantine`` goes to the poison store at once, with the reason
``quarantined``, whatever attempts its task's retry policy has left. Added with one line:
``OUTCOMES.add(Quarantined(), before=Failed)``."""

from __future__ import annotations

from tickwork.scheduler.backends import Failure
from tickwork.scheduler.schedules.ledger import RunOutcome
from tickwork.workers.intake.holdings import Work
from tickwork.workers.pools.execution import HandlerResult, Verdict
from tickwork.workers.settling.plan import Planning, Settled, Write


class Quarantine(Exception):
    """Raised by a handler whose input must not be tried again."""


class Quarantined:
    verdicts = frozenset({Verdict.FAIL})

    def settled(
        self, work: Work, result: HandlerResult, now: int, planning: Planning
    ) -> Settled | None:
        if result.error_type != Quarantine.__name__:
            return None
        why = f"quarantined: {result.error}"
        failure = Failure("quarantined", result.error_type, result.error, result.traceback)
        item = Settled(work, result, "poisoned", Write.POISON, RunOutcome.POISONED)
        return item.poisoned(failure, why)
