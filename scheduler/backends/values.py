"""The values that cross the backend interface (``base.Backend``): a message as handed to
a backend (``Envelope``), a lease on one (``Claim``), what a claim and a read return, and
what enqueue did (``Outcome``). Re-exported by ``base``."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from tickwork.scheduler.backends.records import Failure


class OnConflict(StrEnum):
    """What enqueue does when the key is already scheduled in the queue."""

    ERROR = "error"
    IGNORE = "ignore"
    REPLACE = "replace"


class Outcome(StrEnum):
    """What enqueue did with one message."""

    ENQUEUED = "enqueued"
    REPLACED = "replaced"
    IGNORED = "ignored"  # the key was taken by another message, which is kept
    DUPLICATE = "duplicate"  # the same id and body are already stored: an idempotent re-send
    FULL = "full"  # not written: the queue holds its ``max_pending`` (``bounded`` enqueue)


class State(StrEnum):
    SCHEDULED = "scheduled"
    READY = "ready"
    RUNNING = "running"


#: the priority a message is promoted to when it has waited its task's ``max_wait``: above
#: every priority a task may have (-1000 to 1000), so it goes ahead of all of them
PROMOTED_PRIORITY = 1001


class Envelope(NamedTuple):
    """A message as handed to a backend: scheduling fields plus the encoded body.
    (A named tuple: immutable, and cheap to build a million of.)"""

    id: str
    queue: str
    key: str | None
    priority: int
    due_ms: int
    timeout_ms: int
    body: bytes
    fair: str | None = None  # the fair-share key: ready messages take turns by it
    limit: str | None = None  # the concurrency limit key (a backend may take its slot in a claim)
    #: when a message still waiting then is promoted to ``PROMOTED_PRIORITY`` (its task's
    #: ``max_wait`` after its due time); None: never
    promote_ms: int | None = None


class Claim(NamedTuple):
    """A leased message. ``token`` fences every later transition of this lease.
    ``malformed`` says what is wrong with a stored record that is not a message (written
    below the interface: a column of the wrong type, a missing value); the worker
    poisons such a claim as undecodable, its body kept as stored."""

    id: str
    queue: str
    key: str | None
    body: bytes
    token: str
    attempt: int  # 1 on first delivery
    due_ms: int
    deadline_ms: int
    timeout_ms: int
    malformed: str | None = None
    slot: str | None = None  # the concurrency limit whose slot the claim took for it


@dataclass(frozen=True, slots=True)
class ClaimBatch:
    """What one claim returned, and when the queue next has something due (if known)."""

    claims: list[Claim]
    next_due_ms: int | None


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as read back without consuming it."""

    envelope: Envelope
    state: State
    attempt: int
    last_error: str | None


@dataclass(frozen=True, slots=True)
class PoisonRecord:
    envelope: Envelope
    failure: Failure
    attempts: int
    failed_at_ms: int
