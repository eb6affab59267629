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
    """Publishing changes and listening to them."""

    @abstractmethod
    def publish(self, changes: Sequence[bytes]) -> None:
        """Hand ``changes`` (each unique: ``scheduler.runs.changes`` numbers them) to the
        listeners of this moment, in order. Nothing is kept for a listener to come."""

    @abstractmethod
    def listen(self) -> ChangeFeed:
        """A feed of what is published from now on."""


#: where the polled default keeps changes: a ledger subject outside every queue
CHANGES_QUEUE = ""
CHANGES_SUBJECT = "a:changes"
#: the polled log keeps this many changes, none older than ``CHANGES_AGE_MS``
CHANGES_KEEP = 2000
CHANGES_AGE_MS = 60_000
#: seconds between two reads of the polled log
POLL_S = 0.5


class LedgerChanges(Changes):
    """Changes appended to a ledger subject (kept ``CHANGES_KEEP``, a minute at most), each
    listener reading the newest every ``poll_s`` seconds: a change reaches it within one
    interval. A listener that falls more than ``CHANGES_KEEP`` behind loses the oldest."""

    def __init__(self, ledger: Ledger, poll_s: float = POLL_S) -> None:
        self._ledger = ledger
        self._poll_s = poll_s

    def publish(self, changes: Sequence[bytes]) -> None:
        if changes:
            entry = LedgerEntry(
                CHANGES_QUEUE, CHANGES_SUBJECT, tuple(changes), CHANGES_KEEP, CHANGES_AGE_MS
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
