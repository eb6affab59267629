"""Steering stored messages: aborting runs, listing schedules, pausing and resuming them,
running one now, backfilling a past range (the logic behind ``App.abort`` and
``app.schedules``: ``list``, ``pause``, ``resume``, ``trigger_now``, ``backfill``).

A paused schedule is its pending message, stored with ``paused_at`` set and due at
``PAUSED_DUE`` (far past any real due time), so no worker claims it while it can still be
read, replaced and cancelled by its key like any schedule, on every backend, and it stays
paused across worker restarts. Resuming puts the pending occurrence (or the next one, per
the misfire policy given) back on the grid.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from tickwork.scheduler.backends import (
    AbortRequest,
    Backend,
    Envelope,
    OnConflict,
    Outcome,
    State,
    StoredMessage,
)
from tickwork.scheduler.clock import to_datetime, to_ms
from tickwork.scheduler.errors import BackendError, DecodeError, InvalidMessage, ScheduleNotFound
from tickwork.scheduler.ids import identity_chain_id, occurrence_id
from tickwork.scheduler.model.message import PAUSED_DUE, Message
from tickwork.scheduler.producing.building import MessageBuilder
from tickwork.triggers import Misfire, Trigger
from tickwork.triggers.base import Fire

_PAUSE_ATTEMPTS = 10
_SKIPPED_WALK = 1000  # skipped occurrences named by time on resume, at most (all counted)

#: an abort request outlives the run it targets by this much past twice its timeout, so a
#: redelivery after a worker crash is stopped too
ABORT_MARGIN_MS = 60_000

log = logging.getLogger("tickwork.schedules")


class AbortResult(StrEnum):
    """What ``App.abort`` did."""

    REQUESTED = "requested"  # the message is running: the worker holding it stops it
    CANCELLED = "cancelled"  # the message was pending: it was cancelled and never runs
    NOT_FOUND = "not_found"  # nothing is stored under that id or key


def abort(
    backend: Backend, stored: StoredMessage | None, continue_chain: bool, now_ms: int
) -> AbortResult:
    """Abort ``stored``: request a stop if it runs, cancel it if it waits.

    A message claimed between the read and the cancel runs, but its ack is refused (the
    same fence as ``cancel``): its chain ends there."""
    if stored is None:
        return AbortResult.NOT_FOUND
    envelope = stored.envelope
    if stored.state is not State.RUNNING:
        deleted = backend.messages.delete(envelope.id, envelope.queue)
        return AbortResult.CANCELLED if deleted else AbortResult.NOT_FOUND
    expires_ms = now_ms + 2 * envelope.timeout_ms + ABORT_MARGIN_MS
    backend.aborts.request(
        AbortRequest(envelope.id, envelope.queue, continue_chain, now_ms, expires_ms)
    )
    return AbortResult.REQUESTED


@dataclass(frozen=True)
class ScheduleInfo:
    """A keyed recurring message as ``tickwork schedules`` shows it."""

    queue: str
    key: str
    task: str
    trigger: Trigger
    next_run: datetime
    last_run: datetime | None
    misfires: int
    state: State
    paused_at: datetime | None = None
    last_success: datetime | None = None  # scheduled time of the last run that succeeded
    last_outcome: str | None = None  # how its last recorded run ended (the ledger)
    #: the grid time of its pending occurrence (``next_run`` is when it is due: later, for
    #: one given back to run again, retried or snoozed)
    occurrence_at: datetime | None = None


@dataclass(frozen=True)
class Overdue:
    """A schedule with no success when one was expected (``app.schedules.overdue``)."""

    schedule: ScheduleInfo
    expected_by: datetime  # the latest a success was due, plus the margin


def overdue(infos: list[ScheduleInfo], now: datetime, max_late: timedelta) -> list[Overdue]:
    """The schedules (not paused) whose next success after the last one (or whose first
    run, or whose failed runs) is more than ``max_late`` behind ``now``: a dead man's
    check. A schedule that never succeeded is due a success by its last run."""
    late = []
    for info in infos:
        if info.paused_at is not None:
            continue
        if info.last_success is not None:
            expected = info.trigger.after(info.last_success, 0)
            due = None if expected is None else expected.at
        else:
            pending = min(info.next_run, info.occurrence_at or info.next_run)
            due = info.last_run or pending
        if due is not None and due + max_late < now:
            late.append(Overdue(info, due + max_late))
    return late


@dataclass(frozen=True)
class Resumed:
    """What ``app.schedules.resume`` did."""

    next_run: datetime | None  # None: the trigger has no occurrence left; the chain ended
    skipped: int  # occurrences that fell in the pause and will not run
    caught_up: int  # occurrences that fell in the pause, enqueued to run now (catch_up)
    first_skipped: datetime | None = None  # the grid time of the first skipped one
    last_skipped: datetime | None = None  # and of the last (None when not walked that far)


def find_schedule(backend: Backend, queue: str, key: str) -> tuple[StoredMessage, Message]:
    """The stored message of the recurring schedule ``key`` and its decoded body."""
    stored = backend.messages.get_by_key(queue, key)
    if stored is None:
        raise ScheduleNotFound(f"no schedule holds the key {key!r} in queue {queue!r}")
    message = Message.decode(stored.envelope.body)
    if message.trigger is None:
        raise InvalidMessage(f"the message holding the key {key!r} is not a recurring schedule")
    return stored, message


def pause_schedule(
    backend: Backend, builder: MessageBuilder, queue: str, key: str, now_ms: int
) -> bool:
    """Pause the schedule ``key``; False if it was paused already. A run in progress
    finishes; the pause holds the occurrence after it.

    The live chain is cancelled first, which fences a worker acking it, then its paused
    copy is stored in the key's place; if the cancel found the chain moved on, the pause
    is taken again from where it is now. (Replacing in one write raced with such an ack:
    on Cassandra the acked occurrence could survive beside the paused copy and keep
    running; refusing to store over a key taken after the cancel lost the schedule.)"""
    for _ in range(_PAUSE_ATTEMPTS):
        stored, message = find_schedule(backend, queue, key)
        if message.paused_at is not None:
            return False
        if message.then or message.start is not None:
            raise InvalidMessage(
                f"{key!r} is a recurring chain: pausing one is not supported yet (cancel "
                "it by its key and enqueue it again to resume)"
            )
        if stored.state is State.RUNNING:
            following = builder.next_occurrence(message, now_ms)
            if following is None:
                raise InvalidMessage(
                    f"the last run of {key!r} is running: nothing is left to pause"
                )
            message = Message.decode(following.body)
        paused = message.model_copy(update={"paused_at": to_datetime(now_ms)})
        if not backend.messages.delete_by_key(queue, key):
            continue  # it moved on meanwhile: read it again
        _store(backend, builder.restored(paused, PAUSED_DUE))
        return True
    raise BackendError(f"the schedule {key!r} kept moving; pausing it failed: try again")


def _store(backend: Backend, envelope: Envelope) -> None:
    """Store a paused schedule whose live chain was just cancelled: a backend error is
    tried again (three times) before it is raised, as the schedule exists only here."""
    for attempt in range(3):
        try:
            # REPLACE, not ERROR: the chain is cancelled, so whatever holds the key now is
            # a stale view of it, and failing here would lose the schedule
            backend.messages.enqueue([envelope], OnConflict.REPLACE)
            return
        except BackendError:
            if attempt == 2:
                raise
            time.sleep(0.2 * (attempt + 1))


def resume_schedule(
    backend: Backend,
    builder: MessageBuilder,
    queue: str,
    key: str,
    now_ms: int,
    misfire: Misfire,
    limit: int | None = None,
    spacing: timedelta = timedelta(0),
) -> Resumed | None:
    """Resume the schedule ``key`` (None if it was not paused). Occurrences that fell in
    the pause are skipped (``SKIP``), run once now (``COALESCE``), or each run as a
    one-off (``CATCH_UP``: at most ``limit``, default the trigger's ``max_catch_up``,
    ``spacing`` apart; the rest are skipped); the schedule goes on from the first grid
    time after now (or from the coalesced run)."""
    _, message = find_schedule(backend, queue, key)
    if message.paused_at is None:
        return None
    assert message.trigger is not None
    trigger = builder.shared(message.trigger).with_misfires(message.misfires)
    now = to_datetime(now_ms)
    pending = Fire(message.scheduled_at, message.occurrence)
    envelopes = []
    caught: list[Fire] = []
    if misfire is Misfire.CATCH_UP:
        caught = trigger.missed(pending, now, trigger.max_catch_up if limit is None else limit)
        step_ms = int(spacing / timedelta(milliseconds=1))
        for i, missed in enumerate(caught):
            chain = identity_chain_id(queue, f"catch-up\x00{message.chain}\x00{missed.occurrence}")
            run = builder.one_off(message, missed.at, now_ms, "catch-up", chain)
            envelopes.append(run._replace(due_ms=now_ms + i * step_ms))
    fire = trigger.after_pause(pending, now, misfire)
    if fire is None:
        backend.messages.delete_by_key(queue, key)
        backend.messages.enqueue(envelopes, OnConflict.REPLACE)
        return Resumed(None, 0, len(caught))
    skipped = 0 if misfire is Misfire.COALESCE else fire.misfires - len(caught)
    due = trigger.missed(pending, now, min(len(caught) + skipped, _SKIPPED_WALK))[len(caught) :]
    resumed = message.model_copy(
        update={
            "id": occurrence_id(message.chain, fire.occurrence),
            "occurrence": fire.occurrence,
            "scheduled_at": fire.at,
            "misfires": message.misfires + fire.misfires - len(caught),
            "paused_at": None,
        }
    )
    envelopes.append(builder.restored(resumed, fire.at))
    backend.messages.enqueue(envelopes, OnConflict.REPLACE)
    first = due[0].at if due and skipped else None
    last = due[-1].at if len(due) == skipped > 1 else None
    return Resumed(fire.at, skipped, len(caught), first, last)


def trigger_now(
    backend: Backend, builder: MessageBuilder, queue: str, key: str, now_ms: int
) -> str:
    """Enqueue one run of schedule ``key``'s task and arguments now, apart from its grid
    (the schedule is not moved; paused or not); returns the run's message id."""
    _, message = find_schedule(backend, queue, key)
    run = builder.one_off(message, to_datetime(now_ms), now_ms, "manual")
    backend.messages.enqueue([run])
    return run.id


