"""A rider made up for the tests (``tests/integration/test_plug_ins.py``): the record of
a run that failed for good is kept for a minute even when its task keeps no results, so
``app.result(id)`` tells why it failed. Added with one line: ``RIDERS.add(KeepFailures())``.
"""

from __future__ import annotations

from tickwork.scheduler.runs.results import failed_record
from tickwork.workers.settling.plan import Planning, Settled, Write

KEPT_MS = 60_000


class KeepFailures:
    def ride(self, item: Settled, now: int, planning: Planning) -> None:
        if item.write is Write.POISON and item.kept is None and item.error is not None:
            record = failed_record(*item.error, item.work.claim.attempt, now)
            item.kept = (item.work.claim.id, record, KEPT_MS)
