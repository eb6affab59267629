"""The consume cycle: lock a shard, make expired leases due again, read due rows after the
read position, write their leases at the fence, release the lock with advanced positions."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from cassandra.query import BatchStatement

from tickwork.scheduler.backends.base import (
    Claim,
    ClaimBatch,
    Envelope,
)
from tickwork.scheduler.backends.cassandra import cql
from tickwork.scheduler.backends.cassandra.batching import Batches, add_to_batch
from tickwork.scheduler.backends.cassandra.layout import (
    CLAIM_DELETE,
    CLAIM_WRITE,
    END_ID,
    EXPIRE_INSERT,
)
from tickwork.scheduler.backends.cassandra.shard_lock import (
    ORIGIN,
    READ_MARGIN_MS,
    SWEEP_LAG_MS,
    CassandraShardLock,
    ShardState,
    advanced_position,
    time_slices,
)
from tickwork.scheduler.backends.values import PROMOTED_PRIORITY

_BUSY_RETRY_MS = 50  # a shard locked by another consumer is worth a look this soon


_AGED_MS = 10_000  # a row due this long is claimed even if higher priorities wait


_FALLBACK_TIMEOUT_MS = 60_000  # the lease of a row whose timeout is null or not positive


# A logged batch is atomic but not isolated: a claim can read a message's pending row
# before the same batch's key or index row. A row whose key or index disagrees with it but
# was written after them (or whose key row is missing) is left for a later claim until it
# is this old, then deleted as an orphan: a batch lands within its write timeout (2 s by
# default) or, if its coordinator failed, is replayed from the batchlog (batches older
# than twice that timeout, looked for every 10 s). A cancel landing between an ack's read
# and its write leaves such a row for good: it never runs, and goes after this time.
_SETTLE_US = 20_000_000


def _malformed(row: Any) -> str | None:
    """What is wrong with a pending row's columns (written below the interface), if
    anything: Cassandra has no NOT NULL, so a foreign write can leave any of them out."""
    required = ("priority", "due_ms", "timeout_ms", "body")
    wrong = [f"{name} is null" for name in required if getattr(row, name) is None]
    if row.timeout_ms is not None and row.timeout_ms <= 0:
        wrong.append(f"timeout_ms holds {row.timeout_ms}")
    return "malformed row: " + "; ".join(wrong) if wrong else None


def _priority(row: Any, now: int) -> int:
    """A pending row's priority in a claim: ``PROMOTED_PRIORITY`` once its promotion time
    (a task's ``max_wait``) has come, ahead of every priority a task may have."""
    if row.promote_ms is not None and row.promote_ms <= now:
        return PROMOTED_PRIORITY
    return int(row.priority or 0)


def _claim_delete_ts(fence: int, row: Any) -> int:
    """The timestamp that deletes a claimed pending row: above the fence, and above the
    row's own write, which a producer may have stamped after the fence was taken (unknown
    for a malformed row without a body: then the fence alone)."""
    return max(fence + CLAIM_DELETE, int(row.written or 0) + 1)


class CassandraClaiming:
    """Claiming due messages and expiring leases (``CassandraLeases``' collaborator)."""

    def __init__(self, store: CassandraShardLock) -> None:
        self._store = store

    def _shards_from(self, queue: str) -> list[int]:
        count = self._store.meta(queue).shards
        with self._store.guard:
            start = self._store.cursor.get(queue, secrets.randbelow(count))
            self._store.cursor[queue] = (start + 1) % count
        return [(start + i) % count for i in range(count)]

    def claim(
        self,
        queue: str,
        limit: int,
        lookahead_ms: int = 0,
        slots: Mapping[str, int] | None = None,  # slots are taken by acquire_slots here
    ) -> ClaimBatch:
        found: list[tuple[int, Claim]] = []  # (priority, claim)
        held: list[int] = []
        busy = False  # another consumer holds a shard
        landing = False  # a row was left because the rest of its batch had not landed
        for shard in self._shards_from(queue):
            if len(found) >= limit:
                break
            state = self._store.lock(queue, shard)
            if state is None:
                busy = True  # another consumer holds it: skip, as Astyanax does
                continue
            held.append(shard)
            after = state
            try:
                _, after = self._expire(queue, shard, after)
                claims, after, unsettled = self._claim_shard(
                    queue, shard, after, limit - len(found), lookahead_ms
                )
                found += claims
                landing = landing or unsettled
            finally:
                self._store.unlock(queue, shard, after)
        if found:
            self._store.count(queue, "claimed", len(found))
            found.sort(key=lambda pair: (-pair[0], pair[1].due_ms))  # merge the shards' batches
            return ClaimBatch([claim for _, claim in found], None)
        next_due = self._next_due(queue, held)
        if busy or landing:  # another consumer is claiming there, or a write lands
            soon = self._store.now_ms() + _BUSY_RETRY_MS
            # a landing row is due itself: look again soon, not at once
            next_due = soon if next_due is None or landing else min(next_due, soon)
        return ClaimBatch([], next_due)

    def _claim_shard(
        self, queue: str, shard: int, state: ShardState, limit: int, lookahead_ms: int
    ) -> tuple[list[tuple[int, Claim]], ShardState, bool]:
        """Claim up to ``limit`` due messages of a locked shard: the rows after the read
        position plus any row the sweep finds behind it; returns the claims, the shard's
        advanced positions and whether a row was left because its write was still
        landing."""
        now = self._store.now_ms()
        window = limit * 4
        # a late row was written at most SWEEP_LAG_MS after its ready time, so the sweep
        # looks at ready times between 2x and 1x that lag ago that the read position passed
        sweep_from = max(state.swept, (now - 2 * SWEEP_LAG_MS, ""))
        sweep_to = min(state.read, (now - SWEEP_LAG_MS, END_ID))
        late: list[Any] = []
        late_seen = sweep_from
        if sweep_from < sweep_to:
            late, late_seen = self._store.read_between(
                queue, shard, sweep_from, sweep_to, window, sliced=True
            )
        rows, seen = self._store.read_between(
            queue, shard, state.read, (now + lookahead_ms, END_ID), window
        )
        candidates = sorted(late + rows, key=lambda r: (-_priority(r, now), r.ready_ms, r.id))
        candidates = candidates[:limit]
        oldest = rows[0] if rows else None
        if (
            candidates
            and oldest is not None
            and oldest not in candidates
            and oldest.ready_ms <= now - _AGED_MS
        ):
            # the oldest row has waited long behind higher priorities: it takes the last
            # place, so the read position moves on instead of re-reading what was consumed
            candidates[-1] = oldest
        orphans, unsettled = self._orphans(queue, candidates)
        candidates = [row for row in candidates if row.id not in unsettled]
        leased_at = self._store.now_ms()  # after the reads: leases count from about when they start
        claims: list[tuple[int, Claim]] = []
        batches = Batches()
        for row in candidates:
            if row.id in orphans:  # cancelled, replaced or written twice meanwhile
                place = (queue, row.bucket, shard, row.ready_ms, row.id)
                delete = self._store.prepare(cql.DELETE_PENDING)
                add_to_batch(batches.current, delete, (_claim_delete_ts(state.fence, row), *place))
            else:
                claim = self._lease_writes(
                    batches.current, queue, state.fence, shard, row, leased_at
                )
                claims.append((_priority(row, now), claim))
            batches.added(len(row.body or b""))
        self._store.execute_many(batches.all())
        consumed = {row.id for row in candidates}
        read = advanced_position(state.read, rows, consumed, seen, (now - READ_MARGIN_MS, END_ID))
        swept = advanced_position(sweep_from, late, consumed, late_seen, sweep_to)
        # the furthest deadline from now, a lookahead's included: ``live_leases`` finds
        # leases by their deadlines up to that far ahead
        longest = max((c.deadline_ms - leased_at for _, c in claims), default=0)
        lease_ms = max(state.lease_ms, longest)
        state = replace(state, read=read, swept=swept, lease_ms=lease_ms)
        return claims, state, bool(unsettled)

    def _orphans(self, queue: str, rows: list[Any]) -> tuple[set[str], set[str]]:
        """Ids of ``rows`` that must not run: their key now belongs to another message, or
        (for rows stored as ready later than due, which a concurrent identical re-send can
        write twice) the index points elsewhere; and ids of rows whose key or index row
        is older than they are (or missing) while they are fresh: the same batch's other
        writes have not landed yet (a new message, a next occurrence, a cancel), so they
        are neither run nor deleted now."""
        orphans: set[str] = set()
        unsettled: set[str] = set()
        now_us = self._store.now_us()

        def disagrees(row: Any, found: Any) -> None:
            written = row.written
            settled = found is not None and written is not None and found.written >= written
            if settled or now_us - int(written or 0) > _SETTLE_US:
                orphans.add(row.id)
            else:
                unsettled.add(row.id)

        keys = [r.key for r in rows if r.key is not None]
        holders = self._store.key_rows(queue, keys) if keys else {}
        for row in rows:
            holder = holders.get(row.key) if row.key is not None else None
            if row.key is not None and (holder is None or holder.id != row.id):
                disagrees(row, holder)
        moved = [r for r in rows if r.ready_ms != r.due_ms and r.id not in orphans | unsettled]
        where = self._store.indexed(queue, [r.id for r in moved])
        for row in moved:
            found = where.get(row.id)
            if found is None or found.leased or found.ready_ms != row.ready_ms:
                disagrees(row, found)
        return orphans, unsettled

    def _lease_writes(
        self, batch: BatchStatement, queue: str, fence: int, shard: int, row: Any, now: int
    ) -> Claim:
        """Add the writes that move a pending row to a lease; returns the claim. A row
        written below the interface with a null or impossible column is leased with
        stand-in values and claimed as malformed (the worker poisons it)."""
        malformed = _malformed(row)
        if malformed is not None:
            row = row._replace(
                priority=row.priority or 0,
                due_ms=row.ready_ms if row.due_ms is None else row.due_ms,
                timeout_ms=_FALLBACK_TIMEOUT_MS,
                body=row.body or b"",
            )
        deadline = max(now, row.ready_ms) + row.timeout_ms
        attempt = (row.attempt or 0) + 1
        token = str(fence)
        add_to_batch(
            batch,
            self._store.prepare(cql.DELETE_PENDING),
            (_claim_delete_ts(fence, row), queue, row.bucket, shard, row.ready_ms, row.id),
        )
        add_to_batch(
            batch,
            self._store.prepare(cql.INSERT_LEASE),
            (
                queue,
                shard,
                row.id,
                token,
                deadline,
                row.due_ms,
                row.priority,
                row.key,
                row.timeout_ms,
                attempt,
                row.body,
                row.last_error,
                fence + CLAIM_WRITE,
            ),
        )
        add_to_batch(
            batch,
            self._store.prepare(cql.INSERT_INDEX_LEASED),
            (queue, row.id, row.bucket, shard, row.ready_ms, fence + CLAIM_WRITE),
        )
        add_to_batch(
            batch,
            self._store.prepare(cql.INSERT_DEADLINE),
            (
                queue,
                shard,
                self._store.bucket(queue, deadline),
                deadline,
                row.id,
                fence + CLAIM_WRITE,
            ),
        )
        return Claim(
            row.id,
            queue,
            row.key,
            row.body,
            token,
            attempt,
            row.due_ms,
            deadline,
            row.timeout_ms,
            malformed,
        )

    def _expire(self, queue: str, shard: int, state: ShardState) -> tuple[int, ShardState]:
        """Under the shard lock: leases past their deadline become due again. Reads the
        deadlines after the shard's expiry position, then the leases they point to; a
        deadline whose lease is gone or was extended is stale and is deleted."""
        now = self._store.now_ms()
        after = state.expired_ms
        if now <= after:  # the last holder's clock was ahead of ours
            return 0, state
        # one read per slice of time: after a pause, the deadlines of every lease acked
        # meanwhile lie in between, as tombstones, and one read must not scan them all
        slices = time_slices(after + 1, now)
        args = [(queue, shard, self._store.bucket(queue, lo), lo - 1, hi) for lo, hi in slices]
        results = self._store.concurrently(
            self._store.prepare(cql.SELECT_DEADLINES_IN_BUCKET), args
        )
        deadlines = [row for result in results for row in result]
        # deadlines are written far ahead of now (a lease lasts the task's timeout), so
        # none can land at or before now after this read
        moved = replace(state, expired_ms=slices[-1][1])
        if not deadlines:
            return 0, moved
        leases = self._store.leases_by_id(queue, shard, list({r.id for r in deadlines}))
        batches = []
        expired = 0
        fence = state.fence
        for row in deadlines:
            batch = self._store.batch()
            add_to_batch(
                batch,
                self._store.prepare(cql.DELETE_DEADLINE),
                (
                    fence,
                    queue,
                    shard,
                    self._store.bucket(queue, row.deadline_ms),
                    row.deadline_ms,
                    row.id,
                ),
            )
            lease = leases.get(row.id)
            if lease is not None and lease.deadline_ms <= now:
                add_to_batch(
                    batch, self._store.prepare(cql.DELETE_LEASE), (fence, queue, shard, row.id)
                )
                envelope = Envelope(
                    row.id,
                    queue,
                    lease.key,
                    lease.priority,
                    lease.due_ms,
                    lease.timeout_ms,
                    lease.body,
                )
                self._store.insert(
                    batch, envelope, fence + EXPIRE_INSERT, lease.attempt, lease.last_error
                )
                expired += 1
                leases.pop(row.id)
            batches.append(batch)
        self._store.execute_many(batches)
        if expired:
            self._store.count(queue, "redelivered", expired)
        return expired, moved

    def _next_due(self, queue: str, shards: list[int]) -> int | None:
        """The earliest ready time after the read positions of ``shards`` (just claimed
        from, so their positions are fresh). Lease deadlines are not included: an expired
        lease is found by the next claim (workers poll at least every ``poll_interval_s``)."""
        buckets = list(range(self._store.meta(queue).buckets))
        candidates = []
        for shard in shards:
            with self._store.guard:
                after = self._store.positions.get((queue, shard), ORIGIN)
            rows = self._store.run(
                self._store.prepare(cql.SELECT_FIRST_PENDING_AFTER), (queue, buckets, shard, *after)
            )
            candidates += [r.ready_ms for r in rows]
        return min(candidates) if candidates else None

    def requeue_expired(self, queue: str) -> int:
        count = 0
        for shard in range(self._store.meta(queue).shards):
            state = self._store.lock(queue, shard)
            if state is None:
                continue
            after = state
            try:
                expired, after = self._expire(queue, shard, state)
                count += expired
            finally:
                self._store.unlock(queue, shard, after)
        return count
