"""The Redis backend's worker registry: a sorted set of live workers (id -> expiry, ms on
the server's clock) and a hash of their records, under one hash tag
``{prefix:workers}``; expired entries are dropped when the registry is next read."""

from __future__ import annotations

from typing import Any

from tickwork.scheduler.backends.redis.shards import RedisShards
from tickwork.scheduler.backends.roles import Registry


class RedisRegistry(Registry):
    """Records of live workers."""

    def __init__(self, store: RedisShards) -> None:
        self._store = store

    def _registry_keys(self) -> tuple[str, str]:
        tag = f"{{{self._store.prefix}:workers}}"
        return f"{tag}:z", f"{tag}:h"

    def put(self, worker_id: str, record: bytes, ttl_ms: int) -> None:
        expiries, records = self._registry_keys()
        expires = self._store.now_ms() + ttl_ms

        def run() -> Any:
            pipe = self._store.client.pipeline(transaction=False)
            pipe.zadd(expiries, {worker_id: expires})
            pipe.hset(records, worker_id, record)
            return pipe.execute()

        self._store.call(run)

    def delete(self, worker_id: str) -> None:
        expiries, records = self._registry_keys()
        self._store.call(self._store.client.zrem, expiries, worker_id)
        self._store.call(self._store.client.hdel, records, worker_id)

    def records(self) -> dict[str, bytes]:
        expiries, records = self._registry_keys()
        now = self._store.now_ms()
        gone = self._store.call(self._store.client.zrangebyscore, expiries, "-inf", now)
        if gone:
            self._store.call(self._store.client.zrem, expiries, *gone)
            self._store.call(self._store.client.hdel, records, *gone)
        live = [
            i.decode()
            for i in self._store.call(self._store.client.zrangebyscore, expiries, now, "+inf")
        ]
        if not live:
            return {}
        found = self._store.call(self._store.client.hmget, records, live)
        return {i: bytes(body) for i, body in zip(live, found, strict=True) if body}