@dataclass(frozen=True)
class Backfill:
    """What ``app.schedules.backfill`` did."""

    occurrences: list[datetime]  # the schedule's grid times in the range, oldest first
    enqueued: int  # runs enqueued now
    already: int  # runs a backfill enqueued before: waiting, running or succeeded


def backfill(
    backend: Backend,
    builder: MessageBuilder,
    queue: str,
    key: str,
    span: tuple[datetime, datetime],
    now_ms: int,
    limit: int,
    spacing: timedelta,
    remember: timedelta,
) -> Backfill:
    """Enqueue a run of each occurrence of schedule ``key`` from ``span``'s start to its
    end (at the latest now), oldest first, ``spacing`` apart from now. Each run is keyed
    by the schedule's key and the occurrence's time, and keeps that key for ``remember``
    after it succeeds, so a backfill asked again enqueues none of them twice; a run that
    failed for good frees its key, so asking again retries it. More than ``limit``
    occurrences in the range is an ``InvalidMessage``, and nothing is enqueued."""
    start, end = span
    if start.tzinfo is None or end.tzinfo is None:
        raise InvalidMessage("backfill start and end must be timezone-aware datetimes")
    if start > end:
        raise InvalidMessage(f"backfill start {start.isoformat()} is after its end")
    _, message = find_schedule(backend, queue, key)
    assert message.trigger is not None
    trigger = builder.shared(message.trigger)
    fires = trigger.between(start, min(end, to_datetime(now_ms)), limit + 1)
    if len(fires) > limit:
        raise InvalidMessage(
            f"the range holds more than {limit} occurrences of {key!r}: narrow it or raise limit"
        )
    step_ms = spacing // timedelta(milliseconds=1)
    envelopes = []
    for i, fire in enumerate(fires):
        run_key = f"{key}/backfill/{to_ms(fire.at)}"
        chain = identity_chain_id(queue, f"backfill\x00{run_key}")
        run = builder.one_off(message, fire.at, now_ms, "backfill", chain, run_key, remember)
        envelopes.append(run._replace(due_ms=now_ms + i * step_ms))
    outcomes = backend.messages.enqueue(envelopes, OnConflict.IGNORE)
    enqueued = sum(outcome is Outcome.ENQUEUED for outcome in outcomes)
    return Backfill([fire.at for fire in fires], enqueued, len(fires) - enqueued)


def schedules(backend: Backend, queue: str | None = None) -> list[ScheduleInfo]:
    """Keyed recurring messages (of ``queue``, or all) with next run, last run, misfires."""
    result = []
    for stored in backend.messages.keyed(queue):
        try:
            message = Message.decode(stored.envelope.body)
        except DecodeError as err:  # encrypted under a key this app lacks, or damaged
            log.warning(
                "schedule %s of %s left out: %s", stored.envelope.key, stored.envelope.queue, err
            )
            continue
        if message.trigger is None or message.key is None:
            continue
        paused = message.paused_at is not None
        result.append(
            ScheduleInfo(
                message.queue,
                message.key,
                message.start.first.task if message.start is not None else message.task,
                message.trigger,
                message.scheduled_at if paused else to_datetime(stored.envelope.due_ms),
                message.last_run_at,
                message.misfires,
                stored.state,
                message.paused_at,
                message.last_success_at,
                occurrence_at=message.scheduled_at,
            )
        )
    return result


def same_schedule(a: Trigger, b: Trigger) -> bool:
    """Equal apart from the anchor that enqueue fills in."""
    ignore = {"start", "delay", "at"}
    return type(a) is type(b) and a.model_dump(exclude=ignore) == b.model_dump(exclude=ignore)
