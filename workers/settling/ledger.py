"""What a worker writes to the occurrence ledger when it settles a run
(``scheduler.schedules.ledger``): the run's own record and, when the run ended late,
the grid occurrences its next one steps over (dropped by the misfire policy: those that
fell while it ran are ``skipped_overlap``, the earlier ones ``coalesced`` or
``missed``; those on excluded dates ``excluded``). The settler passes the entry to the
ack, retry or poison, so it is written in the same atomic step.

Cost on the hot path: nothing for a message that keeps no history (one dict lookup and a
header check); for one that does, one record of ~150 bytes, built with pydantic-core's
``to_json`` (no model). The dropped occurrences are only looked for when the planner says
some were dropped.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta

from tickwork.scheduler.backends import LedgerEntry
from tickwork.scheduler.clock import to_datetime, to_ms
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.schedules.ledger import (
    HistoryEntry,
    RecordWriter,
    Retention,
    RunOutcome,
    one_line,
    origin_of,
    subject_of,
)
from tickwork.triggers import Misfire, Trigger
from tickwork.triggers.base import Fire
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.intake.holdings import Work

#: the most dropped occurrences one settle walks to name them (the rest are counted)
_WALK = 1000


class RunLedger:
    """Builds the ledger entries of settled runs for one worker process."""

    def __init__(self, app: WorkerApp) -> None:
        self._app = app
        self._records = RecordWriter(f"{socket.gethostname()}:{os.getpid()}")
        self._retention = Retention.of(app.settings)

    def subject(self, message: Message) -> str | None:
        """The ledger a run of ``message`` writes to, or None."""
        if self._retention is None:
            return None
        subject = subject_of(message, keeps_history=False)  # a schedule's: no task lookup
        if subject is None:
            task = self._app.registry.tasks.get(message.task)
            if task is not None and task.options.history:
                return subject_of(message, keeps_history=True)
        return subject

    def entry(
        self,
        work: Work,
        outcome: RunOutcome,
        now_ms: int,
        error: str | None = None,
        dropped: int = 0,
    ) -> LedgerEntry | None:
        """The entry for ``work``'s run that ended with ``outcome`` at ``now_ms``; with the
        ``dropped`` occurrences after it when its chain goes on. None when the message
        keeps no history, or when it is a step of a recurring chain that succeeded but
        does not end its occurrence (the occurrence is recorded once, at its end)."""
        message = work.message
        retention = self._retention
        subject = self.subject(message)
        if subject is None or retention is None:
            return None
        trigger = message.trigger
        if outcome is RunOutcome.SUCCEEDED and message.then and trigger is not None:
            return None
        record = self._records.run(
            outcome,
            to_ms(message.scheduled_at),
            origin_of(message),
            work.started_ms or None,
            now_ms,
            work.claim.attempt,
            None if error is None else one_line(error),
            message.id,
        )
        planned = None if trigger is None else self._app.builder.shared(trigger)
        if planned is None or not (dropped or planned.rules):
            return LedgerEntry(message.queue, subject, (record,), retention.keep, retention.ttl_ms)
        started = to_datetime(work.started_ms) if work.started_ms else None
        records = [record]
        dropped_now = dropped_records(message, planned, dropped, started, now_ms)
        records += [r.encode() for r in dropped_now]
        return retention.entry(message.queue, subject, records)

    def not_run(
        self, message: Message, dropped: int, now_ms: int, skipped: str | None = None
    ) -> LedgerEntry | None:
        """The entry of the occurrences a schedule's next one steps over when nothing of
        it ran here (an overlapping schedule's ticker: its runs record themselves), with
        ``message``'s own occurrence first when it was ``skipped`` (why: a run of the
        schedule waits already, ``buffer_one``; a scheduled graph's run still goes on)."""
        subject = self.subject(message)
        if subject is None or self._retention is None or message.trigger is None:
            return None
        planned = self._app.builder.shared(message.trigger)
        records = dropped_records(message, planned, dropped, None, now_ms)
        if skipped is not None:
            records.insert(
                0, HistoryEntry(RunOutcome.SKIPPED_OVERLAP, message.scheduled_at, note=skipped)
            )
        if not records:
            return None
        return self._retention.entry(message.queue, subject, [r.encode() for r in records])


def dropped_records(
    message: Message, trigger: Trigger, dropped: int, started: datetime | None, now_ms: int
) -> list[HistoryEntry]:
    """Records of the grid occurrences around ``message``'s that did not run: those on
    excluded dates since the chain's last run, and the ``dropped`` after it (oldest
    first) that the misfire policy will not run: those that fell after the run started
    were skipped by overlap, the rest missed or coalesced. ``trigger`` is the message's,
    its named calendar attached."""
    records: list[HistoryEntry] = []
    if trigger.rules and message.last_run_at is not None:
        previous = Fire(message.last_run_at, 0)
        for fire, reason in trigger.excluded_between(previous, message.scheduled_at):
            records.append(HistoryEntry(RunOutcome.EXCLUDED, fire.at, note=reason))
    if dropped <= 0:
        return records
    after = message.scheduled_at + timedelta(microseconds=1)
    grid = [f.at for f in trigger.between(after, to_datetime(now_ms), min(dropped, _WALK))]
    # dropped by the misfire policy: coalesced (or left out of a partial catch-up),
    # missed when skipped, and missed when older than the catch-up window
    late = RunOutcome.MISSED if trigger.misfire is Misfire.SKIP else RunOutcome.COALESCED
    window = trigger.catch_up_window
    horizon = None if window is None else to_datetime(now_ms) - window
    behind = [at for at in grid if started is None or at < started]
    stale = [at for at in behind if horizon is not None and at < horizon]
    overlap = grid[len(behind) :]
    unnamed = dropped - len(grid)  # past the walk: counted in the last group
    groups = [
        (RunOutcome.MISSED, stale),
        (late, behind[len(stale) :]),
        (RunOutcome.SKIPPED_OVERLAP, overlap),
    ]
    groups = [(outcome, times) for outcome, times in groups if times]
    for index, (outcome, times) in enumerate(groups):
        count = len(times) + (unnamed if index == len(groups) - 1 else 0)
        last = times[-1] if len(times) > 1 else None
        records.append(HistoryEntry(outcome, times[0], count=count, last_at=last))
    return records
