"""The SQLite backend: one file, its roles composed over one ``SQLiteStore``
(``connection.py``: the schema, connections and write transactions)."""

from __future__ import annotations

from tickwork.scheduler.backends.base import Backend, Capability
from tickwork.scheduler.backends.options import parse_options, sqlite_file
from tickwork.scheduler.backends.roles.changes import LedgerChanges
from tickwork.scheduler.backends.sqlite.admin import SQLiteAborts, SQLitePoison, SQLiteQueues
from tickwork.scheduler.backends.sqlite.batches import SQLiteBatches
from tickwork.scheduler.backends.sqlite.connection import SQLiteStore
from tickwork.scheduler.backends.sqlite.leases import SQLiteLeases
from tickwork.scheduler.backends.sqlite.ledger import SQLiteLedger
from tickwork.scheduler.backends.sqlite.limits import SQLiteLimits
from tickwork.scheduler.backends.sqlite.messages import SQLiteMessages
from tickwork.scheduler.backends.sqlite.options import SQLiteOptions
from tickwork.scheduler.backends.sqlite.rates import SQLiteRates
from tickwork.scheduler.backends.sqlite.registry import SQLiteRegistry
from tickwork.scheduler.backends.sqlite.results import SQLiteResults
from tickwork.scheduler.clock import Clock
from tickwork.scheduler.errors import ConfigurationError


class SQLiteBackend(Backend):
    """SQLite storage. One connection per thread; all of them share the file."""

    name = "SQLite"
    capabilities = frozenset({Capability.FAIR_SHARE})

    def __init__(
        self,
        path: str,
        *,
        synchronous: str = "full",
        busy_timeout_ms: int = 30_000,
        clock: Clock | None = None,
    ) -> None:
        self.store = SQLiteStore(
            path, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms, clock=clock
        )
        self.path = path
        self.messages = SQLiteMessages(self.store)
        self.leases = SQLiteLeases(self.store)
        self.poison = SQLitePoison(self.store)
        self.queues = SQLiteQueues(self.store)
        self.aborts = SQLiteAborts(self.store)
        self.limits = SQLiteLimits(self.store)
        self.rates = SQLiteRates(self.store)
        self.results = SQLiteResults(self.store)
        self.registry = SQLiteRegistry(self.store)
        self.batches = SQLiteBatches(self.store)
        self.ledger = SQLiteLedger(self.store)
        self.changes = LedgerChanges(self.ledger)

    @classmethod
    def from_url(cls, url: str, clock: Clock | None = None) -> SQLiteBackend:
        path = sqlite_file(url)
        if not path:
            raise ConfigurationError(
                f"SQLite URL {url!r} names no file (sqlite:///path/to/file.db)"
            )
        options = parse_options(SQLiteOptions, url, "SQLite")
        return cls(
            path,
            synchronous=options.synchronous,
            busy_timeout_ms=options.busy_timeout_ms,
            clock=clock,
        )

    def now_ms(self) -> int:
        return self.store.now_ms()

    def close(self) -> None:
        self.store.close()
