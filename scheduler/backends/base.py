"""The backend: one object per storage that composes one implementation of each role
(``roles/``) over a shared connection.

A backend stores opaque message bodies with a few envelope fields it needs to schedule
them (queue, key, priority, due time, lease length). It never decodes a body. Times are
epoch milliseconds from the backend's own clock (``now_ms``): the server's clock where
there is a server, so worker clock skew cannot make a message run early.

Callers reach a role by its name: ``backend.messages.enqueue(...)``,
``backend.leases.claim(...)``, ``backend.queues.pause(...)``. A feature a backend does
not offer is left out of its ``capabilities``; asking for it is one clear error
(``require``) before anything is written.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from enum import StrEnum
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from tickwork.scheduler.backends.roles import (
    Aborts,
    Batches,
    Changes,
    Leases,
    Ledger,
    Limits,
    Messages,
    PoisonStore,
    QueueAdmin,
    Rates,
    Registry,
    Results,
)
from tickwork.scheduler.backends.values import Claim as Claim
from tickwork.scheduler.backends.values import ClaimBatch as ClaimBatch
from tickwork.scheduler.backends.values import Envelope as Envelope
from tickwork.scheduler.backends.values import OnConflict as OnConflict
from tickwork.scheduler.backends.values import Outcome as Outcome
from tickwork.scheduler.backends.values import PoisonRecord as PoisonRecord
from tickwork.scheduler.backends.values import State as State
from tickwork.scheduler.backends.values import StoredMessage as StoredMessage
from tickwork.scheduler.errors import ConfigurationError

if TYPE_CHECKING:
    from tickwork.scheduler.clock import Clock


class Capability(StrEnum):
    """A feature that not every backend offers."""

    FAIR_SHARE = "fair share"  # messages with a fair-share key take turns per key
    #: producers write through the caller's own database connection, in its transaction
    TRANSACTIONS = "enqueue in the caller's transaction"


class Backend(ABC):
    """Storage for one tickwork deployment: its roles, its clock and its connection.
    Thread-safe; every role is cheap to call from several threads."""

    messages: Messages
    leases: Leases
    poison: PoisonStore
    queues: QueueAdmin
    aborts: Aborts
    limits: Limits
    rates: Rates
    results: Results
    registry: Registry
    batches: Batches
    ledger: Ledger
    changes: Changes

    #: the name the errors of ``require`` use
    name: str = "this backend"
    #: the optional features this backend offers
    capabilities: frozenset[Capability] = frozenset(Capability)
    shards: int = 1

    @classmethod
    @abstractmethod
    def from_url(cls, url: str, clock: Clock | None = None) -> Self:
        """Connect to the storage ``url`` names (scheme chosen by ``open_backend``). Query
        options follow the backend's typed options model; an unknown or malformed one is
        a ``ConfigurationError`` naming it, and nothing is written. ``clock`` is used only
        by backends without a server clock (SQLite)."""

    @abstractmethod
    def now_ms(self) -> int:
        """The backend's clock: what due times and leases are compared against."""

    @abstractmethod
    def close(self) -> None:
        """Release connections. Idempotent; the backend is unusable afterwards."""

    def transaction(self, connection: Any) -> AbstractContextManager[None]:
        """A block within which every write of this backend (in this thread or task) goes
        through ``connection``, the caller's own, inside its open transaction: stored when
        it commits, gone when it rolls back. Only backends with
        ``Capability.TRANSACTIONS``; the others raise ``ConfigurationError``."""
        self.require(Capability.TRANSACTIONS, "writing inside your own transaction")
        raise NotImplementedError  # a backend that offers it overrides this method

    def listen(
        self, queues: Sequence[str], wake: Callable[[str], None]
    ) -> Callable[[], None] | None:
        """Call ``wake(queue)`` (from a thread of the backend's) soon after messages of one
        of ``queues`` come due, so a worker claims at once instead of at its next poll;
        returns the function that stops listening. None (the default) when the backend
        sends no such notifications: its workers poll."""
        return None

    def require(self, capability: Capability, why: str) -> None:
        """Raise ``ConfigurationError`` when this backend does not offer ``capability``;
        ``why`` says what asked for it."""
        if capability not in self.capabilities:
            offered = ", ".join(sorted(c.value for c in self.capabilities)) or "none"
            raise ConfigurationError(
                f"{why} needs {capability.value}, which {self.name} does not offer "
                f"(it offers: {offered})"
            )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
