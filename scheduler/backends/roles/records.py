"""The side-record roles: what a backend keeps beside messages, each record small, keyed
and most with a time to live: the results of runs, the registry of live workers, the
fan-in counters of batches, and the occurrence ledger."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from tickwork.scheduler.backends.records import BatchRecord, LedgerEntry, MemberOutcome


class Results(ABC):
    """Result records: what a run returned, kept by message id."""

    @abstractmethod
    def put(self, results: Sequence[tuple[str, bytes, int]]) -> None:
        """Store ``(message id, record, ttl_ms)``: each record is kept ``ttl_ms`` on the
        backend's clock; a later put for the same id replaces it."""

    @abstractmethod
    def get(self, message_ids: Sequence[str]) -> dict[str, bytes]:
        """The records still kept for ``message_ids`` (ids without one are left out)."""


class Registry(ABC):
    """The worker registry: live workers, each record refreshed by its heartbeat."""

    @abstractmethod
    def put(self, worker_id: str, record: bytes, ttl_ms: int) -> None:
        """Store (or refresh) worker ``worker_id``'s record, kept ``ttl_ms`` on the
        backend's clock unless refreshed."""

    @abstractmethod
    def delete(self, worker_id: str) -> None:
        """Remove a worker's record (it stopped)."""

    @abstractmethod
    def records(self) -> dict[str, bytes]:
        """The records of every worker not yet expired, by worker id."""


class Batches(ABC):
    """Batches: each member's outcome, counted once, and the batch's description."""

    @abstractmethod
    def open(self, batch_id: str, description: bytes, expires_ms: int) -> None:
        """Store the description of batch ``batch_id`` (its size and callbacks), kept
        until ``expires_ms`` (epoch ms, backend clock) like the outcomes of its members."""

    @abstractmethod
    def settle(self, outcomes: Sequence[MemberOutcome]) -> list[tuple[int, int]]:
        """Record each member's outcome unless that member settled before (a redelivered
        run does not count twice: its first outcome stays), and answer for each, counted
        in the same atomic step (one script, one transaction, one lightweight
        transaction), how many members of its batch have settled and how many of those
        failed. Whoever sees the count reach the batch's size may fire its callbacks;
        more than one caller can see it (a redelivery), so firing must be idempotent."""

    @abstractmethod
    def read(self, batch_id: str, outcomes: bool = True) -> BatchRecord | None:
        """The batch as stored (with each settled member's outcome if ``outcomes``), or
        None when nothing of it is stored (never opened, or expired)."""


class Ledger(ABC):
    """The occurrence ledger: the history of each schedule (and of chosen messages)."""

    @abstractmethod
    def append(self, entries: Sequence[LedgerEntry]) -> None:
        """Append each entry's records to its subject's ledger (in order), then trim the
        ledger to the entry's ``keep`` newest records, none older than its ``ttl_ms``.
        Readers ask for at most ``keep``: a backend may hold a few more between trims
        (Redis up to an eighth more; Cassandra drops older rows only with their TTL).
        (Runs that settle write theirs in the same atomic step as the ack, retry or
        poison they describe: see ``Leases.ack``.)"""

    @abstractmethod
    def read(self, queue: str, subject: str, limit: int = 100) -> list[bytes]:
        """The newest ``limit`` records of ``subject``'s ledger in ``queue``, newest first,
        none past its time to live; empty when there are none."""

    def read_many(self, subjects: Sequence[tuple[str, str]], limit: int = 100) -> list[list[bytes]]:
        """``read`` for each ``(queue, subject)``, in order: one round trip where the
        backend has a server (a schedule listing reads every schedule's newest records)."""
        return [self.read(queue, subject, limit) for queue, subject in subjects]
