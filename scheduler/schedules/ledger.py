"""The occurrence ledger: what happened to each occurrence of a keyed recurring schedule
(and, on request, to each attempt of a one-off message), kept by the backend per subject.

A record (``HistoryEntry``) says when the occurrence was scheduled, when it started and
finished, how it ended (``RunOutcome``), after how many attempts, on which worker, and the
first line of its error. Runs write theirs in the same atomic step as the ack, retry or
poison they describe (``Leases.ack``'s ``ledger``); steering writes the rest (a cancel,
occurrences skipped in a pause). A schedule's ledger keeps its newest ``history_keep``
records (setting, default 100; 0 turns the ledger off), none older than
``history_max_age_s`` (default 30 days).

Stored form: compact JSON with times as epoch milliseconds and short names, as a run
writes one per occurrence (see ``encode``). Records that fail to decode are skipped when
read, never raised: the history is a view, not a contract a user's run depends on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic_core import from_json, to_json

from tickwork.scheduler.backends import Backend, LedgerEntry
from tickwork.scheduler.clock import to_datetime, to_ms
from tickwork.scheduler.model import headers as header_names
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.settings import Settings

SCHEDULE_HEADER = header_names.SCHEDULE
ORIGIN_HEADER = header_names.ORIGIN

_ERROR_CHARS = 300  # the one-line error kept in a record, at most


class RunOutcome(StrEnum):
    """How an occurrence (or an attempt) ended."""

    SUCCEEDED = "succeeded"
    RETRIED = "retried"  # an attempt failed; the run is due again (the record of the attempt)
    POISONED = "poisoned"  # failed for good: in the poison queue
    ABORTED = "aborted"  # stopped by ``app.abort``
    MISSED = "missed"  # never run: the misfire policy skipped it (workers were behind)
    COALESCED = "coalesced"  # never run on its own: folded into one late run (misfire)
    SKIPPED_OVERLAP = "skipped_overlap"  # fell while the previous occurrence still ran
    SKIPPED_PAUSED = "skipped_paused"  # fell while the schedule was paused
    EXCLUDED = "excluded"  # on a date the schedule's calendar excludes
    CANCELLED = "cancelled"  # the schedule was cancelled before it ran
    EXPIRED = "expired"  # never run: not started before it expired (``expires``)
    THROTTLED = "throttled"  # never run: over its task's throttle, which drops the excess
    SNOOZED = "snoozed"  # the handler asked to run again later (``Snooze``): not an attempt
    #: not run here: no task of its name is registered on the worker that took it (a
    #: rolling deploy); given back for a worker that knows it, not an attempt
    DEFERRED = "deferred"


#: outcomes that describe occurrences that never ran (a record may stand for ``count``)
NOT_RUN = frozenset(
    {
        RunOutcome.MISSED,
        RunOutcome.COALESCED,
        RunOutcome.SKIPPED_OVERLAP,
        RunOutcome.SKIPPED_PAUSED,
        RunOutcome.EXCLUDED,
        RunOutcome.CANCELLED,
        RunOutcome.EXPIRED,
        RunOutcome.THROTTLED,
    }
)


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One record of a schedule's (or a message's) history."""

    outcome: RunOutcome
    scheduled_at: datetime  # the occurrence's grid time (the first, when ``count`` > 1)
    origin: str = "scheduled"  # or "manual", "catch-up", "backfill", "one-off"
    started_at: datetime | None = None
    finished_at: datetime | None = None
    attempts: int = 0  # the attempt this record ends (0: it never ran)
    worker: str | None = None  # host:pid of the worker that ran it
    error: str | None = None  # the error's first line
    message_id: str | None = None
    count: int = 1  # occurrences this record stands for (missed, coalesced, skipped...)
    last_at: datetime | None = None  # the last of them, when ``count`` > 1
    note: str | None = None  # why, in words (an excluded date's holiday, ...)

    @property
    def lateness(self) -> timedelta | None:
        """From the scheduled time to the start (None if it never started)."""
        if self.started_at is None:
            return None
        return max(timedelta(0), self.started_at - self.scheduled_at)

    @property
    def duration(self) -> timedelta | None:
        """From the start to the finish (None if it never started)."""
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at

    def encode(self) -> bytes:
        """The compact stored form (``run_record``)."""
        return run_record(
            self.outcome,
            to_ms(self.scheduled_at),
            self.origin,
            None if self.started_at is None else to_ms(self.started_at),
            None if self.finished_at is None else to_ms(self.finished_at),
            self.attempts,
            self.worker,
            self.error,
            self.message_id,
            self.count,
            None if self.last_at is None else to_ms(self.last_at),
            self.note,
        )

    @classmethod
    def decode(cls, record: bytes) -> HistoryEntry | None:
        """A stored record, or None when it cannot be read."""
        try:
            data = from_json(record)
            return cls(
                outcome=RunOutcome(data["o"]),
                scheduled_at=to_datetime(int(data["s"])),
                origin=str(data.get("g", "scheduled")),
                started_at=_time(data.get("b")),
                finished_at=_time(data.get("f")),
                attempts=int(data.get("a", 0)),
                worker=data.get("w"),
                error=data.get("e"),
                message_id=data.get("i"),
                count=int(data.get("c", 1)),
                last_at=_time(data.get("l")),
                note=data.get("n"),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def as_json(self) -> dict[str, Any]:
        """For ``--json``: times in UTC ISO 8601, lateness and duration in seconds."""
        lateness, duration = self.lateness, self.duration
        return {
            "outcome": self.outcome.value,
            "scheduled_at": self.scheduled_at.isoformat(),
            "origin": self.origin,
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
            "lateness_s": None if lateness is None else lateness.total_seconds(),
            "duration_s": None if duration is None else duration.total_seconds(),
            "attempts": self.attempts,
            "worker": self.worker,
            "error": self.error,
            "message_id": self.message_id,
            "count": self.count,
            "last_at": _iso(self.last_at),
            "note": self.note,
        }


def run_record(
    outcome: RunOutcome,
    scheduled_ms: int,
    origin: str = "scheduled",
    started_ms: int | None = None,
    finished_ms: int | None = None,
    attempts: int = 0,
    worker: str | None = None,
    error: str | None = None,
    message_id: str | None = None,
    count: int = 1,
    last_ms: int | None = None,
    note: str | None = None,
) -> bytes:
    """A record in its stored form: JSON with one-letter names, times in epoch ms, and
    defaults left out (a worker builds one per settled run, from the ms it has)."""
    fields: dict[str, Any] = {"o": outcome.value, "s": scheduled_ms}
    if origin != "scheduled":
        fields["g"] = origin
    if started_ms is not None:
        fields["b"] = started_ms
    if finished_ms is not None:
        fields["f"] = finished_ms
    if attempts:
        fields["a"] = attempts
    if worker:
        fields["w"] = worker
    if error:
        fields["e"] = error
    if message_id:
        fields["i"] = message_id
    if count != 1:
        fields["c"] = count
    if last_ms is not None:
        fields["l"] = last_ms
    if note:
        fields["n"] = note
    return to_json(fields)


class RecordWriter:
    """Writes the records of one worker's runs, in ``run_record``'s form byte for byte,
    its name encoded once. The common record (a scheduled occurrence that started and
    ended without an error) is filled into a template: a worker writes one per settled
    run of a schedule."""

    def __init__(self, worker: str) -> None:
        self.worker = worker
        self._worker_field = b',"w":' + to_json(worker) if worker else b""

    def run(
        self,
        outcome: RunOutcome,
        scheduled_ms: int,
        origin: str,
        started_ms: int | None,
        finished_ms: int,
        attempts: int,
        error: str | None,
        message_id: str,
    ) -> bytes:
        """The record of a run that ended with ``outcome`` (``run_record``'s fields)."""
        if (
            origin == "scheduled"
            and started_ms is not None
            and attempts > 0
            and message_id
            and not error
        ):
            return _RUN % (
                _OUTCOMES[outcome],
                scheduled_ms,
                started_ms,
                finished_ms,
                attempts,
                self._worker_field,
                to_json(message_id),
            )
        return run_record(
            outcome,
            scheduled_ms,
            origin,
            started_ms,
            finished_ms,
            attempts,
            self.worker,
            error,
            message_id,
        )


#: ``run_record``'s form of a scheduled run with a start, a finish, attempts, a message id
#: and no error; the ``%s`` after the attempts is the worker's whole field (or nothing)
_RUN = b'{"o":"%s","s":%d,"b":%d,"f":%d,"a":%d%s,"i":%s}'
_OUTCOMES = {outcome: outcome.value.encode() for outcome in RunOutcome}


def _time(value: Any) -> datetime | None:
    return None if value is None else to_datetime(int(value))


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def schedule_subject(key: str) -> str:
    """The ledger subject of the keyed schedule ``key``."""
    return f"k:{key}"


def message_subject(message_id: str) -> str:
    """The ledger subject of the one-off message ``message_id`` (``history=True``)."""
    return f"m:{message_id}"


def one_line(error: str) -> str:
    """An error's first line, at most ``_ERROR_CHARS`` characters."""
    line = error.strip().splitlines()[0] if error.strip() else ""
    return line if len(line) <= _ERROR_CHARS else line[: _ERROR_CHARS - 1] + "…"


def subject_of(message: Message, keeps_history: bool) -> str | None:
    """Which ledger a run of ``message`` writes to: its schedule's (a keyed recurring
    message, or a run made from one), its own (``keeps_history``: its task asked for
    history), or none."""
    if SCHEDULE_HEADER in message.headers:
        return schedule_subject(message.headers[SCHEDULE_HEADER])
    if message.trigger is not None and message.key is not None:
        return schedule_subject(message.key)
    if keeps_history:
        return message_subject(message.id)
    return None


def origin_of(message: Message) -> str:
    """``scheduled`` for a schedule's own occurrences, else why the run exists."""
    if message.trigger is not None:
        return "scheduled"
    return message.headers.get(ORIGIN_HEADER, "one-off")


@dataclass(frozen=True, slots=True)
class Retention:
    """How much of a ledger the backend keeps: the newest ``keep``, for ``ttl_ms``."""

    keep: int
    ttl_ms: int

    @classmethod
    def of(cls, settings: Settings) -> Retention | None:
        """The retention the settings ask for (``history_keep``, ``history_max_age_s``),
        or None when the ledger is off (``history_keep=0``)."""
        if settings.history_keep == 0:
            return None
        return cls(settings.history_keep, int(settings.history_max_age_s * 1000))

    def entry(self, queue: str, subject: str, records: list[bytes]) -> LedgerEntry:
        """The entry appending ``records`` (stored forms) to ``subject``'s ledger."""
        return LedgerEntry(queue, subject, tuple(records), self.keep, self.ttl_ms)


def read_history(backend: Backend, queue: str, subject: str, limit: int) -> list[HistoryEntry]:
    """The newest ``limit`` records of ``subject``, newest first (unreadable ones left out)."""
    return read_histories(backend, [(queue, subject)], limit)[0]


def read_histories(
    backend: Backend, subjects: list[tuple[str, str]], limit: int
) -> list[list[HistoryEntry]]:
    """``read_history`` of each ``(queue, subject)``, in one backend call."""
    decoded = []
    for records in backend.ledger.read_many(subjects, limit):
        found = (HistoryEntry.decode(r) for r in records)
        decoded.append([entry for entry in found if entry is not None])
    return decoded
