"""The shard lock (a lightweight-transaction row that hands out fences) and the shard's
read, sweep and expiry positions that its holder advances and stores on release."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cassandra import ConsistencyLevel, ReadTimeout, WriteTimeout

from tickwork.scheduler.backends.cassandra import cql
from tickwork.scheduler.backends.cassandra.layout import (
    END_ID,
    FENCE_STEP,
    CassandraLayout,
    Position,
)
from tickwork.scheduler.backends.cassandra.rows import applied
from tickwork.scheduler.errors import (
    BackendError,
)

READ_MARGIN_MS = 250  # the read position stays this far behind now


SWEEP_LAG_MS = 5_000  # the sweep for rows that landed behind the read position trails so far


_SLICE_MS = 100  # sweep and expiry reads cover this much time each ...


_MAX_SLICES = 600  # ... and at most this many per claim: after a pause they catch up


ORIGIN: Position = (-(2**62), "")


@dataclass(frozen=True)
class ShardState:
    """A held shard lock, and the shard's positions as its last holder left them."""

    fence: int
    read: Position  # every pending row at or before it was consumed ...
    swept: Position  # ... even rows that landed late, up to here
    expired_ms: int  # lease deadlines at or before it were handled
    lease_ms: int  # the longest lease a claim of the shard wrote (deadlines lie within)


def time_slices(
    first_ms: int, last_ms: int, size_ms: int = _SLICE_MS, most: int = _MAX_SLICES
) -> list[tuple[int, int]]:
    """Times ``first_ms`` to ``last_ms`` cut at multiples of ``size_ms`` (a divisor of the
    bucket width, so each slice lies in one bucket): inclusive pairs, at most ``most``."""
    slices: list[tuple[int, int]] = []
    lo = first_ms
    while lo <= last_ms and len(slices) < most:
        hi = min(last_ms, lo - lo % size_ms + size_ms - 1)
        slices.append((lo, hi))
        lo = hi + 1
    return slices


def stored_state(lock_row: Any) -> ShardState:
    """The positions stored in a shard's lock row (the origin for a shard never consumed),
    with its current fence."""
    if lock_row is None:
        return ShardState(0, ORIGIN, ORIGIN, ORIGIN[0], 0)
    read = ORIGIN if lock_row.read_ms is None else (lock_row.read_ms, lock_row.read_id or "")
    swept = ORIGIN if lock_row.swept_ms is None else (lock_row.swept_ms, lock_row.swept_id or "")
    expired = ORIGIN[0] if lock_row.expired_ms is None else lock_row.expired_ms
    return ShardState(lock_row.fence or 0, read, swept, expired, lock_row.lease_ms or 0)


def advanced_position(
    start: Position, rows: list[Any], consumed: set[str], seen: Position, ceiling: Position
) -> Position:
    """How far a position may move after a read from ``start`` that returned ``rows``
    (oldest first, complete up to ``seen``) of which ``consumed`` were taken: up to the
    row before the first one left, never past ``ceiling`` and never back."""
    position = seen
    previous = start
    for row in rows:
        if row.id not in consumed:
            position = previous
            break
        previous = (row.ready_ms, row.id)
    return max(start, min(position, ceiling))


