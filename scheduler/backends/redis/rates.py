"""The Redis backend's rate limits: each limit is one sorted set ``{prefix:rate:NAME}``
of the starts it granted or reserved (member -> start time, ms), trimmed to the last
period by the ``rate_reserve`` script that reserves starts. On one node the requests of
a batch go in one script call; on a cluster, one call per limit (its own hash tag)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tickwork.scheduler.backends.records import RateRequest
from tickwork.scheduler.backends.redis.shards import RedisShards
from tickwork.scheduler.backends.roles import Rates


class RedisRates(Rates):
    """Starts and reservations of rate limits."""

    def __init__(self, store: RedisShards) -> None:
        self._store = store

    def _rate_key(self, limit: str) -> str:
        return f"{{{self._store.prefix}:rate:{limit}}}"

    def reserve(self, requests: Sequence[RateRequest]) -> list[int | None]:
        groups = self._store.calls_by_limit([r.limit for r in requests])
        calls: list[tuple[str, list[str], list[Any]]] = []
        for indexes in groups:
            keys: list[str] = []
            args: list[Any] = []
            for i in indexes:
                r = requests[i]
                keys.append(self._rate_key(r.limit))
                args += [r.member, r.starts, r.period_ms, r.units, 1 if r.reserve else 0]
            calls.append(("rate_reserve", keys, args))
        answers: list[int | None] = [None] * len(requests)
        for indexes, found in zip(groups, self._store.run_scripts(calls), strict=True):
            for i, answer in zip(indexes, found, strict=True):
                answers[i] = None if int(answer) < 0 else int(answer)
        return answers

    def usage(self, limits: Sequence[str], period_ms: int) -> dict[str, tuple[int, int]]:
        now = self._store.now_ms()
        usage: dict[str, tuple[int, int]] = {}
        for limit in limits:
            key = self._rate_key(limit)
            started = self._store.call(self._store.client.zcount, key, f"({now - period_ms}", now)
            ahead = self._store.call(self._store.client.zcount, key, f"({now}", "+inf")
            usage[limit] = (int(started), int(ahead))
        return usage
