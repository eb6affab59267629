"""The Cassandra backend's rate limits.

A limit is one row of ``rate_limits``: the times of its last ``count`` starts, granted or
reserved, in order, changed only by a lightweight transaction under a version check (as
the rows of concurrency limits are). Each reservation is also a row of ``rate_starts``
(limit, member -> time) written with a time to live of its time plus a period, so a
message that comes back at its reserved time finds it with one read. Costs: a start
reserved is one read, one or two Paxos round trips and one write; a start that was
reserved earlier is one read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scheduler.backends.base import RateRequest
from scheduler.backends.cassandra import cql
from scheduler.backends.cassandra.limits import CasRow, CassandraLimits

_RATE_ROW = CasRow(cql.SELECT_RATE, cql.INSERT_RATE, cql.UPDATE_RATE, lambda v: list(v or []))


class CassandraRates(CassandraLimits):
    """Starts and reservations of rate limits."""

    def reserve_starts(self, requests: Sequence[RateRequest]) -> list[int | None]:
        return [self._reserve(request) for request in requests]

    def _reserve(self, request: RateRequest) -> int | None:
        found = self._run(self._prepare(cql.SELECT_RATE_START), (request.limit, request.member))
        row = found.one()
        if row is not None:
            at = int(row.at_ms)
            return None if at <= self.now_ms() else at

        def reserve(recent: list[int], now: int) -> tuple[list[int], tuple[int, int]]:
            live = [t for t in recent if t > now - request.period_ms]
            at = now
            if len(live) >= request.count:
                at = max(now, live[-request.count] + request.period_ms)
            return [*live, at][-request.count :], (at, now)

        at, now = self._compare_and_set(_RATE_ROW, request.limit, reserve)
        ttl_s = math.ceil((at - now + request.period_ms) / 1000) + 1
        params = (request.limit, request.member, at, ttl_s)
        self._run(self._prepare(cql.INSERT_RATE_START), params)
        return None if at <= now else at

    def rate_usage(self, limits: Sequence[str], period_ms: int) -> dict[str, tuple[int, int]]:
        now = self.now_ms()
        usage: dict[str, tuple[int, int]] = {}
        for limit in limits:
            times = [
                int(row.at_ms) for row in self._run(self._prepare(cql.SELECT_RATE_STARTS), (limit,))
            ]
            started = sum(1 for t in times if now - period_ms < t <= now)
            usage[limit] = (started, sum(1 for t in times if t > now))
        return usage