class CassandraShardLock(CassandraLayout):
    """Taking, checking and releasing a shard lock; reading pending rows between positions."""

    def lock(self, queue: str, shard: int) -> ShardState | None:
        """Take the shard lock (LWT); returns the new fence with the shard's positions, or
        None if another holds it (or the lightweight transaction lost a race)."""
        try:
            return self.try_lock(queue, shard)
        except BackendError as err:
            if isinstance(err.__cause__, WriteTimeout | ReadTimeout):
                return None  # Paxos contention: treat the shard as busy
            raise

    def lock_row(self, queue: str, shard: int) -> Any:
        return self.run(self.prepare(cql.SELECT_LOCK), (queue, shard)).one()

    def try_lock(self, queue: str, shard: int) -> ShardState | None:
        now = self.now_ms()
        row = self.lock_row(queue, shard)
        known = stored_state(row)
        with self.guard:
            self.positions[(queue, shard)] = known.read  # fresh even if another holds it
        if row is not None and row.owner is not None and (row.expires_ms or 0) > now:
            return None
        previous = row.fence if row is not None and row.fence is not None else 0
        fence = max(self.now_us(), previous + FENCE_STEP)
        if row is None:  # a new shard: no lease of it can end before now
            known = replace(known, expired_ms=now)
            statement = self.prepare(cql.INSERT_LOCK)
            params: tuple[Any, ...] = (
                queue,
                shard,
                self.owner,
                now + self.lock_ttl_ms,
                fence,
                now,
            )
        else:
            statement = self.prepare(cql.TAKE_LOCK)
            params = (self.owner, now + self.lock_ttl_ms, fence, queue, shard, row.fence)
        try:
            taken = applied(self.run(statement, params))
        except BackendError as err:
            if not isinstance(err.__cause__, WriteTimeout):
                raise
            # a timed-out lightweight transaction may still have been applied: a serial
            # read settles it, so a lock we did take does not block the shard for its TTL
            taken = self.holds(queue, shard, fence)
        return replace(known, fence=fence) if taken else None

    def holds(self, queue: str, shard: int, fence: int) -> bool:
        """Whether this client holds the shard lock with ``fence`` (a serial read)."""
        bound = self.prepare(cql.SELECT_LOCK).bind((queue, shard))
        bound.consistency_level = ConsistencyLevel.SERIAL
        try:
            row = self.run(bound).one()
        except BackendError as err:
            if isinstance(err.__cause__, WriteTimeout | ReadTimeout):
                return False  # still unsettled: the lock expires after its TTL
            raise
        return row is not None and row.owner == self.owner and row.fence == fence

    def unlock(self, queue: str, shard: int, state: ShardState) -> None:
        """Release the lock and store the positions (only if the lock is still ours)."""
        self.run(
            self.prepare(cql.RELEASE_LOCK),
            (
                state.read[0],
                state.read[1],
                state.swept[0],
                state.swept[1],
                state.expired_ms,
                state.lease_ms,
                queue,
                shard,
                state.fence,
            ),
        )
        with self.guard:
            self.positions[(queue, shard)] = state.read

    def pending_after_sweep(self, queue: str, shard: int, stored: ShardState) -> list[Any]:
        """(ready_ms, id, due_ms) of every pending row of a shard: those after its sweep position
        (at or before it everything was consumed)."""
        buckets = list(range(self.meta(queue).buckets))
        params = (queue, buckets, shard, *stored.swept)
        return list(self.run(self.prepare(cql.SELECT_PENDING_AFTER), params))

    def live_leases(self, queue: str, shard: int, stored: ShardState) -> list[str]:
        """Ids of a shard's leases: found through their deadlines, between the expiry
        position and the furthest deadline a claim gave from its time (a lease, and the
        lookahead of one claimed before its due time) from now, one read per second of
        deadlines (the deadlines of acked leases lie in between, as tombstones)."""
        now = self.now_ms()
        first = max(stored.expired_ms, now - stored.lease_ms) + 1
        slices = time_slices(first, now + stored.lease_ms, 1000, 10**6)
        args = [(queue, shard, self.bucket(queue, lo), lo - 1, hi) for lo, hi in slices]
        results = self.concurrently(self.prepare(cql.SELECT_DEADLINES_IN_BUCKET), args)
        ids = list({str(row.id) for result in results for row in result})
        chunks = [(queue, shard, ids[i : i + 100]) for i in range(0, len(ids), 100)]
        leases = self.concurrently(self.prepare(cql.SELECT_LEASES_BY_IDS), chunks)
        return [str(row.id) for result in leases for row in result]

    def buckets_between(self, queue: str, first_ms: int, last_ms: int) -> list[int]:
        """The buckets that hold times ``first_ms`` to ``last_ms``, oldest first."""
        meta = self.meta(queue)
        first, last = first_ms // meta.bucket_ms, last_ms // meta.bucket_ms
        if last - first + 1 >= meta.buckets:
            return list(range(meta.buckets))
        return [slot % meta.buckets for slot in range(first, last + 1)]

    def read_between(
        self,
        queue: str,
        shard: int,
        after: Position,
        upto: Position,
        limit: int,
        sliced: bool = False,
    ) -> tuple[list[Any], Position]:
        """Pending rows with ``after < (ready_ms, id) <= upto``, oldest first, up to
        ``limit`` per read, and how far the rows returned are complete: a read that hit
        the limit is only known up to its last row. One read per bucket, or, ``sliced``,
        per ``_SLICE_MS`` of ready time (at most ``_MAX_SLICES``), so that a read over
        consumed rows scans a bounded number of tombstones."""
        if sliced:
            ranges = [
                (lo, max(after, (lo - 1, END_ID)), min(upto, (hi, END_ID)))
                for lo, hi in time_slices(after[0], upto[0])
            ]
            upto = min(upto, ranges[-1][2]) if ranges else after
        else:
            ranges = [
                (b * self.meta(queue).bucket_ms, after, upto)
                for b in self.buckets_between(queue, after[0], upto[0])
            ]
        args = [
            (queue, self.bucket(queue, at), shard, *lower, *upper, limit)
            for at, lower, upper in ranges
        ]
        seen = upto
        rows: list[Any] = []
        for result in self.concurrently(self.prepare(cql.SELECT_PENDING_BETWEEN), args):
            found = list(result)
            if len(found) >= limit:
                seen = min(seen, (found[-1].ready_ms, found[-1].id))
            rows += found
        rows = [r for r in rows if (r.ready_ms, r.id) <= seen]
        rows.sort(key=lambda r: (r.ready_ms, r.id))
        return rows, seen
