"""Redis and Redis Cluster storage, after Netflix dyno-queues: sharded sorted sets, one Lua
script per state change, one round trip per batch.

URLs (options in ``options.py``)::

    redis://[user:password@]host:6379/0?shards=1&prefix=tw
    rediss://...                                   (TLS; ssl_cert_reqs etc. as in redis-py)
    redis+cluster://[user:password@]host:7000,host:7001?shards=16

More shards spread a queue over several cluster slots (and nodes); priority is then strict
within a shard and within each claimed batch, but only best-effort across shards, as in
dyno-queues. Time comes from the server (``TIME`` inside the scripts). Consumers rotate over
the shards, starting at a random one; an empty claim returns the shard's next due time so
the worker sleeps until then.

Modules: ``options.py`` (URL options, connecting), ``shards.py`` (the shared client, key
layout, script calls), ``scripts.py`` + ``lua/`` (the scripts), one module per role
(``messages.py``, ``leases.py``, ``admin.py``, ``limits.py``, ``rates.py``,
``results.py``, ``registry.py``, ``batches.py``, ``ledger.py``), and this one, which
composes them.
"""

from __future__ import annotations

from typing import Any

from tickwork.scheduler.backends.base import Backend, Capability
from tickwork.scheduler.backends.redis.admin import RedisAborts, RedisPoison, RedisQueues
from tickwork.scheduler.backends.redis.batches import RedisBatches
from tickwork.scheduler.backends.redis.changes import RedisChanges
from tickwork.scheduler.backends.redis.leases import RedisLeases
from tickwork.scheduler.backends.redis.ledger import RedisLedger
from tickwork.scheduler.backends.redis.limits import RedisLimits
from tickwork.scheduler.backends.redis.loop_wire import LoopWire
from tickwork.scheduler.backends.redis.messages import RedisMessages
from tickwork.scheduler.backends.redis.options import connect, without_query
from tickwork.scheduler.backends.redis.rates import RedisRates
from tickwork.scheduler.backends.redis.registry import RedisRegistry
from tickwork.scheduler.backends.redis.results import RedisResults
from tickwork.scheduler.backends.redis.shards import RedisShards
from tickwork.scheduler.clock import Clock


class RedisBackend(Backend):
    """Storage on Redis or Redis Cluster. Thread-safe (redis-py pools connections)."""

    name = "Redis"
    capabilities = frozenset({Capability.FAIR_SHARE})

    def __init__(self, client: Any, *args: Any, **options: Any) -> None:
        """``client`` and the rest as ``RedisShards`` takes them."""
        self.store = RedisShards(client, *args, **options)
        self.messages = RedisMessages(self.store)
        self.limits = RedisLimits(self.store)
        self.leases = RedisLeases(self.store, self.limits)
        self.poison = RedisPoison(self.store)
        self.queues = RedisQueues(self.store)
        self.aborts = RedisAborts(self.store)
        self.rates = RedisRates(self.store)
        self.results = RedisResults(self.store)
        self.registry = RedisRegistry(self.store)
        self.batches = RedisBatches(self.store)
        self.ledger = RedisLedger(self.store)
        self.changes = RedisChanges(self.store, self.ledger)

    @classmethod
    def from_url(cls, url: str, clock: Clock | None = None) -> RedisBackend:
        del clock  # shared state always runs on the server's clock (TIME in the scripts)
        client, options, cluster, where = connect(url)
        return cls(
            client,
            options,
            cluster=cluster,
            description=where,
            loop_wire=None if cluster else LoopWire(without_query(url), options.client_options()),
        )

    def now_ms(self) -> int:
        return self.store.now_ms()

    def close(self) -> None:
        self.store.close()
