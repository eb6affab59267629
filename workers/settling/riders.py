"""The writes that ride along with a run's settle, one class each, in the order they are
asked (``RIDERS``): each fills its part of a ``plan.Settled`` item, and the settler
writes it in the same call as the item's ack, retry or poison (the result record and the
batch member's outcome just before it).

- the next occurrence: the chain's next occurrence (or its next step, after a run that
  succeeded), for a run that is acked or poisoned (not one whose abort ended its chain);
- the ledger entry: the run's record in its schedule's (or task's) history, with the
  occurrences its next one steps over;
- the result record: what the run returned, or why it failed for good, for a task that
  keeps results;
- the batch member: the run's outcome in its batch (``workers/workflows/fanin.py``).

A plain message (a one-off without key, steps, batch or schedule of its own, of a task
that keeps no results and no history: ``Decider.plain``) is asked of none of them.

A new rider is a class with ``ride`` in a module of its own and a line adding it:
``RIDERS.add(AuditTrail())``.
"""

from __future__ import annotations

from typing import Protocol

from tickwork.scheduler.runs.results import failed_record, succeeded_record
from tickwork.workers.registered import Registered
from tickwork.workers.settling.plan import Planning, Settled, Write
from tickwork.workers.workflows.fanin import member_outcome


class Rider(Protocol):
    """A write that rides along with a run's settle."""

    def ride(self, item: Settled, now: int, planning: Planning) -> None:
        """Fill in this rider's part of ``item`` (or leave it as it is)."""
        ...


class NextOccurrence:
    def ride(self, item: Settled, now: int, planning: Planning) -> None:
        if item.write is Write.ACK:
            value = item.result.value
            item.nxt, item.dropped = planning.next(item.work, now, item.ran, value)
        elif item.write is Write.POISON and item.continues:
            item.nxt, item.dropped = planning.next(item.work, now, False)


class LedgerRecord:
    def ride(self, item: Settled, now: int, planning: Planning) -> None:
        if item.recorded is not None:
            item.entry = planning.ledger.entry(
                item.work, item.recorded, now, item.why, item.dropped
            )


class ResultRecord:
    def ride(self, item: Settled, now: int, planning: Planning) -> None:
        work = item.work
        if item.write is Write.ACK:
            value = item.result.value
            if value is None:
                return
            retention = planning.app.result_retention_ms(work.message.task)
            if retention is not None:
                record = succeeded_record(value, work.claim.attempt, now)
                item.kept = (work.claim.id, record, retention)
        elif item.write is Write.POISON and item.error is not None:
            retention = planning.app.result_retention_ms(work.message.task)
            if retention is not None:
                record = failed_record(*item.error, work.claim.attempt, now)
                item.kept = (work.claim.id, record, retention)


class BatchMember:
    def ride(self, item: Settled, now: int, planning: Planning) -> None:
        if item.write is Write.ACK:
            item.member = member_outcome(item.work, now, item.result.value)
        elif item.write is Write.POISON:
            item.member = member_outcome(item.work, now, error=item.error)


#: the riders, asked in this order (the ledger entry names what the next occurrence
#: dropped)
RIDERS: Registered[Rider] = Registered(
    NextOccurrence(), LedgerRecord(), ResultRecord(), BatchMember()
)
