"""Cassandra storage: Netflix Astyanax's sharded message queue in CQL (schema and the
reasons for it in ``cassandra_schema.py``).

URL: ``cassandra://host1,host2:9042/keyspace?consistency=QUORUM&replication_factor=3&
shards=1&buckets=16&bucket_seconds=60&lock_ttl_ms=10000&username=u&password=p&ssl=true``

The consume cycle, per shard: take the shard lock with a lightweight transaction (which
also hands out a new fence) -> make expired leases due again -> read up to 4x the batch of
due messages across the shard's time buckets (one ``IN`` query) -> one logged batch per
chunk that deletes them from the queue and writes their leases, every write ``USING
TIMESTAMP`` the fence -> release the lock. Ack reads its lease and, if the token (the
fence) still matches, deletes it and writes the next occurrence in one batch, with
timestamps just above the fence, so a stale consumer can neither overwrite a newer lease
nor resurrect an occurrence that already ran.

Times: due times compare against the coordinator's clock (the offset is measured at
connect). Cassandra orders writes by timestamp, so producer and worker clocks must be in
sync (NTP), as for any Cassandra application.
"""

from __future__ import annotations

import re
import secrets
import ssl
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from cassandra import ConsistencyLevel, ReadTimeout, WriteTimeout
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import (
    EXEC_PROFILE_DEFAULT,
    Cluster,
    ExecutionProfile,
    NoHostAvailable,
    Session,
)
from cassandra.concurrent import execute_concurrent, execute_concurrent_with_args
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
from cassandra.query import UNSET_VALUE, BatchStatement, BatchType, PreparedStatement

from scheduler.backends import cassandra_cql as cql
from scheduler.backends.base import (
    Backend,
    Claim,
    ClaimBatch,
    Envelope,
    Failure,
    OnConflict,
    Outcome,
    PoisonRecord,
    QueueStats,
    State,
    StoredMessage,
)
from scheduler.backends.cassandra_schema import KEYSPACE, TABLES
from scheduler.clock import Clock
from scheduler.errors import BackendError, BackendUnavailable, ConfigurationError, KeyConflict
from scheduler.ids import stable_shard

_OPTIONS = {
    "consistency",
    "replication_factor",
    "shards",
    "buckets",
    "bucket_seconds",
    "lock_ttl_ms",
    "username",
    "password",
    "ssl",
    "create_schema",
}
_CHUNK = 20  # messages per logged batch: keeps batches under Cassandra's size warnings
_FENCE_STEP = 1000  # microseconds between two holders' fences
# Write timestamps relative to a claim's fence, in the order the writes must win:
_EXPIRE_INSERT = 1  # an expired lease's message is pending again (its lease deleted at +0)
_CLAIM_DELETE = 2  # the claim removes the pending row ...
_CLAIM_WRITE = 3  # ... and writes the lease
_ACK_DELETE = 4  # ack / retry / release / poison drop the lease (extend also writes here)
_ACK_INSERT = 5  # and write the next occurrence (or the retried message)
_RECENT_MS = 5_000  # a claim reads due times newer than now - this, unless catching up
_CATCH_UP_EVERY_S = 10.0
_TABLE = re.compile(r"\b(FROM|INTO|UPDATE)\s+(" + "|".join(TABLES) + r")\b")


@dataclass(frozen=True)
class QueueMeta:
    shards: int
    buckets: int
    bucket_ms: int


def _root(message_id: str) -> str:
    return message_id.split(".", 1)[0]


