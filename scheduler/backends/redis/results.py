"""The Redis backend's result records: one string per message id,
``{prefix}:result:{id}``, that Redis expires itself (``PSETEX``). A batch is one pipelined
round trip (on a cluster, one per node its keys live on)."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.backends.redis.shards import RedisShards


class RedisResults(RedisShards):
    """Result records of messages."""

    def _result_key(self, message_id: str) -> str:
        return f"{self._prefix}:result:{message_id}"

    def put_results(self, results: Sequence[tuple[str, bytes, int]]) -> None:
        if results:
            calls = [(self._result_key(i), max(1, ttl), body) for i, body, ttl in results]
            self._pipelined(calls, "psetex")

    def get_results(self, message_ids: Sequence[str]) -> dict[str, bytes]:
        if not message_ids:
            return {}
        found = self._pipelined([(self._result_key(i),) for i in message_ids], "get")
        return {i: bytes(body) for i, body in zip(message_ids, found, strict=True) if body}
