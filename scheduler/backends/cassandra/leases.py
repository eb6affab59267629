"""The Cassandra backend's leases: claims (``claiming.py``) and settling a claim: ack
(with the next occurrence), retry, release, extend and poison, each checked against the
claim's lease token and written just above its fence."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cassandra.query import BatchStatement

from tickwork.scheduler.backends.base import Claim, Envelope
from tickwork.scheduler.backends.cassandra import cql
from tickwork.scheduler.backends.cassandra.batching import Batches, add_to_batch
from tickwork.scheduler.backends.cassandra.claiming import CassandraClaiming
from tickwork.scheduler.backends.cassandra.layout import ACK_DELETE, ACK_INSERT
from tickwork.scheduler.backends.cassandra.ledger import add_ledger
from tickwork.scheduler.backends.cassandra.limits import CassandraLimits
from tickwork.scheduler.backends.cassandra.shard_lock import CassandraShardLock
from tickwork.scheduler.backends.records import Failure, LedgerEntry, Waiter
from tickwork.scheduler.backends.roles import Leases
from tickwork.scheduler.backends.values import ClaimBatch


class CassandraLeases(Leases):
    """Claims (through ``CassandraClaiming``) and their settling: ack, retry, release,
    extend and poison."""

    def __init__(self, store: CassandraShardLock, limits: CassandraLimits) -> None:
        self._store = store
        self._limits = limits
        self._claiming = CassandraClaiming(store)

    def claim(
        self,
        queue: str,
        limit: int,
        lookahead_ms: int = 0,
        slots: Mapping[str, int] | None = None,
    ) -> ClaimBatch:
        return self._claiming.claim(queue, limit, lookahead_ms, slots)

    def requeue_expired(self, queue: str) -> int:
        return self._claiming.requeue_expired(queue)

    def ack_releasing(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        held: Sequence[tuple[str, str]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> tuple[list[bool], list[Waiter]]:
        """The ack, then the release: a limit's holders live in rows of their own, so the
        two cannot share a batch."""
        return self.ack(items, ledger), self._limits.release(held) if held else []

    def _drop_lease(self, batch: BatchStatement, claim: Claim, lease: Any) -> int:
        fence = int(claim.token)
        ts = fence + ACK_DELETE
        shard = self._store.shard(claim.queue, claim.id, claim.key)
        deadline_bucket = self._store.bucket(claim.queue, lease.deadline_ms)
        add_to_batch(
            batch, self._store.prepare(cql.DELETE_LEASE), (ts, claim.queue, shard, claim.id)
        )
        add_to_batch(batch, self._store.prepare(cql.DELETE_INDEX), (ts, claim.queue, claim.id))
        add_to_batch(
            batch,
            self._store.prepare(cql.DELETE_DEADLINE),
            (ts, claim.queue, shard, deadline_bucket, lease.deadline_ms, claim.id),
        )
        return fence

    def _finish(
        self,
        batch: BatchStatement,
        claim: Claim,
        lease: Any,
        nxt: Envelope | None,
        key_holder: str | None,
    ) -> None:
        """Drop the lease, and hand the key (if any) to the next occurrence or release it
        (``key_holder``: who holds the claim's key now, read beforehand)."""
        fence = self._drop_lease(batch, claim, lease)
        if nxt is not None:
            self._store.insert(batch, nxt, fence + ACK_INSERT)
        elif claim.key is not None and key_holder == claim.id:
            key_shard = self._store.key_shard(claim.queue, claim.key)
            add_to_batch(
                batch,
                self._store.prepare(cql.DELETE_KEY),
                (fence + ACK_DELETE, claim.queue, key_shard, claim.key),
            )

    def ack(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> list[bool]:
        """One read of the leases per shard, then logged batches of several acks (each
        with its ledger entry)."""
        leases = self._store.held_many([claim for claim, _ in items])
        keys: dict[str, list[str]] = {}
        for claim, nxt in items:
            if claim.key is not None and nxt is None:
                keys.setdefault(claim.queue, []).append(claim.key)
        holders = {
            (queue, key): holder
            for queue, names in keys.items()
            for key, holder in self._store.key_holders(queue, names).items()
        }
        results = []
        batches = Batches()
        acked: dict[str, int] = {}
        for index, (claim, nxt) in enumerate(items):
            lease = leases.get((claim.queue, claim.id))
            if lease is None or lease.lease_token != claim.token:
                results.append(False)
                continue
            holder = None if claim.key is None else holders.get((claim.queue, claim.key))
            self._finish(batches.current, claim, lease, nxt, holder)
            if index < len(ledger) and (entry := ledger[index]) is not None:
                add_ledger(
                    batches.current,
                    self._store.prepare(cql.INSERT_LEDGER),
                    entry,
                    self._store.stamp_us(),
                )
            results.append(True)
            acked[claim.queue] = acked.get(claim.queue, 0) + 1
            batches.added(0 if nxt is None else len(nxt.body))
        self._store.execute_many(batches.all())
        for queue, count in acked.items():
            self._store.count(queue, "acked", count)
        return results

    def retry(
        self, claim: Claim, due_ms: int, error: str, ledger: LedgerEntry | None = None
    ) -> bool:
        lease = self._store.held(claim)
        if lease is None:
            return False
        batch = self._store.batch()
        fence = self._drop_lease(batch, claim, lease)
        envelope = Envelope(
            claim.id, claim.queue, claim.key, lease.priority, due_ms, claim.timeout_ms, claim.body
        )
        self._store.insert(batch, envelope, fence + ACK_INSERT, lease.attempt, error)
        if ledger is not None:
            add_ledger(
                batch, self._store.prepare(cql.INSERT_LEDGER), ledger, self._store.stamp_us()
            )
        self._store.run(batch)
        self._store.count(claim.queue, "retried", 1)
        return True

    def release(self, claims: Iterable[Claim], due_ms: int | None = None) -> int:
        """One read of the leases per shard, then logged batches of several releases."""
        claims = list(claims)
        leases = self._store.held_many(claims)
        batches = Batches()
        released = 0
        for claim in claims:
            lease = leases.get((claim.queue, claim.id))
            if lease is None or lease.lease_token != claim.token:
                continue
            batch = batches.current
            fence = self._drop_lease(batch, claim, lease)
            envelope = Envelope(
                claim.id,
                claim.queue,
                claim.key,
                lease.priority,
                lease.due_ms if due_ms is None else due_ms,
                claim.timeout_ms,
                claim.body,
            )
            attempt = max(lease.attempt - 1, 0)
            self._store.insert(batch, envelope, fence + ACK_INSERT, attempt, lease.last_error)
            batches.added(len(claim.body))
            released += 1
        self._store.execute_many(batches.all())
        return released

    def extend(self, claims: Sequence[Claim], lease_ms: int) -> list[bool]:
        """One read of the leases per shard, then logged batches of several extensions."""
        leases = self._store.held_many(claims)
        deadline = self._store.now_ms() + lease_ms
        batches = Batches()
        results = []
        for claim in claims:
            lease = leases.get((claim.queue, claim.id))
            if lease is None or lease.lease_token != claim.token:
                results.append(False)
                continue
            shard = self._store.shard(claim.queue, claim.id, claim.key)
            ts = int(claim.token) + ACK_DELETE
            bucket = self._store.bucket(claim.queue, deadline)
            batch = batches.current
            add_to_batch(
                batch,
                self._store.prepare(cql.EXTEND_LEASE),
                (ts, deadline, claim.queue, shard, claim.id),
            )
            add_to_batch(
                batch,
                self._store.prepare(cql.INSERT_DEADLINE),
                (claim.queue, shard, bucket, deadline, claim.id, ts),
            )
            batches.added(0)
            results.append(True)
        self._store.execute_many(batches.all())
        return results

    def poison(
        self,
        claim: Claim,
        failure: Failure,
        next_occurrence: Envelope | None = None,
        ledger: LedgerEntry | None = None,
    ) -> bool:
        lease = self._store.held(claim)
        if lease is None:
            return False
        batch = self._store.batch()
        holder = None if claim.key is None else self._store.key_holder(claim.queue, claim.key)
        self._finish(batch, claim, lease, next_occurrence, holder)
        add_to_batch(
            batch,
            self._store.prepare(cql.INSERT_POISON),
            (
                claim.queue,
                claim.id,
                claim.key,
                lease.priority,
                claim.timeout_ms,
                claim.attempt,
                self._store.now_ms(),
                failure.reason,
                failure.error_type,
                failure.message,
                failure.traceback,
                claim.body,
            ),
        )
        if ledger is not None:
            add_ledger(
                batch, self._store.prepare(cql.INSERT_LEDGER), ledger, self._store.stamp_us()
            )
        self._store.run(batch)
        self._store.count(claim.queue, "poisoned", 1)
        return True
