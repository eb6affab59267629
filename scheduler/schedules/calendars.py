"""Named calendars: exclusions (dates, ranges, holidays, time windows) stored once in the
backend and shared by every schedule that names them (``Cron(..., calendar="ops")``), as
Quartz's calendars are. Updating one changes every schedule using it from its next
occurrence on; each change is recorded in the calendar's own action log (who, when,
why).

A calendar is a parked message (never due) in the queue ``CALENDARS_QUEUE``, keyed by its
name, whose one argument is its ``Exclusions``. Triggers stay pure: whoever plans one
that names a calendar attaches the calendar's rules first (``SharedCalendars.resolve``,
what the message builder, the worker's ledger, previews and the schedule verbs do). Each
process reads the calendars at most once every ``REFRESH_S`` seconds, and only when a
trigger names one, so a change reaches every worker within that time.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from pydantic import ValidationError

from tickwork.scheduler.backends import Backend, OnConflict
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.errors import CalendarNotFound, DecodeError, InvalidMessage
from tickwork.scheduler.model.message import Message, kept_record
from tickwork.scheduler.model.names import check_queue
from tickwork.scheduler.schedules.actions import Action, ActionLog
from tickwork.triggers import Exclusions, Trigger

if TYPE_CHECKING:
    from tickwork.scheduler.parts import AppParts

log = logging.getLogger("tickwork.calendars")

#: the queue holding the named calendars (nothing in it is ever due)
CALENDARS_QUEUE = "tickwork.calendars"

#: the task name of a stored calendar's message
CALENDAR_TASK = "tickwork.calendar"

#: how long a process plans with the calendars it read before it reads them again
REFRESH_S = 5.0


class SharedCalendars:
    """The named calendars of an app's backend: ``app.schedules.calendars``."""

    def __init__(self, parts: AppParts) -> None:
        self._parts = parts
        self._lock = threading.Lock()
        self._read: dict[str, Exclusions] = {}
        self._read_at = float("-inf")
        self._read_from: Backend | None = None
        self._warned: set[str] = set()

    @property
    def backend(self) -> Backend:
        return self._parts.backend

    def put(
        self, name: str, rules: Exclusions, *, note: str | None = None, actor: str | None = None
    ) -> None:
        """Store calendar ``name`` (a new one, or a change of it: every schedule naming it
        follows from its next occurrence), recorded in its action log."""
        _check_name(name)
        now = to_datetime(self.backend.now_ms())
        record = rules.model_dump(mode="json", exclude_defaults=True)
        envelope = kept_record(CALENDARS_QUEUE, CALENDAR_TASK, name, record, now)
        self.backend.messages.enqueue([envelope], OnConflict.REPLACE)
        self._log().record(CALENDARS_QUEUE, name, "calendar", now, actor, note, rules.describe())
        self._parts.audit.record(
            "calendar.put", name, actor=actor, outcome=rules.describe(), note=note
        )
        self._read_at = float("-inf")

    def get(self, name: str) -> Exclusions | None:
        """Calendar ``name`` as stored now, or None."""
        stored = self.backend.messages.get_by_key(CALENDARS_QUEUE, name)
        return None if stored is None else _decode(stored.envelope.body)

    def all(self) -> dict[str, Exclusions]:
        """Every calendar stored, by name (one read)."""
        found = {}
        for stored in self.backend.messages.keyed(CALENDARS_QUEUE):
            rules = _decode(stored.envelope.body)
            if rules is not None and stored.envelope.key is not None:
                found[stored.envelope.key] = rules
        return dict(sorted(found.items()))

    def users(self, name: str) -> list[tuple[str, str]]:
        """The schedules (queue, key) whose trigger names calendar ``name``."""
        marker = f'"calendar":"{name}"'.encode()
        found = []
        for stored in self.backend.messages.keyed():
            envelope = stored.envelope
            if envelope.key is None or marker not in envelope.body.replace(b" ", b""):
                continue
            try:
                trigger = Message.decode(envelope.body).trigger
            except DecodeError:
                continue
            if trigger is not None and trigger.calendar == name:
                found.append((envelope.queue, envelope.key))
        return found

    def delete(self, name: str, *, note: str | None = None, actor: str | None = None) -> bool:
        """Remove calendar ``name``; ``CalendarNotFound`` if there is none. Refused
        (``InvalidMessage``) while a schedule names it: change or cancel those first."""
        used = self.users(name)
        if used:
            keys = ", ".join(key for _, key in used[:5])
            raise InvalidMessage(f"calendar {name!r} is used by {len(used)} schedule(s): {keys}")
        deleted = self.backend.messages.delete_by_key(CALENDARS_QUEUE, name)
        if not deleted:
            raise CalendarNotFound(f"no calendar is named {name!r}")
        if deleted:
            now = to_datetime(self.backend.now_ms())
            self._log().record(CALENDARS_QUEUE, name, "calendar", now, actor, note, "deleted")
            self._parts.audit.record(
                "calendar.delete", name, actor=actor, outcome="deleted", note=note
            )
            self._read_at = float("-inf")
        return deleted

    def history(self, name: str, limit: int = 50) -> list[Action]:
        """Who changed calendar ``name``, when and why, newest first."""
        return self._log().read(CALENDARS_QUEUE, name, limit)

    def resolve(self, trigger: Trigger) -> Trigger:
        """``trigger`` with its named calendar's rules attached (itself if it names none).
        A calendar that is not stored is planned without, and logged once."""
        name = trigger.calendar
        if name is None:
            return trigger
        rules = self._fresh().get(name)
        if rules is None and name not in self._warned:
            self._warned.add(name)
            log.warning("calendar %r is not stored: its schedules run without it", name)
        return trigger.with_shared(rules)

    def require(self, trigger: Trigger) -> Trigger:
        """``resolve``, refusing (``InvalidMessage``) a calendar that is not stored: what
        an enqueue does, so nothing names a calendar that does not exist."""
        if trigger.calendar is not None and trigger.calendar not in self._fresh(force=True):
            raise InvalidMessage(
                f"no calendar named {trigger.calendar!r} is stored "
                "(app.schedules.calendars.put, or tickwork calendars set)"
            )
        return self.resolve(trigger)

    def _fresh(self, force: bool = False) -> dict[str, Exclusions]:
        backend = self.backend
        with self._lock:
            stale = time.monotonic() - self._read_at > REFRESH_S
            if force or stale or backend is not self._read_from:
                self._read = self.all()
                self._read_at, self._read_from = time.monotonic(), backend
            return self._read

    def _log(self) -> ActionLog:
        return ActionLog(self.backend, self._parts.settings)


def _check_name(name: str) -> None:
    check_queue(name, "a calendar's name")


def _decode(body: bytes) -> Exclusions | None:
    try:
        message = Message.decode(body)
        if message.task != CALENDAR_TASK or not message.args:
            return None
        return Exclusions.model_validate(message.args[0])
    except (DecodeError, ValidationError, ValueError):
        return None
