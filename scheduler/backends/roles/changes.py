"""Live changes: what workers publish as runs start and end, heard by whoever listens
(``GET /api/v1/stream``, the dashboard). A change is opaque bytes here
(``scheduler.runs.changes`` gives them their shape); a listener hears what is published
while it listens, in order per publisher, and nothing from before it began.

PostgreSQL (``LISTEN/NOTIFY``) and Redis (pub/sub) deliver as soon as a change is
published. Every other backend takes the default here: changes appended to a short log
in the ledger, which a listener reads at an interval."""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence

from tickwork.scheduler.backends.records import LedgerEntry
from tickwork.scheduler.backends.roles.records import Ledger


class ChangeFeed(ABC):
    """One listener's feed of published changes."""

    @abstractmethod
    def next(self, timeout_s: float) -> list[bytes]:
        """The changes published since the last call, oldest first; waits up to
        ``timeout_s`` for the first one (an empty list: none came)."""

    @abstractmethod
    def close(self) -> None:
        """Stop listening (idempotent)."""


class Changes(ABC):
    """Publishing changes and listening to them, and saying who listens: publishers
    publish only while someone does (``listened``), so nobody pays for changes nobody
    reads. A server with streams open says so every ``ANNOUNCE_EVERY_S`` (``announce``)
    in a ledger subject whose records live ``LISTENER_TTL_MS``."""

    #: how long a publisher gathers changes before it publishes them (at least): a feed
    #: read at an interval gains nothing from more publishes than reads
    gather_s: float = 0.0

    def __init__(self, ledger: Ledger) -> None:
        """``ledger``: the backend's own (no codec: a listener's name is no secret)."""
        self._presence = ledger

    def announce(self, listener: str) -> None:
        """Say that ``listener`` (a server's streams) listens, for ``LISTENER_TTL_MS``."""
        entry = LedgerEntry(
            CHANGES_QUEUE, LISTENERS_SUBJECT, (listener.encode(),), 64, LISTENER_TTL_MS
        )
        self._presence.append([entry])

    def listened(self) -> bool:
        """Whether a listener announced itself within the last ``LISTENER_TTL_MS``."""
        return bool(self._presence.read(CHANGES_QUEUE, LISTENERS_SUBJECT, 1))

    @abstractmethod
    def publish(self, changes: Sequence[bytes]) -> None:
        """Hand ``changes`` (each unique: ``scheduler.runs.changes`` numbers them) to the
        listeners of this moment, in order. Nothing is kept for a listener to come."""

    @abstractmethod
    def listen(self) -> ChangeFeed:
        """A feed of what is published from now on."""


#: where the polled default keeps changes, and listeners say they listen: ledger subjects
#: outside every queue
CHANGES_QUEUE = ""
CHANGES_SUBJECT = "a:changes"
LISTENERS_SUBJECT = "a:listeners"
#: a listener says it listens every ``ANNOUNCE_EVERY_S``, and is believed this long
ANNOUNCE_EVERY_S = 3.0
LISTENER_TTL_MS = 10_000
#: the polled log keeps this many changes, none older than ``CHANGES_AGE_MS``
CHANGES_KEEP = 2000
CHANGES_AGE_MS = 60_000
#: seconds between two reads of the polled log, and that a publisher gathers changes
#: before it writes them there: a change is read within half a second of its making
POLL_S = 0.4
GATHER_S = 0.1


class LedgerChanges(Changes):
    """Changes appended to a ledger subject (kept ``CHANGES_KEEP``, a minute at most), each
    listener reading the newest every ``poll_s`` seconds: a change reaches it within one
    interval. A listener that falls more than ``CHANGES_KEEP`` behind loses the oldest."""

    def __init__(self, ledger: Ledger, poll_s: float = POLL_S) -> None:
        super().__init__(ledger)
        self._ledger = ledger
        self._poll_s = poll_s
        self.gather_s = GATHER_S

    def publish(self, changes: Sequence[bytes]) -> None:
        """The newest ``CHANGES_KEEP`` of ``changes`` (the log holds no more)."""
        if changes:
            records = tuple(changes[-CHANGES_KEEP:])
            entry = LedgerEntry(
                CHANGES_QUEUE, CHANGES_SUBJECT, records, CHANGES_KEEP, CHANGES_AGE_MS
            )
            self._ledger.append([entry])

    def listen(self) -> ChangeFeed:
        return _PolledFeed(self._ledger, self._poll_s)


class _PolledFeed(ChangeFeed):
    """Reads the log at an interval; hands on each record not seen before (the first
    read only marks what was already there)."""

    def __init__(self, ledger: Ledger, poll_s: float) -> None:
        self._ledger = ledger
        self._poll_s = poll_s
        self._seen: OrderedDict[bytes, None] = OrderedDict()
        self._closed = threading.Event()
        self._read_at = 0.0
        self._remember(self._read())

    def _read(self) -> list[bytes]:
        self._read_at = time.monotonic()
        return self._ledger.read(CHANGES_QUEUE, CHANGES_SUBJECT, CHANGES_KEEP)[::-1]

    def _remember(self, records: list[bytes]) -> list[bytes]:
        fresh = [r for r in records if r not in self._seen]
        for record in fresh:
            self._seen[record] = None
        while len(self._seen) > 2 * CHANGES_KEEP:
            self._seen.popitem(last=False)
        return fresh

    def next(self, timeout_s: float) -> list[bytes]:
        deadline = time.monotonic() + timeout_s
        while not self._closed.is_set():
            due, now = self._read_at + self._poll_s, time.monotonic()
            if due > deadline:  # the next read comes after the caller stops waiting
                self._closed.wait(max(0.0, deadline - now))
                return []
            if due > now and self._closed.wait(due - now):
                break
            fresh = self._remember(self._read())
            if fresh or time.monotonic() >= deadline:
                return fresh
        return []

    def close(self) -> None:
        self._closed.set()
