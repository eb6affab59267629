"""The backend contract: every storage (SQLite, Redis, Cassandra) implements ``Backend``.

A backend stores opaque message bodies with a few envelope fields it needs to schedule
them (queue, key, priority, due time, lease length). It never decodes a body. Times are
epoch milliseconds from the backend's own clock (``now_ms``): the server's clock where
there is a server, so worker clock skew cannot make a message run early.

States of a stored message::

    waiting (scheduled or ready) --claim--> leased --ack--> gone (+ next occurrence)
        ^                                     |  \\--retry--> waiting (attempt kept)
        |--------- release / lease expiry ----'   \\-poison--> poison store

Every transition out of ``leased`` is fenced by the claim's ``token``: after a lease
expired and the message was claimed again, the first holder's ack, retry, extend or
poison is refused (returns False) and changes nothing. That is what stops a handler that
outlived its lease from forking a recurring chain (Astyanax #218).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Self

from scheduler.backends.records import (
    AbortRequest,
    Failure,
    LedgerEntry,
    QueueStats,
    SlotRequest,
    Waiter,
)
from scheduler.backends.side_records import SideRecords
from scheduler.backends.values import Claim as Claim
from scheduler.backends.values import ClaimBatch as ClaimBatch
from scheduler.backends.values import Envelope as Envelope
from scheduler.backends.values import OnConflict as OnConflict
from scheduler.backends.values import Outcome as Outcome
from scheduler.backends.values import PoisonRecord as PoisonRecord
from scheduler.backends.values import State as State
from scheduler.backends.values import StoredMessage as StoredMessage

if TYPE_CHECKING:
    from scheduler.clock import Clock


class Backend(SideRecords, ABC):
    """Storage for one tickwork deployment. Thread-safe; cheap to call from several threads.

    Nothing here blocks for longer than one storage round trip (plus lock waits). Methods
    that take a ``Claim`` are idempotent and fenced: they return False, and change
    nothing, when the lease is no longer held by that claim.
    """

    shards: int = 1

    @classmethod
    @abstractmethod
    def from_url(cls, url: str, clock: Clock | None = None) -> Self:
        """Connect to the storage ``url`` names (scheme chosen by ``open_backend``). Query
        options follow the backend's typed options model; an unknown or malformed one is
        a ``ConfigurationError`` naming it, and nothing is written. ``clock`` is used only
        by backends without a server clock (SQLite)."""

    # -- producing -----------------------------------------------------------------------

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
        (see ``set_queue_bound``) is not written and answers ``FULL``; replacing one, or a
        duplicate, adds nothing and is never refused. The count and the writes are one
        atomic step where the backend can (the Cassandra backend documents its margin)."""

    async def aenqueue(
        self,
        envelopes: Sequence[Envelope],
        on_conflict: OnConflict = OnConflict.ERROR,
        bounded: bool = False,
    ) -> list[Outcome]:
        """``enqueue`` from an event loop, which keeps running meanwhile: in a thread
        here; a backend that can write from the loop itself overrides it (Redis)."""
        return await asyncio.to_thread(self.enqueue, envelopes, on_conflict, bounded)

    # -- reading and cancelling ----------------------------------------------------------

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

    # -- consuming -----------------------------------------------------------------------

    @abstractmethod
    def claim(
        self,
        queue: str,
        limit: int,
        lookahead_ms: int = 0,
        slots: Mapping[str, int] | None = None,
    ) -> ClaimBatch:
        """Lease up to ``limit`` messages due by now + ``lookahead_ms``, higher priority
        first among those. Expired leases are made due again (attempt + 1 on the next
        claim). A lease lasts the message's timeout counted from its due time.

        ``slots`` (concurrency limit name -> capacity) lets a backend take, in the same
        step, the slot of each claimed message that is due now and whose limit key
        (``Envelope.limit``: ``NAME`` or ``NAME:VALUE``) has a name given (the longest
        that fits), as ``acquire_slots`` would (``Claim.slot`` says which); a backend
        may ignore it, and the caller takes the slots claims lack with ``acquire_slots``."""

    @abstractmethod
    def ack(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> list[bool]:
        """Delete each claimed message and, in the same atomic step, store its next
        occurrence if given and append its ledger entry (``ledger[i]`` for ``items[i]``,
        when given), only if the lease was still held. One commit per call."""

    def ack_releasing(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        held: Sequence[tuple[str, str]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> tuple[list[bool], list[Waiter]]:
        """``ack(items, ledger)``, then ``release_slots(held)``: how a worker settles a
        batch of runs that held concurrency slots; one round trip (or transaction) where
        the backend can. Each part keeps its own contract."""
        return self.ack(items, ledger), self.release_slots(held) if held else []

    @abstractmethod
    def retry(
        self, claim: Claim, due_ms: int, error: str, ledger: LedgerEntry | None = None
    ) -> bool:
        """Make a failed message due again at ``due_ms``, keeping its attempt count, and
        append ``ledger`` in the same atomic step (only if the lease was held)."""

    @abstractmethod
    def release(self, claims: Iterable[Claim], due_ms: int | None = None) -> int:
        """Give back claims that never started, attempt not counted: due again at once, or
        at ``due_ms`` (the message's due time becomes that)."""

    @abstractmethod
    def extend(self, claims: Sequence[Claim], lease_ms: int) -> list[bool]:
        """Push each lease's deadline to now + ``lease_ms`` (heartbeat)."""

    @abstractmethod
    def requeue_expired(self, queue: str) -> int:
        """Make every expired lease in ``queue`` due again; returns how many."""

    # -- the poison queue ----------------------------------------------------------------

    @abstractmethod
    def poison(
        self,
        claim: Claim,
        failure: Failure,
        next_occurrence: Envelope | None = None,
        ledger: LedgerEntry | None = None,
    ) -> bool:
        """Move a claimed message to the poison store with why it failed and, in the same
        atomic step, store the next occurrence of its chain if given (a recurring task
        whose run failed for good still runs at its next time) and append ``ledger``."""

    @abstractmethod
    def poison_list(self, queue: str | None = None, limit: int = 100) -> list[PoisonRecord]:
        """Poisoned messages, oldest failure first."""

    @abstractmethod
    def poison_get(self, message_id: str) -> PoisonRecord | None:
        """One poisoned message by id, or None."""

    @abstractmethod
    def poison_replay(self, ids: Sequence[str] | None = None, queue: str | None = None) -> int:
        """Move poisoned messages (all of ``queue`` when ``ids`` is None) back to ready
        with a fresh attempt count. A message whose key was taken meanwhile stays."""

    @abstractmethod
    def poison_purge(self, queue: str | None = None, ids: Sequence[str] | None = None) -> int:
        """Delete poisoned messages: those of ``ids`` (in ``queue`` only, if given), or
        every one of ``queue``, or every one; returns how many."""

    # -- operations ----------------------------------------------------------------------

    @abstractmethod
    def stats(self, queue: str | None = None) -> list[QueueStats]:
        """Per queue (``queue`` only, or every known queue): messages by state, poisoned
        messages, the counters of ``COUNTERS``, pending messages per shard, and whether
        the queue is paused."""

    @abstractmethod
    def pause_queue(self, queue: str) -> bool:
        """Stop workers claiming from ``queue`` (each notices within its poll interval;
        ``claim`` itself does not look). Enqueue still works; messages that come due wait,
        stored. False if it was already paused."""

    @abstractmethod
    def resume_queue(self, queue: str) -> bool:
        """Let workers claim from ``queue`` again. False if it was not paused."""

    @abstractmethod
    def paused_queues(self) -> list[str]:
        """The paused queues, sorted."""

    @abstractmethod
    def set_queue_bound(self, queue: str, max_pending: int | None) -> None:
        """Bound ``queue`` to ``max_pending`` messages waiting or leased (not poisoned), for
        ``bounded`` enqueues; None removes the bound. Retries, releases, replays and the
        next occurrences written at ack are never refused (they may pass the bound)."""

    @abstractmethod
    def queue_bounds(self) -> dict[str, int]:
        """The bound of every bounded queue."""

    # -- aborting running messages ------------------------------------------------------

    @abstractmethod
    def request_abort(self, request: AbortRequest) -> None:
        """Store ``request`` (replacing one for the same message). Workers read every
        request with ``abort_requests``; the one holding the message stops its handler."""

    @abstractmethod
    def abort_requests(self) -> list[AbortRequest]:
        """Every request not yet expired on the backend's clock, in message id order. One
        small read: workers call it twice a second while they hold work."""

    @abstractmethod
    def clear_aborts(self, message_ids: Sequence[str]) -> int:
        """Drop the requests for ``message_ids`` (their runs settled); returns how many."""

    # -- concurrency limits (slots with leases, and their waiters) --------------------------

    @abstractmethod
    def acquire_slots(self, requests: Sequence[SlotRequest]) -> list[int | None]:
        """For each request, in one atomic step per limit: forget holders whose lease ran
        out (backend clock); if the message holds a slot already, or fewer than
        ``capacity`` are held, take (or renew) one for ``lease_ms`` and answer None (the
        message leaves the limit's waiting line, where the backend can do so in the same
        step); else answer when the earliest holder's lease ends (epoch ms), when to look
        again."""

    @abstractmethod
    def wait_for_slot(self, request: SlotRequest) -> bool:
        """Add the request's message to its limit's waiters (first come, first served;
        once however often it is added). True when a slot is free now: a slot given back
        between a refused ``acquire_slots`` and this call woke nobody, so the caller wakes
        the message itself."""

    @abstractmethod
    def release_slots(self, held: Sequence[tuple[str, str]]) -> list[Waiter]:
        """Give back the slots ``(limit, message_id)`` and, for each one that was held,
        take the longest waiter of that limit off its list: the caller wakes them."""

    @abstractmethod
    def pop_waiters(self, limit: str, count: int) -> list[Waiter]:
        """Take up to ``count`` of the longest waiters of ``limit`` off its line (when a
        waiter handed a slot turned out to be gone or running already)."""

    @abstractmethod
    def extend_slots(self, held: Sequence[tuple[str, str]], lease_ms: int) -> None:
        """Push the lease of each held slot ``(limit, message_id)`` to now + ``lease_ms``."""

    @abstractmethod
    def wake(self, waiters: Sequence[Waiter]) -> list[bool]:
        """Make each waiting message due now; False for one that is gone or running."""

    @abstractmethod
    def limit_usage(self, limits: Sequence[str]) -> dict[str, tuple[int, int]]:
        """For each limit: (slots held under a live lease, messages waiting)."""

    @abstractmethod
    def add_counters(self, queue: str, deltas: dict[str, int]) -> None:
        """Add to a queue's counters (for counts a worker keeps locally, e.g. empty polls)."""

    @abstractmethod
    def queues(self) -> list[str]:
        """The names of every queue that was ever written to, sorted."""

    @abstractmethod
    def purge(self, queue: str) -> int:
        """Delete every pending and running message of ``queue``."""

    @abstractmethod
    def now_ms(self) -> int:
        """The backend's clock: what due times and leases are compared against."""

    @abstractmethod
    def close(self) -> None:
        """Release connections. Idempotent; the backend is unusable afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
