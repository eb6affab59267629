"""The messages role: store, read and cancel messages (the core every backend implements
first)."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence

from tickwork.scheduler.backends.values import Envelope, OnConflict, Outcome, StoredMessage


class Messages(ABC):
    """Writing and reading stored messages. Thread-safe; nothing blocks for longer than
    one storage round trip (plus lock waits)."""

    @abstractmethod
    def enqueue(
        self,
        envelopes: Sequence[Envelope],
        on_conflict: OnConflict = OnConflict.ERROR,
        bounded: bool = False,
    ) -> list[Outcome]:
        """Store messages atomically per call. With ``ERROR``, raise ``KeyConflict`` and
        write nothing if any key is held by a different message. Re-sending a message that is
        already stored byte for byte is never an error (``DUPLICATE``).

        With ``bounded``, a message that would add to a queue holding its ``max_pending``
        (see ``QueueAdmin.set_bound``) is not written and answers ``FULL``; replacing one,
        or a duplicate, adds nothing and is never refused. The count and the writes are
        one atomic step where the backend can (the Cassandra backend documents its
        margin)."""

    async def aenqueue(
        self,
        envelopes: Sequence[Envelope],
        on_conflict: OnConflict = OnConflict.ERROR,
        bounded: bool = False,
    ) -> list[Outcome]:
        """``enqueue`` from an event loop, which keeps running meanwhile: in a thread
        here; a backend that can write from the loop itself overrides it (Redis)."""
        return await asyncio.to_thread(self.enqueue, envelopes, on_conflict, bounded)

    @abstractmethod
    def get(self, message_id: str, queue: str | None = None) -> StoredMessage | None:
        """Read a message by id (pending, or running) without consuming it."""

    @abstractmethod
    def get_by_key(self, queue: str, key: str) -> StoredMessage | None:
        """Read the message holding ``key`` in ``queue``."""

    @abstractmethod
    def delete(self, message_id: str, queue: str | None = None) -> bool:
        """Remove a message. A running one finishes, but its ack will not reschedule."""

    @abstractmethod
    def delete_by_key(self, queue: str, key: str) -> bool:
        """Cancel the chain holding ``key``: its pending (or running) message and the key."""

    def exists(self, queue: str, key: str) -> bool:
        """True when ``key`` is scheduled (or running) in ``queue``."""
        return self.get_by_key(queue, key) is not None

    @abstractmethod
    def keyed(self, queue: str | None = None) -> list[StoredMessage]:
        """Every message that holds a key (for listing schedules)."""
