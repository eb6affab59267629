"""The operator's roles: the poison queue, the queues themselves (statistics, pause,
bounds, purge) and the abort requests of running messages."""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Sequence

from tickwork.scheduler.backends.records import AbortRequest, QueueStats
from tickwork.scheduler.backends.values import PoisonRecord


class PoisonStore(ABC):
    """Messages that failed for good (``Leases.poison`` puts them here)."""

    @abstractmethod
    def list(self, queue: str | None = None, limit: int = 100) -> builtins.list[PoisonRecord]:
        """Poisoned messages, oldest failure first."""

    @abstractmethod
    def get(self, message_id: str) -> PoisonRecord | None:
        """One poisoned message by id, or None."""

    @abstractmethod
    def replay(self, ids: Sequence[str] | None = None, queue: str | None = None) -> int:
        """Move poisoned messages (all of ``queue`` when ``ids`` is None) back to ready
        with a fresh attempt count. A message whose key was taken meanwhile stays."""

    @abstractmethod
    def purge(self, queue: str | None = None, ids: Sequence[str] | None = None) -> int:
        """Delete poisoned messages: those of ``ids`` (in ``queue`` only, if given), or
        every one of ``queue``, or every one; returns how many."""


class QueueAdmin(ABC):
    """What an operator does to whole queues."""

    @abstractmethod
    def names(self) -> list[str]:
        """The names of every queue that was ever written to, sorted."""

    @abstractmethod
    def stats(self, queue: str | None = None) -> list[QueueStats]:
        """Per queue (``queue`` only, or every known queue): messages by state, poisoned
        messages, the counters of ``COUNTERS``, pending messages per shard, and whether
        the queue is paused."""

    @abstractmethod
    def pause(self, queue: str) -> bool:
        """Stop workers claiming from ``queue`` (each notices within its poll interval;
        ``Leases.claim`` itself does not look). Enqueue still works; messages that come
        due wait, stored. False if it was already paused."""

    @abstractmethod
    def resume(self, queue: str) -> bool:
        """Let workers claim from ``queue`` again. False if it was not paused."""

    @abstractmethod
    def paused(self) -> list[str]:
        """The paused queues, sorted."""

    @abstractmethod
    def set_bound(self, queue: str, max_pending: int | None) -> None:
        """Bound ``queue`` to ``max_pending`` messages waiting or leased (not poisoned), for
        ``bounded`` enqueues; None removes the bound. Retries, releases, replays and the
        next occurrences written at ack are never refused (they may pass the bound)."""

    @abstractmethod
    def bounds(self) -> dict[str, int]:
        """The bound of every bounded queue."""

    @abstractmethod
    def set_fair_weight(self, queue: str, fair: str, weight: int | None) -> None:
        """Give the fair-share key ``fair`` of ``queue`` ``weight`` turns for one of a key
        of weight 1 (None: back to 1), from the next messages made ready on. A backend
        without fair share raises ``ConfigurationError``."""

    @abstractmethod
    def fair_weights(self, queue: str) -> dict[str, int]:
        """The weights set in ``queue`` (keys not listed have weight 1)."""

    @abstractmethod
    def add_counters(self, queue: str, deltas: dict[str, int]) -> None:
        """Add to a queue's counters (for counts a worker keeps locally, e.g. empty polls)."""

    @abstractmethod
    def purge(self, queue: str) -> int:
        """Delete every pending and running message of ``queue``."""


class Aborts(ABC):
    """Requests to stop running messages, read by every worker."""

    @abstractmethod
    def request(self, request: AbortRequest) -> None:
        """Store ``request`` (replacing one for the same message). Workers read every
        request with ``pending``; the one holding the message stops its handler."""

    @abstractmethod
    def pending(self) -> list[AbortRequest]:
        """Every request not yet expired on the backend's clock, in message id order. One
        small read: workers call it twice a second while they hold work."""

    @abstractmethod
    def clear(self, message_ids: Sequence[str]) -> int:
        """Drop the requests for ``message_ids`` (their runs settled); returns how many."""
