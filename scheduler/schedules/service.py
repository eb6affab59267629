"""``app.schedules``: list schedules and the overdue ones, pause, resume, run now,
backfill, and read a schedule's history (the occurrence ledger, ``scheduler.schedules.ledger``);
and the cancel behind ``app.cancel``. The logic is in ``scheduler.schedules.control``; these
methods fill in the default queue and the backend's clock, and record what steering did
to a schedule's occurrences (cancelled, skipped in a pause) in its ledger."""

from __future__ import annotations

import builtins
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from tickwork.scheduler.backends import OnConflict, Outcome
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.errors import DecodeError, InvalidMessage
from tickwork.scheduler.model.headers import PERIODIC
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.model.tasks import Call
from tickwork.scheduler.schedules import control
from tickwork.scheduler.schedules.actions import Action, ActionLog, Verb
from tickwork.scheduler.schedules.calendars import SharedCalendars
from tickwork.scheduler.schedules.control import Backfill, Overdue, Resumed, ScheduleInfo
from tickwork.scheduler.schedules.ledger import (
    NOT_RUN,
    HistoryEntry,
    Retention,
    RunOutcome,
    message_subject,
    read_histories,
    read_history,
    schedule_subject,
)
from tickwork.scheduler.workflows.graph_records import cancel_graph, graph_of_anchor
from tickwork.triggers import Misfire, Overlap

#: the records a schedule listing reads to find the last run's outcome
_RECENT = 10

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tickwork.scheduler.backends import Backend
    from tickwork.scheduler.model.registry import Periodic
    from tickwork.scheduler.parts import AppParts
    from tickwork.scheduler.producing.building import MessageBuilder
    from tickwork.scheduler.settings import Settings


