"""The leases role: claim due messages and settle each lease (the core, with messages).

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

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence

from tickwork.scheduler.backends.records import Failure, LedgerEntry, Waiter
from tickwork.scheduler.backends.values import Claim, ClaimBatch, Envelope


class Leases(ABC):
    """Claiming and settling. Methods that take a ``Claim`` are idempotent and fenced:
    they return False, and change nothing, when the lease is no longer held by that
    claim."""

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
        that fits), as ``Limits.acquire`` would (``Claim.slot`` says which); a backend may
        ignore it, and the caller takes the slots claims lack with ``Limits.acquire``."""

    @abstractmethod
    def ack(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> list[bool]:
        """Delete each claimed message and, in the same atomic step, store its next
        occurrence if given and append its ledger entry (``ledger[i]`` for ``items[i]``,
        when given), only if the lease was still held. One commit per call."""

    @abstractmethod
    def ack_releasing(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        held: Sequence[tuple[str, str]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> tuple[list[bool], list[Waiter]]:
        """``ack(items, ledger)``, then ``Limits.release(held)``: how a worker settles a
        batch of runs that held concurrency slots; one round trip (or transaction) where
        the backend can. Each part keeps its own contract."""

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
