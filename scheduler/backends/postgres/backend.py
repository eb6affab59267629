"""The PostgreSQL backend: one database (one schema of it), its roles composed over one
``PostgresStore`` (``store.py``: the pool, the schema, transactions, the clock)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, field_validator

from tickwork.scheduler.backends.base import Backend, Capability
from tickwork.scheduler.backends.options import UrlOptions, parse_options
from tickwork.scheduler.backends.postgres.admin import (
    PostgresAborts,
    PostgresPoison,
    PostgresQueues,
)
from tickwork.scheduler.backends.postgres.changes import PostgresChanges
from tickwork.scheduler.backends.postgres.leases import PostgresLeases
from tickwork.scheduler.backends.postgres.ledger import PostgresLedger
from tickwork.scheduler.backends.postgres.limits import PostgresLimits
from tickwork.scheduler.backends.postgres.messages import PostgresMessages
from tickwork.scheduler.backends.postgres.notify import Listener
from tickwork.scheduler.backends.postgres.rates import PostgresRates
from tickwork.scheduler.backends.postgres.records import (
    PostgresBatches,
    PostgresRegistry,
    PostgresResults,
)
from tickwork.scheduler.backends.postgres.schema import DEFAULT_SCHEMA, checked_schema
from tickwork.scheduler.backends.postgres.store import PostgresStore
from tickwork.scheduler.clock import Clock
from tickwork.scheduler.errors import ConfigurationError


class PostgresOptions(UrlOptions):
    """The query options a PostgreSQL URL may carry."""

    schema_name: str = Field(
        default=DEFAULT_SCHEMA,
        alias="schema",
        description="the PostgreSQL schema holding tickwork's tables",
    )
    pool_size: int = Field(default=10, ge=1, le=1000, description="connections at most")
    connect_timeout_s: float = Field(default=10.0, gt=0, description="how long to wait")
    sslmode: Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] | None = (
        Field(default=None, description="libpq's sslmode")
    )
    sslrootcert: str | None = Field(default=None, description="the CA file for verify-*")
    application_name: str = Field(default="tickwork", description="shown in pg_stat_activity")

    @field_validator("schema_name")
    @classmethod
    def _plain(cls, value: str) -> str:
        try:
            return checked_schema(value)
        except ConfigurationError as err:
            raise ValueError(str(err)) from None


class PostgresBackend(Backend):
    """PostgreSQL storage, pooled; every role writes in transactions of the server."""

    name = "PostgreSQL"
    capabilities = frozenset(Capability)

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        pool_size: int = 10,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self._conninfo = conninfo
        self.store = PostgresStore(
            conninfo,
            checked_schema(schema),
            pool_size=pool_size,
            connect_timeout_s=connect_timeout_s,
        )
        self.messages = PostgresMessages(self.store)
        self.leases = PostgresLeases(self.store)
        self.poison = PostgresPoison(self.store)
        self.queues = PostgresQueues(self.store)
        self.aborts = PostgresAborts(self.store)
        self.limits = PostgresLimits(self.store)
        self.rates = PostgresRates(self.store)
        self.results = PostgresResults(self.store)
        self.registry = PostgresRegistry(self.store)
        self.batches = PostgresBatches(self.store)
        self.ledger = PostgresLedger(self.store)
        self.changes = PostgresChanges(self.store, conninfo, self.ledger)

    @classmethod
    def from_url(cls, url: str, clock: Clock | None = None) -> PostgresBackend:
        """``postgresql://user:password@host:port/database?schema=tickwork&pool_size=10``
        (``clock`` is ignored: the server's clock counts)."""
        options = parse_options(PostgresOptions, url, "PostgreSQL")
        parts = urlsplit(url)
        extra = [f"application_name={options.application_name}"]
        if options.sslmode is not None:
            extra.append(f"sslmode={options.sslmode}")
        if options.sslrootcert is not None:
            extra.append(f"sslrootcert={options.sslrootcert}")
        conninfo = urlunsplit(("postgresql", parts.netloc, parts.path, "&".join(extra), ""))
        return cls(
            conninfo,
            schema=options.schema_name,
            pool_size=options.pool_size,
            connect_timeout_s=options.connect_timeout_s,
        )

    @contextmanager
    def transaction(self, connection: Any) -> Iterator[None]:
        """Within this block, every write goes through ``connection`` (a psycopg
        ``Connection``) inside its open transaction: visible when it commits, gone when
        it rolls back."""
        with self.store.borrowed(connection):
            yield

    def listen(
        self, queues: Sequence[str], wake: Callable[[str], None]
    ) -> Callable[[], None] | None:
        """Wake-ups by ``LISTEN/NOTIFY`` on a connection of the listener's own."""
        return Listener(self._conninfo, self.store.schema, queues, wake).close

    def now_ms(self) -> int:
        return self.store.now_ms()

    def close(self) -> None:
        self.store.close()
