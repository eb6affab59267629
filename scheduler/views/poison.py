"""Choosing poisoned messages to replay or purge: by hand (ids) or by a filter on what
failed (queue, reason, task, text of the error). The dashboard's poison page and
``tickwork poison replay|purge`` both act through these functions.

A filter reads at most ``MAX_SELECTED`` records, oldest failure first: a larger poison
queue is handled a slice at a time (the next action takes the next slice)."""

from __future__ import annotations

from dataclasses import dataclass

from tickwork.scheduler.backends import Backend, PoisonRecord
from tickwork.scheduler.errors import TickworkError
from tickwork.scheduler.model.message import Message

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
