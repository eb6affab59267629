"""The Cassandra backend's rate limits.

A limit is one row of ``rate_limits``: the times of its last ``count`` units, granted or
reserved, in order (a start of several units is that many times), changed only by a
lightweight transaction under a version check (as the rows of concurrency limits are).
Each unit reserved is also a row of ``rate_starts`` (limit, member -> time) written
with a time to live of its time plus a period, so a message that comes back at its
reserved time finds it with one read. Costs, per limit and batch of messages: one read
of the members' reservations, then for those without one a compare-and-set (a Paxos
round trip or two, more under contention) and one batch writing them.
"""

from __future__ import annotations

from collections.abc import Sequence

from tickwork.scheduler.backends.cassandra import cql
from tickwork.scheduler.backends.cassandra.batching import add_to_batch, ttl_seconds
from tickwork.scheduler.backends.cassandra.limits import CasRow, CassandraLimits
from tickwork.scheduler.backends.cassandra.shard_lock import CassandraShardLock
from tickwork.scheduler.backends.records import RateRequest
from tickwork.scheduler.backends.roles import Rates

_RATE_ROW = CasRow(cql.SELECT_RATE, cql.INSERT_RATE, cql.UPDATE_RATE, lambda v: list(v or []))


class CassandraRates(Rates):
    """Starts and reservations of rate limits."""

    def __init__(self, store: CassandraShardLock, limits: CassandraLimits) -> None:
        self._store = store
        self._limits = limits

    def reserve(self, requests: Sequence[RateRequest]) -> list[int | None]:
        by_limit: dict[str, list[int]] = {}
        for index, request in enumerate(requests):
            by_limit.setdefault(request.limit, []).append(index)
        answers: list[int | None] = [None] * len(requests)
        for indexes in by_limit.values():
            found = self._reserve([requests[i] for i in indexes])
            for index, answer in zip(indexes, found, strict=True):
                answers[index] = answer
        return answers

    def _reserve(self, requests: list[RateRequest]) -> list[int | None]:
        """Reserve starts for ``requests`` of one limit: one read of the reservations its
        members have, one compare-and-set for the others, one batch writing theirs."""
        limit = requests[0].limit
        members = [r.member for r in requests]
        rows = self._store.run(self._store.prepare(cql.SELECT_RATE_MEMBERS), (limit, members))
        reserved = {str(row.member): int(row.at_ms) for row in rows}
        new = [r for r in requests if r.member not in reserved]
        now = self._store.now_ms()
        dropped: dict[str, int] = {}  # not reserving, and no start now: not recorded
        if new:

            def reserve(recent: list[int], now: int) -> tuple[list[int], tuple[list[int], int]]:
                times = []
                for r in new:
                    live = [t for t in recent if t > now - r.period_ms]
                    room = r.starts - r.units + 1
                    at = now
                    if len(live) >= room:
                        at = max(now, live[-room] + r.period_ms)
                    if at <= now or r.reserve:
                        recent = [*live, *[at] * r.units][-r.starts :]
                    times.append(at)
                return recent, (times, now)

            times, now = self._limits.compare_and_set(_RATE_ROW, limit, reserve)
            batch = self._store.batch()
            for r, at in zip(new, times, strict=True):
                if at > now and not r.reserve:
                    dropped[r.member] = at
                    continue
                reserved[r.member] = at
                ttl_s = ttl_seconds(at - now + r.period_ms)
                insert = self._store.prepare(cql.INSERT_RATE_START)
                for member in [r.member, *(f"{r.member}+{n}" for n in range(2, r.units + 1))]:
                    add_to_batch(batch, insert, (limit, member, at, ttl_s))
            if len(dropped) < len(new):
                self._store.run(batch)
        return [
            dropped[m] if m in dropped else None if reserved[m] <= now else reserved[m]
            for m in members
        ]

    def usage(self, limits: Sequence[str], period_ms: int) -> dict[str, tuple[int, int]]:
        now = self._store.now_ms()
        usage: dict[str, tuple[int, int]] = {}
        for limit in limits:
            times = [
                int(row.at_ms)
                for row in self._store.run(self._store.prepare(cql.SELECT_RATE_STARTS), (limit,))
            ]
            started = sum(1 for t in times if now - period_ms < t <= now)
            usage[limit] = (started, sum(1 for t in times if t > now))
        return usage