class CassandraBackend(Backend):
    """Storage on Cassandra. Thread-safe (the driver's session is)."""

    def __init__(
        self,
        session: Session,
        cluster: Cluster,
        keyspace: str,
        *,
        shards: int = 1,
        buckets: int = 16,
        bucket_ms: int = 60_000,
        lock_ttl_ms: int = 10_000,
    ) -> None:
        self._session = session
        self._cluster = cluster
        self._ks = keyspace
        self._defaults = QueueMeta(shards, buckets, bucket_ms)
        self._lock_ttl_ms = lock_ttl_ms
        self._metas: dict[str, QueueMeta] = {}
        self._owner = secrets.token_hex(8)
        self._offset_ms = 0
        self._catch_up: dict[tuple[str, int, str], float] = {}
        self._deep_done: set[tuple[str, int, str]] = set()
        self._low: dict[tuple[str, int, int], int] = {}  # (queue, shard, bucket) -> due
        self._cursor: dict[str, int] = {}
        self._guard = threading.Lock()
        self._prepared: dict[str, PreparedStatement] = {}
        self._offset_ms = self._measure_offset()

    # -- connecting ----------------------------------------------------------------------

    @classmethod
    def from_url(cls, url: str, clock: Clock | None = None) -> CassandraBackend:
        del clock  # due times follow the coordinator's clock
        parts = urlsplit(url)
        options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        unknown = set(options) - _OPTIONS
        if unknown:
            raise ConfigurationError(
                f"unknown Cassandra URL option(s): {', '.join(sorted(unknown))}"
            )
        keyspace = parts.path.strip("/") or "tickwork"
        if not keyspace.replace("_", "").isalnum():
            raise ConfigurationError(f"invalid keyspace name {keyspace!r}")
        hosts, ports = [], set()
        for item in parts.netloc.rsplit("@", 1)[-1].split(","):
            host, _, port = item.partition(":")
            hosts.append(host or "127.0.0.1")
            ports.add(int(port or 9042))
        if len(ports) > 1:
            raise ConfigurationError("all Cassandra hosts must use the same port")
        try:
            consistency = ConsistencyLevel.name_to_value[
                options.get("consistency", "QUORUM").upper()
            ]
            numbers = {
                k: int(options[k])
                for k in (
                    "replication_factor",
                    "shards",
                    "buckets",
                    "bucket_seconds",
                    "lock_ttl_ms",
                )
                if k in options
            }
        except (KeyError, ValueError) as err:
            raise ConfigurationError(f"invalid Cassandra URL option in {url!r}: {err}") from err
        username = unquote(parts.username or options.get("username", "")) or None
        password = unquote(parts.password or options.get("password", "")) or None
        auth = PlainTextAuthProvider(username, password) if username else None
        tls = ssl.create_default_context() if options.get("ssl") in ("1", "true") else None
        profile = ExecutionProfile(
            load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
            consistency_level=consistency,
            serial_consistency_level=ConsistencyLevel.SERIAL,
            request_timeout=20,
        )
        cluster = Cluster(
            hosts,
            port=ports.pop(),
            auth_provider=auth,
            ssl_context=tls,
            connect_timeout=10,
            protocol_version=5,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        )
        try:
            session = cluster.connect()
        except NoHostAvailable as err:
            cluster.shutdown()
            raise BackendUnavailable(f"cannot reach Cassandra at {parts.netloc}: {err}") from err
        if options.get("create_schema", "true") in ("1", "true"):
            create_schema(session, keyspace, numbers.get("replication_factor", 1))
        return cls(
            session,
            cluster,
            keyspace,
            shards=numbers.get("shards", 1),
            buckets=numbers.get("buckets", 16),
            bucket_ms=numbers.get("bucket_seconds", 60) * 1000,
            lock_ttl_ms=numbers.get("lock_ttl_ms", 10_000),
        )

    def _run(self, statement: Any, params: Any = None, **kwargs: Any) -> Any:
        try:
            return self._session.execute(statement, _unset_nulls(params), **kwargs)
        except NoHostAvailable as err:
            raise BackendUnavailable(f"Cassandra is unreachable: {err}") from err
        except Exception as err:  # the driver's errors share no useful root
            raise BackendError(f"Cassandra error: {err}") from err

    def _prepare(self, cql: str) -> PreparedStatement:
        statement = self._prepared.get(cql)
        if statement is None:
            statement = self._session.prepare(_TABLE.sub(rf"\1 {self._ks}.\2", cql))
            self._prepared[cql] = statement
        return statement

    def _measure_offset(self) -> int:
        row = self._run("SELECT toUnixTimestamp(now()) AS t FROM system.local").one()
        return int(row.t) - int(time.time() * 1000)

    def now_ms(self) -> int:
        return int(time.time() * 1000) + self._offset_ms

    def _now_us(self) -> int:
        return time.time_ns() // 1000 + self._offset_ms * 1000

    def close(self) -> None:
        self._cluster.shutdown()

    # -- layout --------------------------------------------------------------------------

    def meta(self, queue: str) -> QueueMeta:
        """The queue's shards and buckets, fixed at first use (an LWT insert, read back)."""
        found = self._metas.get(queue)
        if found is not None:
            return found
        d = self._defaults
        self._run(
            self._prepare(cql.INSERT_QUEUE_META),
            (queue, d.shards, d.buckets, d.bucket_ms),
        )
        row = self._run(
            self._prepare(cql.SELECT_QUEUE_META),
            (queue,),
        ).one()
        self._run(self._prepare(cql.INSERT_QUEUES), (queue,))
        found = QueueMeta(row.shards, row.buckets, row.bucket_ms)
        self._metas[queue] = found
        return found

    def _shard(self, queue: str, message_id: str, key: str | None) -> int:
        return stable_shard(key if key is not None else _root(message_id), self.meta(queue).shards)

    def _key_shard(self, queue: str, key: str) -> int:
        return stable_shard(key, self.meta(queue).shards)

    def _bucket(self, queue: str, due_ms: int) -> int:
        m = self.meta(queue)
        return (due_ms // m.bucket_ms) % m.buckets

    def _count(self, queue: str, name: str, delta: int) -> None:
        if delta:
            self._run(
                self._prepare(cql.UPDATE_COUNTERS),
                (delta, queue, name),
            )

    # -- writes shared by several operations ---------------------------------------------

    def _insert(
        self,
        batch: BatchStatement,
        e: Envelope,
        ts: int,
        attempt: int = 0,
        error: str | None = None,
    ) -> None:
        """Add the writes that store ``e`` as pending (queue row, index, key)."""
        due = max(e.due_ms, 0)
        shard = self._shard(e.queue, e.id, e.key)
        bucket = self._bucket(e.queue, due)
        _add(
            batch,
            self._prepare(cql.INSERT_QUEUE_MESSAGES),
            (
                e.queue,
                bucket,
                shard,
                due,
                e.id,
                e.priority,
                e.key,
                e.timeout_ms,
                attempt,
                e.body,
                error,
                ts,
            ),
        )
        _add(
            batch,
            self._prepare(cql.INSERT_MESSAGE_INDEX),
            (e.queue, e.id, bucket, shard, due, ts),
        )
        if e.key is not None:
            _add(
                batch,
                self._prepare(cql.INSERT_KEY_INDEX),
                (e.queue, self._key_shard(e.queue, e.key), e.key, e.id, ts),
            )

    def _remove(self, batch: BatchStatement, queue: str, message_id: str, ts: int) -> bool:
        """Add the deletes that remove a message wherever it is; False if it is not stored."""
        where = self._run(
            self._prepare(cql.SELECT_MESSAGE_INDEX_2),
            (queue, message_id),
        ).one()
        if where is None:
            return False
        key = None
        if where.leased:
            lease = self._lease(queue, where.shard, message_id)
            key = lease.key if lease is not None else None
            _add(
                batch,
                self._prepare(cql.DELETE_LEASES),
                (ts, queue, where.shard, message_id),
            )
        else:
            row = self._run(
                self._prepare(cql.SELECT_QUEUE_MESSAGES_5),
                (queue, where.bucket, where.shard, where.due_ms, message_id),
            ).one()
            key = row.key if row is not None else None
            _add(
                batch,
                self._prepare(cql.DELETE_QUEUE_MESSAGES),
                (ts, queue, where.bucket, where.shard, where.due_ms, message_id),
            )
        _add(
            batch,
            self._prepare(cql.DELETE_MESSAGE_INDEX),
            (ts, queue, message_id),
        )
        if key is not None and self._key_holder(queue, key) == message_id:
            _add(
                batch,
                self._prepare(cql.DELETE_KEY_INDEX),
                (ts, queue, self._key_shard(queue, key), key),
            )
        return True

    def _key_holders(self, queue: str, keys: Iterable[str]) -> dict[str, str]:
        """key -> id for those of ``keys`` that are held: concurrent point reads."""
        args = [(queue, self._key_shard(queue, key), key) for key in set(keys)]
        if not args:
            return {}
        try:
            results = execute_concurrent_with_args(
                self._session, self._prepare(cql.SELECT_KEY_INDEX_WITH_KEY), args, concurrency=64
            )
        except NoHostAvailable as err:
            raise BackendUnavailable(f"Cassandra is unreachable: {err}") from err
        found = {}
        for ok, result in results:
            if not ok:
                raise BackendError(f"Cassandra error: {result}")
            for row in result:
                found[str(row.key)] = str(row.id)
        return found

    def _key_holder(self, queue: str, key: str) -> str | None:
        row = self._run(
            self._prepare(cql.SELECT_KEY_INDEX),
            (queue, self._key_shard(queue, key), key),
        ).one()
        return None if row is None else str(row.id)

    def _lease(self, queue: str, shard: int, message_id: str) -> Any:
        return self._run(
            self._prepare(cql.SELECT_LEASES_3),
            (queue, shard, message_id),
        ).one()

    @staticmethod
    def _batch() -> BatchStatement:
        return BatchStatement(batch_type=BatchType.LOGGED)

    # -- producing -----------------------------------------------------------------------

    def enqueue(
        self, envelopes: Sequence[Envelope], on_conflict: OnConflict = OnConflict.ERROR
    ) -> list[Outcome]:
        if not envelopes:
            return []
        holders = self._holders(envelopes)
        present = self._present(envelopes)
        if on_conflict is OnConflict.ERROR:
            taken = [
                e.key
                for e in envelopes
                if e.key is not None
                and holders.get((e.queue, e.key), (e.id, e.body)) != (e.id, e.body)
            ]
            if taken:
                raise KeyConflict(envelopes[0].queue, [k for k in taken if k is not None])
        outcomes: list[Outcome] = []
        batches: list[BatchStatement] = []
        counts: dict[str, int] = {}
        for e in envelopes:
            ts = self._now_us()
            holder = holders.get((e.queue, e.key)) if e.key is not None else None
            batch = self._batch()
            if e.key is not None:
                if holder == (e.id, e.body) and on_conflict is not OnConflict.REPLACE:
                    outcomes.append(Outcome.DUPLICATE)
                    continue
                if holder is not None and on_conflict is OnConflict.IGNORE:
                    outcomes.append(Outcome.IGNORED)
                    continue
                if holder is not None:
                    self._remove(batch, e.queue, holder[0], ts)
                if e.id in present and (holder is None or holder[0] != e.id):
                    self._remove(batch, e.queue, e.id, ts)
                outcomes.append(Outcome.REPLACED if holder is not None else Outcome.ENQUEUED)
                holders[(e.queue, e.key)] = (e.id, e.body)
            else:
                if e.id in present and on_conflict is not OnConflict.REPLACE:
                    outcomes.append(Outcome.DUPLICATE)
                    continue
                if e.id in present:
                    self._remove(batch, e.queue, e.id, ts)
                outcomes.append(Outcome.REPLACED if e.id in present else Outcome.ENQUEUED)
            present.add(e.id)
            self._insert(
                batch, e, ts + 1
            )  # the due time is part of the row's key: identical re-sends land on one row
            batches.append(batch)
            counts[e.queue] = counts.get(e.queue, 0) + 1
        self._execute_many(batches)
        for queue, count in counts.items():
            self._count(queue, "enqueued", count)
        return outcomes

    def _execute_many(self, statements: list[Any]) -> None:
        if not statements:
            return
        try:
            execute_concurrent(
                self._session,
                [(s, None) for s in statements],
                concurrency=32,
                raise_on_first_error=True,
            )
        except NoHostAvailable as err:
            raise BackendUnavailable(f"Cassandra is unreachable: {err}") from err
        except Exception as err:
            raise BackendError(f"Cassandra error: {err}") from err

    def _holders(
        self, envelopes: Sequence[Envelope]
    ) -> dict[tuple[str, str | None], tuple[str, bytes]]:
        """(queue, key) -> (id, body) of the messages holding the keys of ``envelopes``."""
        by_queue: dict[str, set[str]] = {}
        for e in envelopes:
            if e.key is not None:
                by_queue.setdefault(e.queue, set()).add(e.key)
        holders: dict[tuple[str, str | None], tuple[str, bytes]] = {}
        for queue, keys in by_queue.items():
            for key, holder in self._key_holders(queue, keys).items():
                stored = self.get(holder, queue)  # only for keys already taken
                if stored is not None:
                    holders[(queue, key)] = (holder, stored.envelope.body)
        return holders

    def _present(self, envelopes: Sequence[Envelope]) -> set[str]:
        statement = self._prepare(cql.SELECT_MESSAGE_INDEX)
        args = [(e.queue, e.id) for e in envelopes]
        found: set[str] = set()
        try:
            for ok, result in execute_concurrent_with_args(
                self._session, statement, args, concurrency=64
            ):
                if ok:
                    found.update(str(row.id) for row in result)
        except NoHostAvailable as err:
            raise BackendUnavailable(f"Cassandra is unreachable: {err}") from err
        return found

    # -- reading and cancelling ----------------------------------------------------------

    def get(self, message_id: str, queue: str | None = None) -> StoredMessage | None:
        for name in [queue] if queue is not None else self.queues():
            where = self._run(
                self._prepare(cql.SELECT_MESSAGE_INDEX_2),
                (name, message_id),
            ).one()
            if where is None:
                continue
            if where.leased:
                lease = self._lease(name, where.shard, message_id)
                if lease is None:
                    continue
                envelope = Envelope(
                    message_id,
                    name,
                    lease.key,
                    lease.priority,
                    lease.due_ms,
                    lease.timeout_ms,
                    lease.body,
                )
                return StoredMessage(envelope, State.RUNNING, lease.attempt, lease.last_error)
            row = self._run(
                self._prepare(cql.SELECT_QUEUE_MESSAGES_6),
                (name, where.bucket, where.shard, where.due_ms, message_id),
            ).one()
            if row is None:
                continue
            envelope = Envelope(
                message_id, name, row.key, row.priority, row.due_ms, row.timeout_ms, row.body
            )
            state = State.SCHEDULED if row.due_ms > self.now_ms() else State.READY
            return StoredMessage(envelope, state, row.attempt, row.last_error)
        return None

    def get_by_key(self, queue: str, key: str) -> StoredMessage | None:
        holder = self._key_holder(queue, key)
        return None if holder is None else self.get(holder, queue)

    def delete(self, message_id: str, queue: str | None = None) -> bool:
        for name in [queue] if queue is not None else self.queues():
            batch = self._batch()
            if self._remove(batch, name, message_id, self._now_us()):
                self._run(batch)
                return True
        return False

    def delete_by_key(self, queue: str, key: str) -> bool:
        holder = self._key_holder(queue, key)
        if holder is None:
            return False
        batch = self._batch()
        ts = self._now_us()
        found = self._remove(batch, queue, holder, ts)
        _add(
            batch,
            self._prepare(cql.DELETE_KEY_INDEX),
            (ts, queue, self._key_shard(queue, key), key),
        )
        self._run(batch)
        return found

    def keyed(self, queue: str | None = None) -> list[StoredMessage]:
        found = []
        for name in [queue] if queue is not None else self.queues():
            for shard in range(self.meta(name).shards):
                rows = self._run(
                    self._prepare(cql.SELECT_KEY_INDEX_2),
                    (name, shard),
                )
                for row in rows:
                    stored = self.get(row.id, name)
                    if stored is not None:
                        found.append(stored)
        return found

    # -- the shard lock ------------------------------------------------------------------

    def _lock(self, queue: str, shard: int) -> int | None:
        """Take the shard lock (LWT); returns the new fence, or None if another holds it
        (or the lightweight transaction lost a race with another contender)."""
        try:
            return self._try_lock(queue, shard)
        except BackendError as err:
            if isinstance(err.__cause__, WriteTimeout | ReadTimeout):
                return None  # Paxos contention: treat the shard as busy
            raise

    def _try_lock(self, queue: str, shard: int) -> int | None:
        now = self.now_ms()
        row = self._run(
            self._prepare(cql.SELECT_SHARD_LOCKS),
            (queue, shard),
        ).one()
        if row is not None and row.owner is not None and (row.expires_ms or 0) > now:
            return None
        previous = row.fence if row is not None and row.fence is not None else 0
        fence = max(self._now_us(), previous + _FENCE_STEP)
        if row is None:
            result = self._run(
                self._prepare(cql.INSERT_SHARD_LOCKS),
                (queue, shard, self._owner, now + self._lock_ttl_ms, fence),
            )
        else:
            result = self._run(
                self._prepare(cql.UPDATE_SHARD_LOCKS_2),
                (self._owner, now + self._lock_ttl_ms, fence, queue, shard, row.fence),
            )
        return fence if result.was_applied else None

    def _unlock(self, queue: str, shard: int, fence: int) -> None:
        self._run(
            self._prepare(cql.UPDATE_SHARD_LOCKS),
            (queue, shard, fence),
        )

    # -- consuming -----------------------------------------------------------------------

    def _shards_from(self, queue: str) -> list[int]:
        count = self.meta(queue).shards
        with self._guard:
            start = self._cursor.get(queue, secrets.randbelow(count))
            self._cursor[queue] = (start + 1) % count
        return [(start + i) % count for i in range(count)]

    def claim(self, queue: str, limit: int, lookahead_ms: int = 0) -> ClaimBatch:
        batch = self._claim_once(queue, limit, lookahead_ms)
        if batch.claims or batch.next_due_ms is None:
            return batch
        if batch.next_due_ms <= self.now_ms() + lookahead_ms:
            # something older than the recent window is due: read everything, once
            with self._guard:
                for shard in range(self.meta(queue).shards):
                    self._deep_done.discard((queue, shard, "due"))
            return self._claim_once(queue, limit, lookahead_ms)
        return batch

    def _claim_once(self, queue: str, limit: int, lookahead_ms: int) -> ClaimBatch:
        found: list[tuple[int, Claim]] = []  # (priority, claim)
        for shard in self._shards_from(queue):
            if len(found) >= limit:
                break
            fence = self._lock(queue, shard)
            if fence is None:
                continue  # another consumer holds it: skip, as Astyanax does
            try:
                self._expire(queue, shard, fence)
                found += self._claim_shard(queue, shard, fence, limit - len(found), lookahead_ms)
            finally:
                self._unlock(queue, shard, fence)
        if found:
            self._count(queue, "claimed", len(found))
            found.sort(key=lambda pair: (-pair[0], pair[1].due_ms))  # merge the shards' batches
            return ClaimBatch([claim for _, claim in found], None)
        return ClaimBatch([], self._next_due(queue))

    def _range_start(self, queue: str, shard: int, kind: str) -> tuple[int, bool]:
        """Where a read of due times ("due") or lease deadlines ("lease") starts, and
        whether it is a normal read (which may start at the buckets' low watermarks).

        The first read of a shard by this client goes back to the beginning (a backlog
        left while no worker ran); every 10 s a sweep goes back one turn of the bucket
        ring (stragglers enqueued with a past due time); otherwise the read starts at the
        recent window (now - 5 s) or, for due times, at each bucket's low watermark, so
        the tombstones of consumed messages are not read again and again.
        """
        now = self.now_ms()
        with self._guard:
            deep = (queue, shard, kind) not in self._deep_done
            self._deep_done.add((queue, shard, kind))
            sweep = time.monotonic() >= self._catch_up.get((queue, shard, kind), 0.0)
            if deep or sweep:
                self._catch_up[(queue, shard, kind)] = time.monotonic() + _CATCH_UP_EVERY_S
        if deep:
            return -(2**62), False
        if sweep:
            meta = self.meta(queue)
            return now - meta.buckets * meta.bucket_ms, False
        return now - _RECENT_MS, True

    def _claim_shard(
        self, queue: str, shard: int, fence: int, limit: int, lookahead_ms: int
    ) -> list[tuple[int, Claim]]:
        now = self.now_ms()
        rows, truncated = self._read_due(queue, shard, now + lookahead_ms, limit * 4)
        rows.sort(key=lambda r: (-r.priority, r.due_ms, r.id))
        holders: dict[str, str] = {}
        checked: set[str] = set()
        token = str(fence)
        claims: list[tuple[int, Claim]] = []
        batches = []
        batch = self._batch()
        for position, row in enumerate(rows):
            if len(claims) >= limit:
                break
            if row.key is not None and row.key not in checked:
                # check the keys of the next batch of candidates in one concurrent read
                ahead = [r.key for r in rows[position : position + limit] if r.key is not None]
                holders.update(self._key_holders(queue, ahead))
                checked.update(ahead)
            if row.key is not None and holders.get(row.key) != row.id:
                orphan = self._batch()  # its key was cancelled or replaced meanwhile
                _add(
                    orphan,
                    self._prepare(cql.DELETE_QUEUE_MESSAGES),
                    (
                        fence + _CLAIM_DELETE,
                        queue,
                        self._bucket(queue, row.due_ms),
                        shard,
                        row.due_ms,
                        row.id,
                    ),
                )
                batches.append(orphan)
                continue
            deadline = max(now, row.due_ms) + row.timeout_ms
            attempt = (row.attempt or 0) + 1
            _add(
                batch,
                self._prepare(cql.DELETE_QUEUE_MESSAGES),
                (
                    fence + _CLAIM_DELETE,
                    queue,
                    self._bucket(queue, row.due_ms),
                    shard,
                    row.due_ms,
                    row.id,
                ),
            )
            _add(
                batch,
                self._prepare(cql.INSERT_LEASES),
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
                    fence + _CLAIM_WRITE,
                ),
            )
            _add(
                batch,
                self._prepare(cql.INSERT_MESSAGE_INDEX_2),
                (
                    queue,
                    row.id,
                    self._bucket(queue, row.due_ms),
                    shard,
                    row.due_ms,
                    fence + _CLAIM_WRITE,
                ),
            )
            _add(
                batch,
                self._prepare(cql.INSERT_LEASE_DEADLINE),
                (
                    queue,
                    shard,
                    self._bucket(queue, deadline),
                    deadline,
                    row.id,
                    fence + _CLAIM_WRITE,
                ),
            )
            claims.append(
                (
                    row.priority,
                    Claim(
                        row.id,
                        queue,
                        row.key,
                        row.body,
                        token,
                        attempt,
                        row.due_ms,
                        deadline,
                        row.timeout_ms,
                    ),
                )
            )
            if len(claims) % _CHUNK == 0:
                batches.append(batch)
                batch = self._batch()
        if len(batch) > 0:
            batches.append(batch)
        self._execute_many(batches)
        self._advance_watermarks(queue, shard, rows, {c.id for _, c in claims}, truncated, now)
        return claims

    def _read_due(
        self, queue: str, shard: int, end: int, limit: int
    ) -> tuple[list[Any], dict[int, bool]]:
        """Due rows of every bucket of a shard (one concurrent read per bucket), each read
        starting at the bucket's low watermark: below it everything was consumed, so the
        tombstones there are not read again. Returns the rows and, per bucket, whether its
        read hit the limit."""
        meta = self.meta(queue)
        start, normal = self._range_start(queue, shard, "due")
        args = []
        for bucket in range(meta.buckets):
            low = self._low.get((queue, shard, bucket)) if normal else None
            args.append((queue, bucket, shard, low if low is not None else start, end, limit))
        rows: list[Any] = []
        truncated: dict[int, bool] = {}
        try:
            results = execute_concurrent_with_args(
                self._session, self._prepare(cql.SELECT_DUE_IN_BUCKET), args, concurrency=16
            )
        except NoHostAvailable as err:
            raise BackendUnavailable(f"Cassandra is unreachable: {err}") from err
        for (ok, result), arg in zip(results, args, strict=True):
            if not ok:
                raise BackendError(f"Cassandra error: {result}")
            bucket_rows = list(result)
            truncated[arg[1]] = len(bucket_rows) >= limit
            rows += bucket_rows
        return rows, truncated

    def _advance_watermarks(
        self,
        queue: str,
        shard: int,
        rows: list[Any],
        claimed: set[str],
        truncated: dict[int, bool],
        now: int,
    ) -> None:
        """Move each bucket's low watermark up to where unclaimed rows begin (never past
        the recent window, where new messages still arrive)."""
        by_bucket: dict[int, list[Any]] = {}
        for row in rows:
            by_bucket.setdefault(row.bucket, []).append(row)
        ceiling = now - _RECENT_MS
        with self._guard:
            for bucket, is_truncated in truncated.items():
                seen = by_bucket.get(bucket, [])
                left = [r.due_ms for r in seen if r.id not in claimed]
                candidate = ceiling
                if left:
                    candidate = min(left) - 1
                if is_truncated and seen:
                    candidate = min(candidate, max(r.due_ms for r in seen) - 1)
                self._low[(queue, shard, bucket)] = min(candidate, ceiling)

    def _expire(self, queue: str, shard: int, fence: int) -> int:
        """Under the shard lock: leases past their deadline become due again. Reads the
        deadlines of the recent window (all of them when catching up), then the leases they
        point to; a deadline whose lease is gone or was extended is stale and is deleted."""
        now = self.now_ms()
        buckets = list(range(self.meta(queue).buckets))
        start, _ = self._range_start(queue, shard, "lease")
        deadlines = list(
            self._run(
                self._prepare(cql.SELECT_LEASE_DEADLINES), (queue, shard, buckets, start, now)
            )
        )
        if not deadlines:
            return 0
        leases = self._leases_by_id(queue, shard, list({r.id for r in deadlines}))
        batches = []
        expired = 0
        for row in deadlines:
            batch = self._batch()
            _add(
                batch,
                self._prepare(cql.DELETE_LEASE_DEADLINE),
                (
                    fence,
                    queue,
                    shard,
                    self._bucket(queue, row.deadline_ms),
                    row.deadline_ms,
                    row.id,
                ),
            )
            lease = leases.get(row.id)
            if lease is not None and lease.deadline_ms <= now:
                _add(batch, self._prepare(cql.DELETE_LEASES), (fence, queue, shard, row.id))
                envelope = Envelope(
                    row.id,
                    queue,
                    lease.key,
                    lease.priority,
                    max(lease.due_ms, now),
                    lease.timeout_ms,
                    lease.body,
                )
                self._insert(
                    batch, envelope, fence + _EXPIRE_INSERT, lease.attempt, lease.last_error
                )
                expired += 1
                leases.pop(row.id)
            batches.append(batch)
        self._execute_many(batches)
        if expired:
            self._catch_up[(queue, shard, "due")] = 0.0
            self._count(queue, "redelivered", expired)
        return expired

    def _next_due(self, queue: str) -> int | None:
        """The earliest due time or lease deadline from the recent window on."""
        meta = self.meta(queue)
        buckets = list(range(meta.buckets))
        since = self.now_ms() - _RECENT_MS
        candidates = []
        for shard in range(meta.shards):
            rows = self._run(self._prepare(cql.SELECT_NEXT_DUE), (queue, buckets, shard, since))
            candidates += [r.due_ms for r in rows]
            rows = self._run(
                self._prepare(cql.SELECT_NEXT_LEASE_DEADLINE), (queue, shard, buckets, since)
            )
            candidates += [r.deadline_ms for r in rows]
        return min(candidates) if candidates else None

    def _held(self, claim: Claim) -> Any:
        """The lease row if ``claim`` still holds it."""
        shard = self._shard(claim.queue, claim.id, claim.key)
        lease = self._lease(claim.queue, shard, claim.id)
        return lease if lease is not None and lease.lease_token == claim.token else None

    def _drop_lease(self, batch: BatchStatement, claim: Claim, lease: Any) -> int:
        fence = int(claim.token)
        shard = self._shard(claim.queue, claim.id, claim.key)
        _add(
            batch,
            self._prepare(cql.DELETE_LEASES),
            (fence + _ACK_DELETE, claim.queue, shard, claim.id),
        )
        _add(
            batch,
            self._prepare(cql.DELETE_MESSAGE_INDEX),
            (fence + _ACK_DELETE, claim.queue, claim.id),
        )
        _add(
            batch,
            self._prepare(cql.DELETE_LEASE_DEADLINE),
            (
                fence + _ACK_DELETE,
                claim.queue,
                shard,
                self._bucket(claim.queue, lease.deadline_ms),
                lease.deadline_ms,
                claim.id,
            ),
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
            self._insert(batch, nxt, fence + _ACK_INSERT)
        elif claim.key is not None and key_holder == claim.id:
            _add(
                batch,
                self._prepare(cql.DELETE_KEY_INDEX),
                (
                    fence + _ACK_DELETE,
                    claim.queue,
                    self._key_shard(claim.queue, claim.key),
                    claim.key,
                ),
            )

    def ack(self, items: Sequence[tuple[Claim, Envelope | None]]) -> list[bool]:
        """One read of the leases per shard, then logged batches of ``_CHUNK`` acks."""
        leases = self._held_many([claim for claim, _ in items])
        keys: dict[str, list[str]] = {}
        for claim, nxt in items:
            if claim.key is not None and nxt is None:
                keys.setdefault(claim.queue, []).append(claim.key)
        holders = {
            (queue, key): holder
            for queue, names in keys.items()
            for key, holder in self._key_holders(queue, names).items()
        }
        results = []
        batches = []
        batch = self._batch()
        acked: dict[str, int] = {}
        for claim, nxt in items:
            lease = leases.get((claim.queue, claim.id))
            if lease is None or lease.lease_token != claim.token:
                results.append(False)
                continue
            holder = None if claim.key is None else holders.get((claim.queue, claim.key))
            self._finish(batch, claim, lease, nxt, holder)
            results.append(True)
            acked[claim.queue] = acked.get(claim.queue, 0) + 1
            if sum(acked.values()) % _CHUNK == 0:
                batches.append(batch)
                batch = self._batch()
        if len(batch) > 0:
            batches.append(batch)
        self._execute_many(batches)
        for queue, count in acked.items():
            self._count(queue, "acked", count)
        return results

    def _held_many(self, claims: Sequence[Claim]) -> dict[tuple[str, str], Any]:
        """The current lease rows of ``claims``, by (queue, id): one query per shard."""
        groups: dict[tuple[str, int], list[str]] = {}
        for claim in claims:
            shard = self._shard(claim.queue, claim.id, claim.key)
            groups.setdefault((claim.queue, shard), []).append(claim.id)
        found = {}
        for (queue, shard), ids in groups.items():
            for message_id, row in self._leases_by_id(queue, shard, ids).items():
                found[(queue, message_id)] = row
        return found

    def _leases_by_id(self, queue: str, shard: int, ids: list[str]) -> dict[str, Any]:
        rows = self._run(self._prepare(cql.SELECT_LEASES_BY_IDS), (queue, shard, ids))
        return {str(row.id): row for row in rows}

    def retry(self, claim: Claim, due_ms: int, error: str) -> bool:
        lease = self._held(claim)
        if lease is None:
            return False
        batch = self._batch()
        fence = self._drop_lease(batch, claim, lease)
        envelope = Envelope(
            claim.id, claim.queue, claim.key, lease.priority, due_ms, claim.timeout_ms, claim.body
        )
        self._insert(batch, envelope, fence + _ACK_INSERT, lease.attempt, error)
        self._run(batch)
        self._count(claim.queue, "retried", 1)
        return True

    def release(self, claims: Iterable[Claim]) -> int:
        released = 0
        for claim in claims:
            lease = self._held(claim)
            if lease is None:
                continue
            batch = self._batch()
            fence = self._drop_lease(batch, claim, lease)
            envelope = Envelope(
                claim.id,
                claim.queue,
                claim.key,
                lease.priority,
                max(lease.due_ms, self.now_ms()),
                claim.timeout_ms,
                claim.body,
            )
            self._insert(
                batch, envelope, fence + _ACK_INSERT, max(lease.attempt - 1, 0), lease.last_error
            )
            self._run(batch)
            self._catch_up[(claim.queue, self._shard(claim.queue, claim.id, claim.key), "due")] = (
                0.0
            )
            released += 1
        return released

    def extend(self, claims: Sequence[Claim], lease_ms: int) -> list[bool]:
        results = []
        deadline = self.now_ms() + lease_ms
        for claim in claims:
            lease = self._held(claim)
            if lease is None:
                results.append(False)
                continue
            shard = self._shard(claim.queue, claim.id, claim.key)
            batch = self._batch()
            _add(
                batch,
                self._prepare(cql.UPDATE_LEASES),
                (int(claim.token) + _ACK_DELETE, deadline, claim.queue, shard, claim.id),
            )
            _add(
                batch,
                self._prepare(cql.INSERT_LEASE_DEADLINE),
                (
                    claim.queue,
                    shard,
                    self._bucket(claim.queue, deadline),
                    deadline,
                    claim.id,
                    int(claim.token) + _ACK_DELETE,
                ),
            )
            self._run(batch)
            results.append(True)
        return results

    def requeue_expired(self, queue: str) -> int:
        count = 0
        for shard in range(self.meta(queue).shards):
            fence = self._lock(queue, shard)
            if fence is None:
                continue
            try:
                count += self._expire(queue, shard, fence)
            finally:
                self._unlock(queue, shard, fence)
        return count

    # -- the poison queue ----------------------------------------------------------------

    def poison(
        self, claim: Claim, failure: Failure, next_occurrence: Envelope | None = None
    ) -> bool:
        lease = self._held(claim)
        if lease is None:
            return False
        batch = self._batch()
        holder = None if claim.key is None else self._key_holder(claim.queue, claim.key)
        self._finish(batch, claim, lease, next_occurrence, holder)
        _add(
            batch,
            self._prepare(cql.INSERT_POISON),
            (
                claim.queue,
                claim.id,
                claim.key,
                lease.priority,
                claim.timeout_ms,
                claim.attempt,
                self.now_ms(),
                failure.reason,
                failure.error_type,
                failure.message,
                failure.traceback,
                claim.body,
            ),
        )
        self._run(batch)
        self._count(claim.queue, "poisoned", 1)
        return True

    @staticmethod
    def _poison_record(row: Any) -> PoisonRecord:
        envelope = Envelope(
            row.id, row.queue, row.key, row.priority, row.failed_ms, row.timeout_ms, row.body
        )
        return PoisonRecord(
            envelope,
            Failure(row.reason, row.error_type, row.error, row.traceback),
            row.attempts,
            row.failed_ms,
        )

    def poison_list(self, queue: str | None = None, limit: int = 100) -> list[PoisonRecord]:
        records = []
        for name in [queue] if queue is not None else self.queues():
            rows = self._run(self._prepare(cql.SELECT_POISON), (name,))
            records += [self._poison_record(r) for r in rows]
        records.sort(key=lambda r: (r.failed_at_ms, r.envelope.id))
        return records[:limit]

    def poison_get(self, message_id: str) -> PoisonRecord | None:
        for name in self.queues():
            row = self._run(self._prepare(cql.SELECT_POISON_2), (name, message_id)).one()
            if row is not None:
                return self._poison_record(row)
        return None

    def poison_replay(self, ids: Sequence[str] | None = None, queue: str | None = None) -> int:
        records = self.poison_list(queue, limit=10**9)
        if ids is not None:
            wanted = set(ids)
            records = [r for r in records if r.envelope.id in wanted]
        moved = 0
        now = self.now_ms()
        for record in records:
            e = record.envelope
            if self.get(e.id, e.queue) is not None or (
                e.key is not None and self._key_holder(e.queue, e.key) is not None
            ):
                continue
            batch = self._batch()
            self._insert(batch, e._replace(due_ms=now), self._now_us())
            _add(
                batch,
                self._prepare(cql.DELETE_POISON),
                (e.queue, e.id),
            )
            self._run(batch)
            moved += 1
        return moved

    def poison_purge(self, queue: str | None = None) -> int:
        purged = 0
        for name in [queue] if queue is not None else self.queues():
            purged += len(self.poison_list(name, limit=10**9))
            self._run(self._prepare(cql.DELETE_POISON_2), (name,))
        return purged

    # -- operations ----------------------------------------------------------------------

    def queues(self) -> list[str]:
        rows = self._run(self._prepare(cql.SELECT_QUEUES))
        return sorted(str(r.queue) for r in rows)

    def stats(self, queue: str | None = None) -> list[QueueStats]:
        result = []
        now = self.now_ms()
        for name in [queue] if queue is not None else self.queues():
            meta = self.meta(name)
            ready = scheduled = in_flight = 0
            next_due: int | None = None
            per_shard: dict[int, int] = {}
            for shard in range(meta.shards):
                rows = self._run(
                    self._prepare(cql.SELECT_QUEUE_MESSAGES_3),
                    (name, list(range(meta.buckets)), shard),
                )
                dues = [r.due_ms for r in rows]
                leases = list(
                    self._run(
                        self._prepare(cql.SELECT_LEASES_4),
                        (name, shard),
                    )
                )
                ready += sum(d <= now for d in dues)
                scheduled += sum(d > now for d in dues)
                in_flight += len(leases)
                per_shard[shard] = len(dues) + len(leases)
                if dues:
                    next_due = min(dues) if next_due is None else min(next_due, min(dues))
            poison = len(list(self._run(self._prepare(cql.SELECT_POISON_3), (name,))))
            counters = {
                str(r.name): int(r.value)
                for r in self._run(self._prepare(cql.SELECT_COUNTERS), (name,))
            }
            result.append(
                QueueStats(name, ready, scheduled, in_flight, poison, next_due, counters, per_shard)
            )
        return result

    def add_counters(self, queue: str, deltas: dict[str, int]) -> None:
        for name, delta in deltas.items():
            self._count(queue, name, delta)

    def purge(self, queue: str) -> int:
        meta = self.meta(queue)
        removed = 0
        ts = self._now_us()
        for shard in range(meta.shards):
            rows = list(
                self._run(
                    self._prepare(cql.SELECT_QUEUE_MESSAGES_4),
                    (queue, list(range(meta.buckets)), shard),
                )
            )
            rows += list(
                self._run(
                    self._prepare(cql.SELECT_LEASES_4),
                    (queue, shard),
                )
            )
            removed += len(rows)
            for row in rows:
                self._run(
                    self._prepare(cql.DELETE_MESSAGE_INDEX),
                    (ts, queue, row.id),
                )
            for bucket in range(meta.buckets):
                self._run(
                    self._prepare(cql.DELETE_QUEUE_MESSAGES_2),
                    (ts, queue, bucket, shard),
                )
            self._run(
                self._prepare(cql.DELETE_LEASES_2),
                (ts, queue, shard),
            )
            self._run(
                self._prepare(cql.DELETE_KEY_INDEX_2),
                (ts, queue, shard),
            )
        return removed


def _add(batch: BatchStatement, statement: PreparedStatement, params: Any) -> None:
    batch.add(statement, _unset_nulls(params))


def _unset_nulls(params: Any) -> Any:
    """None in a bound INSERT writes a tombstone cell; leave the column unset instead."""
    if isinstance(params, tuple | list):
        return tuple(UNSET_VALUE if value is None else value for value in params)
    return params


def create_schema(session: Session, keyspace: str, replication_factor: int = 1) -> None:
    """Create the keyspace and tables (``tickwork cassandra create-schema``; idempotent)."""
    try:
        session.execute(KEYSPACE.replace("{ks}", keyspace).replace("{rf}", str(replication_factor)))
        for ddl in TABLES.values():
            session.execute(ddl.replace("{ks}", keyspace))
    except NoHostAvailable as err:
        raise BackendUnavailable(f"Cassandra is unreachable: {err}") from err
    except Exception as err:
        raise BackendError(f"cannot create the Cassandra schema: {err}") from err
