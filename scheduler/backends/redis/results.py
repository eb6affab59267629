"""The Redis backend's result records: one string per message id,
``{prefix}:result:{id}``, that Redis expires itself (``PSETEX``). A batch is one pipelined
round trip (on a cluster, one per node its keys live on)."""

from __future__ import annotations

from collections.abc import Sequence

from tickwork.scheduler.backends.redis.shards import RedisShards
from tickwork.scheduler.backends.roles import Results


class RedisResults(Results):
    """Result records of messages."""

    def __init__(self, store: RedisShards) -> None:
        self._store = store

    def _result_key(self, message_id: str) -> str:
        return f"{self._store.prefix}:result:{message_id}"

    def put(self, results: Sequence[tuple[str, bytes, int]]) -> None:
        if results:
            calls = [(self._result_key(i), max(1, ttl), body) for i, body, ttl in results]
            self._store.pipelined(calls, "psetex")

    def get(self, message_ids: Sequence[str]) -> dict[str, bytes]:
        if not message_ids:
            return {}
        found = self._store.pipelined([(self._result_key(i),) for i in message_ids], "get")
        return {i: bytes(body) for i, body in zip(message_ids, found, strict=True) if body}