class Schedules:
    """The keyed recurring schedules of an app's deployment, steered by key."""

    def __init__(self, parts: AppParts) -> None:
        self._parts = parts
        #: the named calendars schedules share (``scheduler.schedules.calendars``)
        self.calendars = SharedCalendars(parts)

    @property
    def settings(self) -> Settings:
        return self._parts.settings

    @property
    def builder(self) -> MessageBuilder:
        return self._parts.builder

    @property
    def backend(self) -> Backend:
        return self._parts.backend

    def _now_ms(self) -> int:
        return self._parts.backend.now_ms()

    def cancel(
        self,
        *,
        id: str | None = None,
        key: str | None = None,
        queue: str | None = None,
        note: str | None = None,
        actor: str | None = None,
    ) -> bool:
        """Cancel by ``id`` or ``key``. A running occurrence finishes but does not reschedule.
        Returns False when there was nothing to cancel. Cancelling a recurring schedule
        records its pending occurrence as cancelled in the schedule's history, and the
        cancel (with ``note`` and ``actor``) in its action log; every cancel is recorded
        in ``app.audit``."""
        if (id is None) == (key is None):
            raise InvalidMessage("give exactly one of id= and key=")
        cancelled = self._cancel(id, key, queue, note, actor)
        target = id if key is None else f"{queue or self.settings.default_queue}/{key}"
        outcome = "cancelled" if cancelled else "nothing to cancel"
        self._parts.audit.record(
            "message.cancel", target or "", actor=actor, outcome=outcome, note=note
        )
        return cancelled

    def _cancel(
        self,
        id: str | None,
        key: str | None,
        queue: str | None,
        note: str | None,
        actor: str | None,
    ) -> bool:
        if key is None:
            assert id is not None
            return self.backend.messages.delete(id, queue)
        queue = queue or self.settings.default_queue
        stored = self.backend.messages.get_by_key(queue, key)
        graph = None if stored is None else graph_of_anchor(stored.envelope.body)
        message = None if graph is None or stored is None else Message.decode(stored.envelope.body)
        if graph is not None and message is not None and message.trigger is None:
            # the key of a running graph: cancel each of its steps
            return cancel_graph(self.backend, graph) is not None
        cancelled = self.backend.messages.delete_by_key(queue, key)
        if cancelled and graph is not None:  # a scheduled graph: and the run it started
            cancel_graph(self.backend, graph)
        if cancelled and stored is not None and self.settings.history_keep > 0:
            message = Message.decode(stored.envelope.body)
            if message.trigger is not None:
                cancel = HistoryEntry(
                    RunOutcome.CANCELLED, message.scheduled_at, message_id=message.id
                )
                self._record(queue, key, cancel)
                self._act(queue, key, "cancel", actor, note)
        return cancelled

    def history(
        self, key: str, *, queue: str | None = None, limit: int | None = None
    ) -> list[HistoryEntry]:
        """The recorded occurrences of the schedule ``key``, newest first: each run (how
        it ended, when it was due, started and finished, its attempts, worker and error),
        and the occurrences that did not run (missed, coalesced, skipped by overlap or in
        a pause, excluded, cancelled). At most ``limit`` (default: all that are kept, the
        setting ``history_keep``). Without ``queue``, the queue that holds ``key`` (the
        default one first); a cancelled schedule of another queue needs its ``queue``."""
        return self._history(schedule_subject(key), self._queue_of(key, queue), limit)

    def _queue_of(self, key: str, queue: str | None) -> str:
        """``queue``, else the queue holding ``key``: the default one, or the only other
        queue a message holds it in (the default queue when none or several do)."""
        if queue is not None:
            return queue
        default, messages = self.settings.default_queue, self.backend.messages
        if messages.get_by_key(default, key) is not None:
            return default
        holders = [
            name
            for name in self.backend.queues.names()
            if name != default and messages.get_by_key(name, key) is not None
        ]
        return holders[0] if len(holders) == 1 else default

    def run_history(
        self, message_id: str, *, queue: str | None = None, limit: int | None = None
    ) -> list[HistoryEntry]:
        """The recorded attempts of the one-off message ``message_id`` (of a task with
        ``history=True``), newest first."""
        return self._history(message_subject(message_id), queue, limit)

    def _history(self, subject: str, queue: str | None, limit: int | None) -> list[HistoryEntry]:
        queue = queue or self.settings.default_queue
        limit = self.settings.history_keep if limit is None else limit
        return read_history(self.backend, queue, subject, limit)

    def _record(self, queue: str, key: str, record: HistoryEntry) -> None:
        """Append what steering did to schedule ``key``'s ledger (if the ledger is on)."""
        retention = Retention.of(self.settings)
        if retention is not None:
            entry = retention.entry(queue, schedule_subject(key), [record.encode()])
            self.backend.ledger.append([entry])

    def _act(
        self,
        queue: str,
        key: str,
        action: Verb,
        actor: str | None,
        note: str | None,
        detail: str | None = None,
    ) -> None:
        """Record a steering action in ``key``'s action log (``actions``) and in the
        operators' audit log (``app.audit``)."""
        at = to_datetime(self._now_ms())
        ActionLog(self.backend, self.settings).record(queue, key, action, at, actor, note, detail)
        if action != "cancel":  # a cancel is recorded as the message's (``cancel``)
            target, outcome = f"{queue}/{key}", detail or ""
            self._parts.audit.record(
                f"schedule.{action}", target, actor=actor, outcome=outcome, note=note
            )

    def actions(
        self, key: str, *, queue: str | None = None, limit: int | None = None
    ) -> builtins.list[Action]:
        """Who steered schedule ``key`` and why, newest first: each pause, resume, run
        now, backfill and cancel, with its time, actor and note. Without ``queue``, the
        queue that holds ``key`` (as ``history``)."""
        queue = self._queue_of(key, queue)
        limit = self.settings.history_keep if limit is None else limit
        return ActionLog(self.backend, self.settings).read(queue, key, limit)

    def pause(
        self,
        key: str,
        *,
        queue: str | None = None,
        note: str | None = None,
        actor: str | None = None,
    ) -> bool:
        """Pause the recurring schedule ``key``: nothing of it runs until it is resumed
        (stored in the backend: every worker, restarts included). It can still be read,
        replaced, cancelled and previewed. False if it was paused already; raises
        ``ScheduleNotFound``. ``note`` and ``actor`` go to its action log (``actions``;
        the actor defaults to this process's ``user@host``)."""
        queue = queue or self.settings.default_queue
        paused = control.pause_schedule(self.backend, self.builder, queue, key, self._now_ms())
        if paused:
            self._act(queue, key, "pause", actor, note)
        return paused

    def resume(
        self,
        key: str,
        *,
        queue: str | None = None,
        misfire: Misfire | str = Misfire.SKIP,
        limit: int | None = None,
        spacing: timedelta = timedelta(0),
        note: str | None = None,
        actor: str | None = None,
    ) -> Resumed | None:
        """Resume a paused schedule (None if it was not paused). What fell in the pause is
        skipped (``"skip"``, the default), run once now (``"coalesce"``), or run one by
        one (``"catch_up"``: at most ``limit``, ``spacing`` apart). Recorded in its action
        log with ``note`` and ``actor``."""
        queue = queue or self.settings.default_queue
        policy = Misfire(misfire)
        resumed = control.resume_schedule(
            self.backend, self.builder, queue, key, self._now_ms(), policy, limit, spacing
        )
        if resumed is not None and resumed.first_skipped is not None:
            skipped = HistoryEntry(
                RunOutcome.SKIPPED_PAUSED,
                resumed.first_skipped,
                count=resumed.skipped,
                last_at=resumed.last_skipped,
            )
            self._record(queue, key, skipped)
        if resumed is not None:
            self._act(queue, key, "resume", actor, note, f"misfire {policy}")
        return resumed

    def trigger_now(
        self,
        key: str,
        *,
        queue: str | None = None,
        note: str | None = None,
        actor: str | None = None,
    ) -> str:
        """Run the schedule ``key``'s task once now, apart from its grid (which does not
        move); returns the run's message id (header ``tickwork-origin: manual``).
        Recorded in its action log with ``note`` and ``actor``."""
        queue = queue or self.settings.default_queue
        run = control.trigger_now(self.backend, self.builder, queue, key, self._now_ms())
        self._act(queue, key, "run_now", actor, note, f"run {run}")
        return run

    def backfill(
        self,
        key: str,
        start: datetime,
        end: datetime,
        *,
        queue: str | None = None,
        limit: int = 1000,
        spacing: timedelta = timedelta(0),
        remember: timedelta = timedelta(days=30),
        note: str | None = None,
        actor: str | None = None,
    ) -> Backfill:
        """Run the occurrences of schedule ``key`` from ``start`` to ``end`` (past ones):
        enqueued now, ``spacing`` apart, at most ``limit`` (else nothing, one error). Asked
        again within ``remember`` it enqueues none twice (see ``control.backfill``).
        Recorded in its action log with ``note`` and ``actor``."""
        queue = queue or self.settings.default_queue
        now = self._now_ms()
        span = (start, end)
        filled = control.backfill(
            self.backend, self.builder, queue, key, span, now, limit, spacing, remember
        )
        detail = (
            f"{start.isoformat()} to {end.isoformat()}: {filled.enqueued} enqueued, "
            f"{filled.already} backfilled before"
        )
        self._act(queue, key, "backfill", actor, note, detail)
        return filled

    def list(self, queue: str | None = None) -> builtins.list[ScheduleInfo]:
        """Keyed recurring messages with their next run, last run, misfires and how their
        last recorded run ended (the ledgers read in one backend call)."""
        infos = control.schedules(self.backend, queue)
        if self.settings.history_keep == 0:
            return infos
        subjects = [(info.queue, schedule_subject(info.key)) for info in infos]
        recent = read_histories(self.backend, subjects, _RECENT)
        return [_with_history(info, entries) for info, entries in zip(infos, recent, strict=True)]

    def install(
        self, periodics: Sequence[Periodic], reconcile: bool = False
    ) -> builtins.list[Outcome]:
        """Install each ``@app.periodic`` schedule by its key (workers do at start). One
        installed with the same trigger is left alone; one whose trigger changed in
        code is replaced. With ``reconcile``, then uninstall those the code no longer
        declares (``reconcile``)."""
        outcomes = []
        for periodic in periodics:
            stored = self.backend.messages.get_by_key(periodic.queue, periodic.key)
            current = None if stored is None else Message.decode(stored.envelope.body)
            if _installed(current, periodic):
                outcomes.append(Outcome.IGNORED)
                continue
            mode = OnConflict.IGNORE if current is None else OnConflict.REPLACE
            call = Call(
                periodic.task,
                key=periodic.key,
                trigger=periodic.trigger,
                queue=periodic.queue,
                headers={PERIODIC: owner_of(periodic.task)},
            )
            _, envelope = self.builder.build(call)
            written = self.backend.messages.enqueue([envelope], mode)
            if written == [Outcome.REPLACED]:
                note = "its @app.periodic declares another trigger"
                detail = periodic.trigger.describe()
                self._act(periodic.queue, periodic.key, "replace", "tickwork", note, detail)
            outcomes.extend(written)
        if reconcile:
            self.reconcile(periodics)
        return outcomes

    def reconcile(self, periodics: Sequence[Periodic]) -> builtins.list[str]:
        """Uninstall the periodic schedules this app owns that the code no longer declares
        (workers do at start, after ``install``): those installed from a module of one of
        this app's tasks (their ``tickwork-periodic`` header) whose key is not among
        ``periodics``; each recorded in its action log (``uninstall``, actor
        ``tickwork``). Returns their keys. A schedule whose whole module is gone is not
        known to be this app's: cancel it by key."""
        owners = {owner_of(name) for name in self.builder.registry.tasks}
        declared = {(periodic.queue, periodic.key) for periodic in periodics}
        removed = []
        for stored in self.backend.messages.keyed():
            envelope = stored.envelope
            if envelope.key is None or (envelope.queue, envelope.key) in declared:
                continue
            if PERIODIC.encode() not in envelope.body:
                continue
            try:
                owner = Message.decode(envelope.body).headers.get(PERIODIC)
            except DecodeError:
                continue
            if owner not in owners:
                continue
            if self.backend.messages.delete_by_key(envelope.queue, envelope.key):
                note = f"@app.periodic no longer declares it (its module {owner} does not)"
                self._act(envelope.queue, envelope.key, "uninstall", "tickwork", note)
                removed.append(envelope.key)
        return removed

    def overdue(self, max_late: timedelta, queue: str | None = None) -> builtins.list[Overdue]:
        """Schedules with no successful run within their period plus ``max_late``."""
        now = to_datetime(self._now_ms())
        return control.overdue(self.list(queue), now, max_late)


def owner_of(task: str) -> str:
    """The module a periodic schedule of ``task`` belongs to (its task's, by name)."""
    return task.rpartition(".")[0] or task


def _installed(current: Message | None, periodic: Periodic) -> bool:
    """Whether ``current`` (what holds the periodic schedule's key) is that schedule."""
    trigger = None if current is None else current.trigger
    return trigger is not None and control.same_schedule(trigger, periodic.trigger)


def _with_history(info: ScheduleInfo, recent: list[HistoryEntry]) -> ScheduleInfo:
    """``info`` with its last recorded outcome (from its ``recent`` records); for a
    schedule whose runs overlap (their own messages, so its chain never sees them end),
    its last success too."""
    outcome = next((h.outcome.value for h in recent if h.outcome not in NOT_RUN), None)
    last_success = info.last_success
    if info.trigger.overlap is not Overlap.SERIAL:
        succeeded = (h.scheduled_at for h in recent if h.outcome is RunOutcome.SUCCEEDED)
        last_success = next(succeeded, last_success)
    return replace(info, last_outcome=outcome, last_success=last_success)
