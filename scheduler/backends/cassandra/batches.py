"""The Cassandra backend's batches: one partition of ``batches`` per batch, holding its
description and counts as static columns and a row per settled member.

Members settle with one lightweight transaction per batch and call: a conditional batch
that inserts each new member's row (``IF outcome = null``) and moves the counts on from
the values just read (``IF settled = ? AND failed = ?``), all in the one partition, so an
outcome and its count are written together or not at all. A member whose row exists
already (a redelivered run) adds nothing. When another writer moved the counts first,
the transaction is not applied and is tried again from a fresh read (contention costs
Paxos rounds, never a wrong count).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

from tickwork.scheduler.backends.cassandra import cql
from tickwork.scheduler.backends.cassandra.batching import ttl_seconds
from tickwork.scheduler.backends.cassandra.rows import applied
from tickwork.scheduler.backends.cassandra.shard_lock import CassandraShardLock
from tickwork.scheduler.backends.records import BatchRecord, MemberOutcome
from tickwork.scheduler.backends.roles import Batches
from tickwork.scheduler.errors import BackendError

_CAS_ATTEMPTS = 200


class CassandraBatches(Batches):
    """Descriptions, counts and member outcomes of batches."""

    def __init__(self, store: CassandraShardLock) -> None:
        self._store = store

    def _ttl_s(self, expires_ms: int) -> int:
        return ttl_seconds(expires_ms - self._store.now_ms())

    def open(self, batch_id: str, description: bytes, expires_ms: int) -> None:
        params = (batch_id, description, self._ttl_s(expires_ms))
        self._store.run(self._store.prepare(cql.OPEN_BATCH), params)

    def settle(self, outcomes: Sequence[MemberOutcome]) -> list[tuple[int, int]]:
        groups: dict[str, list[int]] = {}
        for index, o in enumerate(outcomes):
            groups.setdefault(o.batch, []).append(index)
        counts = [(0, 0)] * len(outcomes)
        for batch_id, indexes in groups.items():
            found = self._settle(batch_id, [outcomes[i] for i in indexes])
            for i, answer in zip(indexes, found, strict=True):
                counts[i] = answer
        return counts

    def _settle(self, batch_id: str, outcomes: list[MemberOutcome]) -> list[tuple[int, int]]:
        """Settle members of one batch: a conditional batch per attempt."""
        ttl_s = self._ttl_s(max(o.expires_ms for o in outcomes))
        members = sorted({o.member for o in outcomes})
        for _ in range(_CAS_ATTEMPTS):
            row = self._store.run(self._store.prepare(cql.SELECT_BATCH_COUNTS), (batch_id,)).one()
            settled_before = self._store.run(
                self._store.prepare(cql.SELECT_BATCH_SETTLED), (batch_id, members)
            )
            seen = {int(r.member) for r in settled_before}
            opened = row is not None and row.settled is not None
            settled, failed = (int(row.settled), int(row.failed)) if opened else (0, 0)
            new: dict[int, MemberOutcome] = {}
            for o in outcomes:
                if o.member not in seen and o.member not in new:
                    new[o.member] = o
            if not new:
                return [(settled, failed)] * len(outcomes)
            answers: dict[int, tuple[int, int]] = {}
            total, total_failed = settled, failed
            batch = self._store.batch()
            for member, o in new.items():
                total += 1
                total_failed += int(o.failed)
                answers[member] = (total, total_failed)
                params = (ttl_s, o.outcome, o.failed, batch_id, member)
                batch.add(self._store.prepare(cql.SETTLE_MEMBER), params)
            if opened:
                count = (ttl_s, total, total_failed, batch_id, settled, failed)
                batch.add(self._store.prepare(cql.COUNT_MEMBERS), count)
            else:
                batch.add(
                    self._store.prepare(cql.COUNT_FIRST_MEMBERS),
                    (ttl_s, total, total_failed, batch_id),
                )
            if applied(self._store.run(batch)):
                final = (total, total_failed)
                return [answers[o.member] if new.get(o.member) is o else final for o in outcomes]
            time.sleep(random.uniform(0.001, 0.01))  # another writer won: read again
        raise BackendError(f"the batch {batch_id!r} is too contended: try again")

    def read(self, batch_id: str, outcomes: bool = True) -> BatchRecord | None:
        rows = list(self._store.run(self._store.prepare(cql.SELECT_BATCH), (batch_id,)))
        if not rows:
            return None
        head = rows[0]
        found: dict[int, bytes] = {}
        if outcomes:
            found = {
                int(r.member): bytes(r.outcome)
                for r in rows
                if r.member is not None and r.outcome is not None
            }
        description = None if head.description is None else bytes(head.description)
        return BatchRecord(description, int(head.settled or 0), int(head.failed or 0), found)
