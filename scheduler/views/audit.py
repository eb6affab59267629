"""The audit log: every action an operator took through the dashboard or the HTTP API
(pausing a queue, replaying or purging the poison store, enqueueing, steering a
schedule...), with who, when, what on and how it ended, newest first. A schedule's own
action log (``scheduler.schedules.actions``) tells its story; this one tells the
operators'.

Kept in the ledger (queue ``AUDIT_QUEUE``, subject ``AUDIT_SUBJECT``), the newest
``AUDIT_KEEP`` records for ``AUDIT_TTL_MS``.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, ValidationError

from tickwork.scheduler.backends import Backend, LedgerEntry
from tickwork.scheduler.clock import to_datetime

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
