"""Who steered a schedule, and why: the action log.

Every steering action on a keyed schedule (pause, resume, run now, backfill, replace (an
enqueue with ``on_conflict="replace"`` that replaced it), cancel, and
the uninstall of a periodic schedule the code no longer declares), and each change of a
named calendar (``scheduler.schedules.calendars``: its own log), is
recorded with its time, its actor and an optional note, in a ledger of its own beside
the schedule's history (subject ``k:KEY#actions``), kept as the history is
(``history_keep``, ``history_max_age_s``). The actor is what the caller says
(``actor=``); by default the user and host of the process that acted (the command line's
``user@host``), and the dashboard gives its signed-in user where its host knows one.
``app.schedules.actions(key)`` and ``tickwork schedules history KEY --actions`` read it.
"""

from __future__ import annotations

import getpass
import socket
from datetime import datetime
from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from tickwork.scheduler.backends import Backend
from tickwork.scheduler.schedules.ledger import Retention, schedule_subject
from tickwork.scheduler.settings import Settings

Verb = Literal[
    "pause", "resume", "run_now", "backfill", "replace", "cancel", "uninstall", "calendar"
]

#: the longest note kept (a note is a line for people, not a payload)
NOTE_MOST = 500


class Action(BaseModel):
    """One steering action on a schedule."""

    model_config = ConfigDict(frozen=True)

    action: Verb
    at: datetime
    actor: str
    note: str | None = None
    detail: str | None = None  # what it did: "12 occurrence(s) enqueued", a run's id

    def encode(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()

    @classmethod
    def decode(cls, record: bytes) -> Action | None:
        try:
            return cls.model_validate_json(record)
        except ValidationError:
            return None


@cache
def default_actor() -> str:
    """Who acts when the caller does not say: this process's user at its host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def actions_subject(key: str) -> str:
    """The ledger subject of schedule ``key``'s action log."""
    return f"{schedule_subject(key)}#actions"


class ActionLog:
    """Records and reads the action logs of an app's schedules."""

    def __init__(self, backend: Backend, settings: Settings) -> None:
        self._backend = backend
        self._settings = settings

    def record(
        self,
        queue: str,
        key: str,
        action: Verb,
        at: datetime,
        actor: str | None,
        note: str | None,
        detail: str | None = None,
    ) -> None:
        """Append one action to ``key``'s log (nothing when the ledger is off)."""
        retention = Retention.of(self._settings)
        if retention is None:
            return
        if note is not None:
            note = " ".join(note.split())[:NOTE_MOST] or None
        done = Action(
            action=action, at=at, actor=actor or default_actor(), note=note, detail=detail
        )
        self._backend.ledger.append([retention.entry(queue, actions_subject(key), [done.encode()])])

    def read(self, queue: str, key: str, limit: int) -> list[Action]:
        """The newest ``limit`` actions on ``key``, newest first."""
        records = self._backend.ledger.read(queue, actions_subject(key), limit)
        found = (Action.decode(record) for record in records)
        return [action for action in found if action is not None]
