"""The audit log (``app.audit``): every action an operator took (pausing a queue,
replaying or purging the poison store, steering or cancelling a schedule, changing a
calendar...), with who, when, what on and how it ended, newest first. The app's
services record their own operator verbs here, with the actor their caller names, so the
same action from Python, the command line, a dashboard page or the HTTP API leaves the
same record; the API also records what producers wrote through it and every refused
write. A schedule's own action log (``scheduler.schedules.actions``) tells its story;
this one tells the operators'.

Kept in the ledger (queue ``AUDIT_QUEUE``, subject ``AUDIT_SUBJECT``), the newest
``AUDIT_KEEP`` records for ``AUDIT_TTL_MS``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from tickwork.scheduler.backends import Backend, LedgerEntry
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.schedules.actions import default_actor

if TYPE_CHECKING:
    from tickwork.scheduler.parts import AppParts

AUDIT_QUEUE = "tickwork.audit"
AUDIT_SUBJECT = "actions"
AUDIT_KEEP = 10_000
AUDIT_TTL_MS = 90 * 86_400_000

#: the longest note or target kept
_TEXT_MOST = 500


class AuditRecord(BaseModel):
    """One action: who took it, when, what it was, on what, and how it ended."""

    model_config = ConfigDict(frozen=True)

    at: datetime
    actor: str
    action: str  # "queue.pause", "poison.purge", "api POST /messages"...
    target: str = ""
    outcome: str = ""  # what it did, or the error it met
    note: str | None = None


def record_action(
    backend: Backend,
    actor: str,
    action: str,
    target: str = "",
    outcome: str = "",
    note: str | None = None,
) -> None:
    """Append one action to the audit log."""
    entry = AuditRecord(
        at=to_datetime(backend.now_ms()),
        actor=actor,
        action=action,
        target=target[:_TEXT_MOST],
        outcome=outcome[:_TEXT_MOST],
        note=None if note is None else " ".join(note.split())[:_TEXT_MOST] or None,
    )
    record = entry.model_dump_json(exclude_none=True).encode()
    backend.ledger.append(
        [LedgerEntry(AUDIT_QUEUE, AUDIT_SUBJECT, (record,), AUDIT_KEEP, AUDIT_TTL_MS)]
    )


def read_actions(backend: Backend, limit: int = 100) -> list[AuditRecord]:
    """The newest ``limit`` actions, newest first."""
    found = []
    for record in backend.ledger.read(AUDIT_QUEUE, AUDIT_SUBJECT, limit):
        try:
            found.append(AuditRecord.model_validate_json(record))
        except ValidationError:
            continue
    return found


class Audit:
    """``app.audit``: who did what, newest first (``recent``). The operator verbs of the
    app's services (``app.queues``, ``app.poison``, ``app.schedules`` and its calendars,
    ``app.cancel``) record themselves here with the ``actor`` they are given (default:
    this process's ``user@host``)."""

    def __init__(self, parts: AppParts) -> None:
        self._parts = parts

    def record(
        self,
        action: str,
        target: str,
        *,
        actor: str | None = None,
        outcome: str = "",
        note: str | None = None,
    ) -> None:
        """Append one action (``"queue.pause"``, on ``target`` ``"mail"``) to the log."""
        backend = self._parts.backend
        record_action(backend, actor or default_actor(), action, target, outcome, note)

    def recent(self, limit: int = 100) -> list[AuditRecord]:
        """The newest ``limit`` actions, newest first."""
        return read_actions(self._parts.backend, limit)
