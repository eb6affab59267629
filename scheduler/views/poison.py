"""``app.poison``: the poison store as operators see it (``PoisonView``, the same shape
in ``tickwork poison --json`` and the HTTP API) and its two actions, replay and purge, by
hand (ids) or by a filter on what failed (queue, reason, task, text of the error); each
action is recorded in the audit log with its actor. The command line, the dashboard's
poison page and the API all act through it.

A filter reads at most ``MAX_SELECTED`` records, oldest failure first: a larger poison
queue is handled a slice at a time (the next action takes the next slice)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from tickwork.scheduler.backends import Backend, PoisonRecord
from tickwork.scheduler.backends.codec import shown
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.errors import TickworkError
from tickwork.scheduler.model.message import Message

if TYPE_CHECKING:
    from tickwork.scheduler.parts import AppParts

#: the most records one filtered replay or purge takes
MAX_SELECTED = 10_000


def task_of(record: PoisonRecord) -> str | None:
    """The task a poisoned message names, or None when its body is not a message."""
    try:
        return Message.decode(record.envelope.body).task
    except TickworkError:
        return None


@dataclass(frozen=True, slots=True)
class PoisonFilter:
    """Which poisoned messages to take: every field given must match (``text`` is a
    case-insensitive part of the error's type, message or traceback)."""

    queue: str | None = None
    reason: str | None = None
    task: str | None = None
    text: str | None = None

    def matches(self, record: PoisonRecord) -> bool:
        failure = record.failure
        if self.queue and record.envelope.queue != self.queue:
            return False
        if self.reason and failure.reason != self.reason:
            return False
        if self.text:
            wanted = self.text.lower()
            seen = f"{failure.error_type}: {failure.message}\n{failure.traceback}".lower()
            if wanted not in seen:
                return False
        return not self.task or task_of(record) == self.task

    @property
    def empty(self) -> bool:
        return not (self.queue or self.reason or self.task or self.text)


def select(backend: Backend, chosen: PoisonFilter, limit: int = MAX_SELECTED) -> list[PoisonRecord]:
    """The poisoned messages ``chosen`` matches, oldest failure first, at most ``limit``."""
    records = backend.poison.list(chosen.queue or None, limit=limit)
    return [record for record in records if chosen.matches(record)]


def replay(backend: Backend, chosen: PoisonFilter) -> int:
    """Replay what ``chosen`` matches (see ``PoisonStore.replay``); returns how many."""
    if chosen.empty:
        return backend.poison.replay(None)
    if chosen == PoisonFilter(queue=chosen.queue):
        return backend.poison.replay(None, chosen.queue)
    ids = [record.envelope.id for record in select(backend, chosen)]
    return backend.poison.replay(ids, chosen.queue) if ids else 0


def purge(backend: Backend, chosen: PoisonFilter) -> int:
    """Delete what ``chosen`` matches; returns how many."""
    if chosen == PoisonFilter(queue=chosen.queue):
        return backend.poison.purge(chosen.queue)
    ids = [record.envelope.id for record in select(backend, chosen)]
    return backend.poison.purge(chosen.queue, ids) if ids else 0


class PoisonView(BaseModel):
    """A message in the poison store, as the command line and the API show it."""

    model_config = ConfigDict(frozen=True)

    id: str
    queue: str
    key: str | None
    task: str | None
    reason: str
    error_type: str
    error: str
    attempts: int
    failed_at: datetime

    @classmethod
    def of(cls, record: PoisonRecord) -> PoisonView:
        return cls(**_fields(record))


class PoisonDetail(PoisonView):
    """One poisoned message whole: also its traceback and its body (the message as
    stored, or its text when it is not a message)."""

    traceback: str | None
    body: Any

    @classmethod
    def of(cls, record: PoisonRecord) -> PoisonDetail:
        try:
            body: Any = Message.decode(record.envelope.body).model_dump(
                mode="json", exclude_defaults=True
            )
        except TickworkError:
            body = record.envelope.body.decode("utf-8", "replace")
        return cls(**_fields(record), traceback=shown(record.failure.traceback), body=body)


def _fields(record: PoisonRecord) -> dict[str, Any]:
    return {
        "id": record.envelope.id,
        "queue": record.envelope.queue,
        "key": record.envelope.key,
        "task": task_of(record),
        "reason": record.failure.reason,
        "error_type": record.failure.error_type,
        "error": shown(record.failure.message) or "",
        "attempts": record.attempts,
        "failed_at": to_datetime(record.failed_at_ms),
    }


class Poison:
    """``app.poison``: read the poison store, and replay or purge what it holds."""

    def __init__(self, parts: AppParts) -> None:
        self._parts = parts

    def list(self, queue: str | None = None, limit: int = 100) -> builtins.list[PoisonView]:
        """Poisoned messages (of ``queue``, or every queue), oldest failure first."""
        records = self._parts.backend.poison.list(queue, limit)
        return [PoisonView.of(record) for record in records]

    def get(self, id: str) -> PoisonDetail | None:
        """One poisoned message whole, or None."""
        record = self._parts.backend.poison.get(id)
        return None if record is None else PoisonDetail.of(record)

    def replay(
        self,
        ids: Sequence[str] | None = None,
        *,
        chosen: PoisonFilter | None = None,
        actor: str | None = None,
        note: str | None = None,
    ) -> int:
        """Put these ``ids`` back (or what ``chosen`` matches: every poisoned message
        with neither) due now, with fresh attempts; returns how many."""
        backend, chosen = self._parts.backend, chosen or PoisonFilter()
        if ids is not None:
            count = backend.poison.replay(list(ids), chosen.queue) if ids else 0
        else:
            count = replay(backend, chosen)
        target = _target(ids, chosen)
        self._parts.audit.record(
            "poison.replay", target, actor=actor, outcome=f"replayed {count}", note=note
        )
        return count

    def purge(
        self,
        ids: Sequence[str] | None = None,
        *,
        chosen: PoisonFilter | None = None,
        actor: str | None = None,
        note: str | None = None,
    ) -> int:
        """Delete these ``ids`` for good (or what ``chosen`` matches: every poisoned
        message with neither); returns how many."""
        backend, chosen = self._parts.backend, chosen or PoisonFilter()
        if ids is not None:
            count = backend.poison.purge(chosen.queue, list(ids)) if ids else 0
        else:
            count = purge(backend, chosen)
        target = _target(ids, chosen)
        self._parts.audit.record(
            "poison.purge", target, actor=actor, outcome=f"purged {count}", note=note
        )
        return count


def _target(ids: Sequence[str] | None, chosen: PoisonFilter) -> str:
    """What a replay or purge was on, for the audit log."""
    if ids is not None:
        return ", ".join(ids)
    given = [
        f"{name}={getattr(chosen, name)}"
        for name in ("queue", "reason", "task", "text")
        if getattr(chosen, name)
    ]
    return " ".join(given) or "all"
