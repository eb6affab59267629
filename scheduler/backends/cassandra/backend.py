"""The Cassandra backend: its roles composed over one ``CassandraShardLock`` (the session,
the layout of rows and the shard locks; see the package docstring)."""

from __future__ import annotations

from typing import Any

from tickwork.scheduler.backends.base import Backend
from tickwork.scheduler.backends.cassandra.admin import (
    CassandraAborts,
    CassandraPoison,
    CassandraQueues,
)
from tickwork.scheduler.backends.cassandra.batches import CassandraBatches
from tickwork.scheduler.backends.cassandra.bounds import CassandraBounds
from tickwork.scheduler.backends.cassandra.connection import connect
from tickwork.scheduler.backends.cassandra.leases import CassandraLeases
from tickwork.scheduler.backends.cassandra.ledger import CassandraLedger
from tickwork.scheduler.backends.cassandra.limits import CassandraLimits
from tickwork.scheduler.backends.cassandra.messages import CassandraMessages
from tickwork.scheduler.backends.cassandra.rates import CassandraRates
from tickwork.scheduler.backends.cassandra.registry import CassandraRegistry
from tickwork.scheduler.backends.cassandra.results import CassandraResults
from tickwork.scheduler.backends.cassandra.shard_lock import CassandraShardLock
from tickwork.scheduler.backends.roles.changes import LedgerChanges
from tickwork.scheduler.clock import Clock


class CassandraBackend(Backend):
    """Storage on Cassandra. Thread-safe (the driver's session is). Fair share is not
    offered: claims read due messages in time order."""

    name = "Cassandra"
    capabilities = frozenset()
    store: CassandraShardLock
    leases: CassandraLeases

    def __init__(self, *args: Any, **options: Any) -> None:
        """Arguments as ``CassandraShardLock`` (the session, cluster and keyspace) takes
        them."""
        self.store = CassandraShardLock(*args, **options)
        self.bounds = CassandraBounds(self.store)
        self.messages = CassandraMessages(self.store, self.bounds)
        self.limits = CassandraLimits(self.store)
        self.leases = CassandraLeases(self.store, self.limits)
        self.poison = CassandraPoison(self.store)
        self.queues = CassandraQueues(self.store, self.bounds)
        self.aborts = CassandraAborts(self.store)
        self.rates = CassandraRates(self.store, self.limits)
        self.results = CassandraResults(self.store)
        self.registry = CassandraRegistry(self.store)
        self.batches = CassandraBatches(self.store)
        self.ledger = CassandraLedger(self.store)
        self.changes = LedgerChanges(self.ledger)

    @classmethod
    def from_url(cls, url: str, clock: Clock | None = None) -> CassandraBackend:
        del clock  # due times follow the coordinator's clock
        session, cluster, keyspace, options = connect(url)
        return cls(session, cluster, keyspace, options)

    def now_ms(self) -> int:
        return self.store.now_ms()

    def close(self) -> None:
        self.store.close()
