"""Cassandra storage: Netflix Astyanax's sharded message queue in CQL (schema and the
reasons for it in ``cassandra_schema.py``).

URL: ``cassandra://host1,host2:9042/keyspace?consistency=QUORUM&replication_factor=3&
shards=1&buckets=16&bucket_seconds=60&lock_ttl_ms=10000&username=u&password=p&ssl=true``

The consume cycle, per shard: take the shard lock with a lightweight transaction (which
also hands out a new fence and the shard's read positions) -> make expired leases due
again -> read up to 4x the batch of due messages after the read position -> logged
batches that delete them from the queue and write their leases, every write ``USING
TIMESTAMP`` the fence -> release the lock, storing the advanced read positions. Ack reads
its lease and, if the token (the fence) still matches, deletes it and writes the next
occurrence in one batch, with timestamps just above the fence, so a stale consumer can
neither overwrite a newer lease nor resurrect an occurrence that already ran.

Tombstones: a consumed message leaves a tombstone until compaction after
``gc_grace_seconds``. Reads never start at the beginning of a partition: the shard's
**read position** ``(ready_ms, id)`` moves past every consumed row (never past one that was
left, nor closer than ``_READ_MARGIN_MS`` to now, where rows still arrive), so a claim
reads only live rows plus the few consumed in the last moment. Rows are clustered by their
**ready time**, the due time or, for a message written more than ``_CLAMP_MS`` after it
was due, the time it was written, so no row lands behind the read position; a **sweep
position** trails ``_SWEEP_LAG_MS`` behind and picks up any row that still did (a write
delayed by seconds). Lease deadlines get the same treatment (``expired_ms``).

Times: due times compare against the coordinator's clock (the offset is measured at
connect). Cassandra orders writes by timestamp, so producer and worker clocks must be in
sync (NTP), as for any Cassandra application.
"""

from __future__ import annotations

import re
import secrets
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
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
from scheduler.errors import (
    BackendError,
    BackendUnavailable,
    ConfigurationError,
    InvalidMessage,
    KeyConflict,
)
from scheduler.ids import stable_shard

Position = tuple[int, str]  # (ready_ms, id) in a shard's pending rows

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
_BATCH_BYTES = 8_000  # messages per logged batch up to about this size (Cassandra fails
# batches over 50 KiB by default and warns over 5 KiB: raise that warning for this workload)
_ROW_BYTES = 200  # what a message adds to a batch besides its body
MAX_BODY_BYTES = 32_768  # with a batch's other rows, stays under the 50 KiB batch limit
_FENCE_STEP = 1000  # microseconds between two holders' fences
# Write timestamps relative to a claim's fence, in the order the writes must win:
_EXPIRE_INSERT = 1  # an expired lease's message is pending again (its lease deleted at +0)
_CLAIM_DELETE = 2  # the claim removes the pending row ...
_CLAIM_WRITE = 3  # ... and writes the lease
_ACK_DELETE = 4  # ack / retry / release / poison drop the lease (extend also writes here)
_ACK_INSERT = 5  # and write the next occurrence (or the retried message)
_READ_MARGIN_MS = 250  # the read position stays this far behind now
_CLAMP_MS = 100  # a message written this long after its due time is stored as ready now
_SWEEP_LAG_MS = 5_000  # the sweep for rows that landed behind the read position trails so far
_SLICE_MS = 100  # sweep and expiry reads cover this much time each ...
_MAX_SLICES = 600  # ... and at most this many per claim: after a pause they catch up
_BUSY_RETRY_MS = 50  # a shard locked by another consumer is worth a look this soon
_AGED_MS = 10_000  # a row due this long is claimed even if higher priorities wait
_END_ID = "\U0010ffff"  # sorts after every id: (ms, _END_ID) is "all of that millisecond"
_ORIGIN: Position = (-(2**62), "")
_TABLE = re.compile(r"\b(FROM|INTO|UPDATE)\s+(" + "|".join(TABLES) + r")\b")


@dataclass(frozen=True)
class ShardState:
    """A held shard lock, and the shard's positions as its last holder left them."""

    fence: int
    read: Position  # every pending row at or before it was consumed ...
    swept: Position  # ... even rows that landed late, up to here
    expired_ms: int  # lease deadlines at or before it were handled
    lease_ms: int  # the longest lease a claim of the shard wrote (deadlines lie within)


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
        self._positions: dict[tuple[str, int], Position] = {}  # last read position seen
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
            # without it small requests wait for delayed ACKs: ~40 ms per claim batch
            sockopts=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
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
            self._prepare(cql.INSERT_META),
            (queue, d.shards, d.buckets, d.bucket_ms),
        )
        row = self._run(
            self._prepare(cql.SELECT_META),
            (queue,),
        ).one()
        self._run(self._prepare(cql.REGISTER_QUEUE), (queue,))
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
                self._prepare(cql.ADD_COUNTER),
                (delta, queue, name),
            )

    # -- writes shared by several operations ---------------------------------------------

    def _ready_ms(self, due_ms: int) -> int:
        """Where a message due at ``due_ms`` is stored: its due time, or now if it is
        written late, so that it never lands behind a consumer's read position."""
        now = self.now_ms()
        return due_ms if due_ms >= now - _CLAMP_MS else now

    def _insert(
        self,
        batch: BatchStatement,
        e: Envelope,
        ts: int,
        attempt: int = 0,
        error: str | None = None,
    ) -> None:
        """Add the writes that store ``e`` as pending (queue row, index, key)."""
        ready = self._ready_ms(e.due_ms)
        shard = self._shard(e.queue, e.id, e.key)
        bucket = self._bucket(e.queue, ready)
        _add(
            batch,
            self._prepare(cql.INSERT_PENDING),
            (
                e.queue,
                bucket,
                shard,
                ready,
                e.id,
                e.due_ms,
                e.priority,
                e.key,
                e.timeout_ms,
                attempt,
                e.body,
                error,
                ts,
            ),
        )
        _add(batch, self._prepare(cql.INSERT_INDEX), (e.queue, e.id, bucket, shard, ready, ts))
        if e.key is not None:
            _add(
                batch,
                self._prepare(cql.INSERT_KEY),
                (e.queue, self._key_shard(e.queue, e.key), e.key, e.id, ts),
            )

    def _remove(self, batch: BatchStatement, queue: str, message_id: str, ts: int) -> bool:
        """Add the deletes that remove a message wherever it is; False if it is not stored."""
        where = self._run(self._prepare(cql.SELECT_INDEX), (queue, message_id)).one()
        if where is None:
            return False
        key = None
        if where.leased:
            lease = self._lease(queue, where.shard, message_id)
            key = lease.key if lease is not None else None
            _add(batch, self._prepare(cql.DELETE_LEASE), (ts, queue, where.shard, message_id))
        else:
            place = (queue, where.bucket, where.shard, where.ready_ms, message_id)
            row = self._run(self._prepare(cql.SELECT_PENDING), place).one()
            key = row.key if row is not None else None
            _add(batch, self._prepare(cql.DELETE_PENDING), (ts, *place))
        _add(batch, self._prepare(cql.DELETE_INDEX), (ts, queue, message_id))
        if key is not None and self._key_holder(queue, key) == message_id:
            _add(
                batch,
                self._prepare(cql.DELETE_KEY),
                (ts, queue, self._key_shard(queue, key), key),
            )
        return True

    def _concurrently(self, statement: PreparedStatement, args: list[Any]) -> list[Any]:
        """Run ``statement`` once per parameter tuple, concurrently; the results in order."""
        if not args:
            return []
        try:
            results = execute_concurrent_with_args(
                self._session, statement, [_unset_nulls(a) for a in args], concurrency=64
            )
        except NoHostAvailable as err:
            raise BackendUnavailable(f"Cassandra is unreachable: {err}") from err
        found = []
        for ok, result in results:
            if not ok:
                raise BackendError(f"Cassandra error: {result}")
            found.append(result)
        return found

    def _key_holders(self, queue: str, keys: Iterable[str]) -> dict[str, str]:
        """key -> id for those of ``keys`` that are held: one ``IN`` read per shard and 100."""
        by_shard: dict[int, list[str]] = {}
        for key in set(keys):
            by_shard.setdefault(self._key_shard(queue, key), []).append(key)
        args = [
            (queue, shard, names[i : i + 100])
            for shard, names in by_shard.items()
            for i in range(0, len(names), 100)
        ]
        results = self._concurrently(self._prepare(cql.SELECT_KEYS), args)
        return {str(row.key): str(row.id) for result in results for row in result}

    def _key_holder(self, queue: str, key: str) -> str | None:
        return self._key_holders(queue, [key]).get(key)

    def _lease(self, queue: str, shard: int, message_id: str) -> Any:
        return self._run(self._prepare(cql.SELECT_LEASE), (queue, shard, message_id)).one()

    @staticmethod
    def _batch() -> BatchStatement:
        return BatchStatement(batch_type=BatchType.LOGGED)

    # -- producing -----------------------------------------------------------------------

    def enqueue(
        self, envelopes: Sequence[Envelope], on_conflict: OnConflict = OnConflict.ERROR
    ) -> list[Outcome]:
        """Logged batches of several messages each (a batch is atomic, so a message's row
        and its index entries are written together)."""
        if not envelopes:
            return []
        too_large = [e.id for e in envelopes if len(e.body) > MAX_BODY_BYTES]
        if too_large:
            raise InvalidMessage(
                f"message {too_large[0]!r} is larger than the Cassandra backend stores "
                f"({MAX_BODY_BYTES} bytes: a logged batch fails above 50 KiB)"
                + (f"; {len(too_large) - 1} more" if len(too_large) > 1 else "")
            )
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
        batches = _Batches()
        counts: dict[str, int] = {}
        for e in envelopes:
            batch = batches.current
            ts = self._now_us()
            holder = holders.get((e.queue, e.key)) if e.key is not None else None
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
            self._insert(batch, e, ts + 1)
            counts[e.queue] = counts.get(e.queue, 0) + 1
            batches.added(len(e.body))
        self._execute_many(batches.all())
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
            held = self._key_holders(queue, keys)
            bodies = self._bodies(queue, list(set(held.values())))
            for key, holder in held.items():
                if holder in bodies:
                    holders[(queue, key)] = (holder, bodies[holder])
        return holders

    def _bodies(self, queue: str, ids: list[str]) -> dict[str, bytes]:
        """id -> body of those of ``ids`` that are stored: one index read per 100 ids, then
        concurrent reads of the pending rows and one lease read per shard."""
        where = self._indexed(queue, ids)
        pending = [w for w in where.values() if not w.leased]
        places = [(queue, w.bucket, w.shard, w.ready_ms, str(w.id)) for w in pending]
        rows = self._concurrently(self._prepare(cql.SELECT_PENDING), places)
        bodies = {str(row.id): row.body for result in rows for row in result}
        by_shard: dict[int, list[str]] = {}
        for w in where.values():
            if w.leased:
                by_shard.setdefault(w.shard, []).append(str(w.id))
        for shard, leased in by_shard.items():
            for message_id, lease in self._leases_by_id(queue, shard, leased).items():
                bodies[message_id] = lease.body
        return bodies

    def _present(self, envelopes: Sequence[Envelope]) -> set[str]:
        by_queue: dict[str, list[str]] = {}
        for e in envelopes:
            by_queue.setdefault(e.queue, []).append(e.id)
        return {
            message_id
            for queue, ids in by_queue.items()
            for message_id in self._indexed(queue, ids)
        }

    def _indexed(self, queue: str, ids: list[str]) -> dict[str, Any]:
        """The index rows of those of ``ids`` that are stored: one ``IN`` read per 100."""
        chunks = [(queue, ids[i : i + 100]) for i in range(0, len(ids), 100)]
        results = self._concurrently(self._prepare(cql.SELECT_INDEX_BY_IDS), chunks)
        return {str(row.id): row for result in results for row in result}

    # -- reading and cancelling ----------------------------------------------------------

    def get(self, message_id: str, queue: str | None = None) -> StoredMessage | None:
        for name in [queue] if queue is not None else self.queues():
            where = self._run(self._prepare(cql.SELECT_INDEX), (name, message_id)).one()
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
                self._prepare(cql.SELECT_PENDING),
                (name, where.bucket, where.shard, where.ready_ms, message_id),
            ).one()
            if row is None:
                continue
            envelope = Envelope(
                message_id, name, row.key, row.priority, row.due_ms, row.timeout_ms, row.body
            )
            state = State.SCHEDULED if row.ready_ms > self.now_ms() else State.READY
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
            self._prepare(cql.DELETE_KEY),
            (ts, queue, self._key_shard(queue, key), key),
        )
        self._run(batch)
        return found

    def keyed(self, queue: str | None = None) -> list[StoredMessage]:
        found = []
        for name in [queue] if queue is not None else self.queues():
            for shard in range(self.meta(name).shards):
                for row in self._run(self._prepare(cql.SELECT_SHARD_KEYS), (name, shard)):
                    stored = self.get(row.id, name)
                    if stored is not None:
                        found.append(stored)
        return found

    # -- the shard lock and the shard's positions ----------------------------------------

    def _lock(self, queue: str, shard: int) -> ShardState | None:
        """Take the shard lock (LWT); returns the new fence with the shard's positions, or
        None if another holds it (or the lightweight transaction lost a race)."""
        try:
            return self._try_lock(queue, shard)
        except BackendError as err:
            if isinstance(err.__cause__, WriteTimeout | ReadTimeout):
                return None  # Paxos contention: treat the shard as busy
            raise

    def _lock_row(self, queue: str, shard: int) -> Any:
        return self._run(self._prepare(cql.SELECT_LOCK), (queue, shard)).one()

    def _try_lock(self, queue: str, shard: int) -> ShardState | None:
        now = self.now_ms()
        row = self._lock_row(queue, shard)
        known = _stored_state(row)
        with self._guard:
            self._positions[(queue, shard)] = known.read  # fresh even if another holds it
        if row is not None and row.owner is not None and (row.expires_ms or 0) > now:
            return None
        previous = row.fence if row is not None and row.fence is not None else 0
        fence = max(self._now_us(), previous + _FENCE_STEP)
        if row is None:  # a new shard: no lease of it can end before now
            known = replace(known, expired_ms=now)
            statement = self._prepare(cql.INSERT_LOCK)
            params: tuple[Any, ...] = (
                queue,
                shard,
                self._owner,
                now + self._lock_ttl_ms,
                fence,
                now,
            )
        else:
            statement = self._prepare(cql.TAKE_LOCK)
            params = (self._owner, now + self._lock_ttl_ms, fence, queue, shard, row.fence)
        try:
            taken = bool(self._run(statement, params).was_applied)
        except BackendError as err:
            if not isinstance(err.__cause__, WriteTimeout):
                raise
            # a timed-out lightweight transaction may still have been applied: a serial
            # read settles it, so a lock we did take does not block the shard for its TTL
            taken = self._holds(queue, shard, fence)
        return replace(known, fence=fence) if taken else None

    def _holds(self, queue: str, shard: int, fence: int) -> bool:
        """Whether this client holds the shard lock with ``fence`` (a serial read)."""
        bound = self._prepare(cql.SELECT_LOCK).bind((queue, shard))
        bound.consistency_level = ConsistencyLevel.SERIAL
        try:
            row = self._run(bound).one()
        except BackendError as err:
            if isinstance(err.__cause__, WriteTimeout | ReadTimeout):
                return False  # still unsettled: the lock expires after its TTL
            raise
        return row is not None and row.owner == self._owner and row.fence == fence

    def _unlock(self, queue: str, shard: int, state: ShardState) -> None:
        """Release the lock and store the positions (only if the lock is still ours)."""
        self._run(
            self._prepare(cql.RELEASE_LOCK),
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
        with self._guard:
            self._positions[(queue, shard)] = state.read

    # -- consuming -----------------------------------------------------------------------

    def _shards_from(self, queue: str) -> list[int]:
        count = self.meta(queue).shards
        with self._guard:
            start = self._cursor.get(queue, secrets.randbelow(count))
            self._cursor[queue] = (start + 1) % count
        return [(start + i) % count for i in range(count)]

    def claim(self, queue: str, limit: int, lookahead_ms: int = 0) -> ClaimBatch:
        found: list[tuple[int, Claim]] = []  # (priority, claim)
        held: list[int] = []
        busy = False
        for shard in self._shards_from(queue):
            if len(found) >= limit:
                break
            state = self._lock(queue, shard)
            if state is None:
                busy = True  # another consumer holds it: skip, as Astyanax does
                continue
            held.append(shard)
            after = state
            try:
                _, after = self._expire(queue, shard, after)
                claims, after = self._claim_shard(
                    queue, shard, after, limit - len(found), lookahead_ms
                )
                found += claims
            finally:
                self._unlock(queue, shard, after)
        if found:
            self._count(queue, "claimed", len(found))
            found.sort(key=lambda pair: (-pair[0], pair[1].due_ms))  # merge the shards' batches
            return ClaimBatch([claim for _, claim in found], None)
        next_due = self._next_due(queue, held)
        if busy:  # another consumer is claiming there: look again soon
            soon = self.now_ms() + _BUSY_RETRY_MS
            next_due = soon if next_due is None else min(next_due, soon)
        return ClaimBatch([], next_due)

    def _buckets_between(self, queue: str, first_ms: int, last_ms: int) -> list[int]:
        """The buckets that hold times ``first_ms`` to ``last_ms``, oldest first."""
        meta = self.meta(queue)
        first, last = first_ms // meta.bucket_ms, last_ms // meta.bucket_ms
        if last - first + 1 >= meta.buckets:
            return list(range(meta.buckets))
        return [slot % meta.buckets for slot in range(first, last + 1)]

    def _read_between(
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
                (lo, max(after, (lo - 1, _END_ID)), min(upto, (hi, _END_ID)))
                for lo, hi in _slices(after[0], upto[0])
            ]
            upto = min(upto, ranges[-1][2]) if ranges else after
        else:
            ranges = [
                (b * self.meta(queue).bucket_ms, after, upto)
                for b in self._buckets_between(queue, after[0], upto[0])
            ]
        args = [
            (queue, self._bucket(queue, at), shard, *lower, *upper, limit)
            for at, lower, upper in ranges
        ]
        seen = upto
        rows: list[Any] = []
        for result in self._concurrently(self._prepare(cql.SELECT_PENDING_BETWEEN), args):
            found = list(result)
            if len(found) >= limit:
                seen = min(seen, (found[-1].ready_ms, found[-1].id))
            rows += found
        rows = [r for r in rows if (r.ready_ms, r.id) <= seen]
        rows.sort(key=lambda r: (r.ready_ms, r.id))
        return rows, seen

    def _claim_shard(
        self, queue: str, shard: int, state: ShardState, limit: int, lookahead_ms: int
    ) -> tuple[list[tuple[int, Claim]], ShardState]:
        """Claim up to ``limit`` due messages of a locked shard: the rows after the read
        position plus any row the sweep finds behind it; returns the claims and the
        shard's advanced positions."""
        now = self.now_ms()
        window = limit * 4
        # a late row was written at most _SWEEP_LAG_MS after its ready time, so the sweep
        # looks at ready times between 2x and 1x that lag ago that the read position passed
        sweep_from = max(state.swept, (now - 2 * _SWEEP_LAG_MS, ""))
        sweep_to = min(state.read, (now - _SWEEP_LAG_MS, _END_ID))
        late: list[Any] = []
        late_seen = sweep_from
        if sweep_from < sweep_to:
            late, late_seen = self._read_between(
                queue, shard, sweep_from, sweep_to, window, sliced=True
            )
        rows, seen = self._read_between(
            queue, shard, state.read, (now + lookahead_ms, _END_ID), window
        )
        candidates = sorted(late + rows, key=lambda r: (-r.priority, r.ready_ms, r.id))[:limit]
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
        orphans = self._orphans(queue, candidates)
        leased_at = self.now_ms()  # after the reads: leases count from about when they start
        claims: list[tuple[int, Claim]] = []
        batches = _Batches()
        for row in candidates:
            if row.id in orphans:  # cancelled, replaced or written twice meanwhile
                place = (queue, row.bucket, shard, row.ready_ms, row.id)
                delete = self._prepare(cql.DELETE_PENDING)
                _add(batches.current, delete, (_claim_delete_ts(state.fence, row), *place))
            else:
                claim = self._lease_writes(
                    batches.current, queue, state.fence, shard, row, leased_at
                )
                claims.append((row.priority, claim))
            batches.added(len(row.body))
        self._execute_many(batches.all())
        consumed = {row.id for row in candidates}
        read = _advance(state.read, rows, consumed, seen, (now - _READ_MARGIN_MS, _END_ID))
        swept = _advance(sweep_from, late, consumed, late_seen, sweep_to)
        longest = max((c.timeout_ms for _, c in claims), default=0)
        lease_ms = max(state.lease_ms, longest)
        return claims, replace(state, read=read, swept=swept, lease_ms=lease_ms)

    def _orphans(self, queue: str, rows: list[Any]) -> set[str]:
        """Ids of ``rows`` that must not run: their key now belongs to another message, or
        (for rows stored as ready later than due, which a concurrent identical re-send can
        write twice) the index points elsewhere."""
        keys = [r.key for r in rows if r.key is not None]
        holders = self._key_holders(queue, keys) if keys else {}
        orphans = {r.id for r in rows if r.key is not None and holders.get(r.key) != r.id}
        moved = [r for r in rows if r.ready_ms != r.due_ms and r.id not in orphans]
        where = self._indexed(queue, [r.id for r in moved])
        for row in moved:
            found = where.get(row.id)
            if found is None or found.leased or found.ready_ms != row.ready_ms:
                orphans.add(row.id)
        return orphans

    def _lease_writes(
        self, batch: BatchStatement, queue: str, fence: int, shard: int, row: Any, now: int
    ) -> Claim:
        """Add the writes that move a pending row to a lease; returns the claim."""
        deadline = max(now, row.ready_ms) + row.timeout_ms
        attempt = (row.attempt or 0) + 1
        token = str(fence)
        _add(
            batch,
            self._prepare(cql.DELETE_PENDING),
            (_claim_delete_ts(fence, row), queue, row.bucket, shard, row.ready_ms, row.id),
        )
        _add(
            batch,
            self._prepare(cql.INSERT_LEASE),
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
            self._prepare(cql.INSERT_INDEX_LEASED),
            (queue, row.id, row.bucket, shard, row.ready_ms, fence + _CLAIM_WRITE),
        )
        _add(
            batch,
            self._prepare(cql.INSERT_DEADLINE),
            (queue, shard, self._bucket(queue, deadline), deadline, row.id, fence + _CLAIM_WRITE),
        )
        return Claim(
            row.id, queue, row.key, row.body, token, attempt, row.due_ms, deadline, row.timeout_ms
        )

    def _expire(self, queue: str, shard: int, state: ShardState) -> tuple[int, ShardState]:
        """Under the shard lock: leases past their deadline become due again. Reads the
        deadlines after the shard's expiry position, then the leases they point to; a
        deadline whose lease is gone or was extended is stale and is deleted."""
        now = self.now_ms()
        after = state.expired_ms
        if now <= after:  # the last holder's clock was ahead of ours
            return 0, state
        # one read per slice of time: after a pause, the deadlines of every lease acked
        # meanwhile lie in between, as tombstones, and one read must not scan them all
        slices = _slices(after + 1, now)
        args = [(queue, shard, self._bucket(queue, lo), lo - 1, hi) for lo, hi in slices]
        results = self._concurrently(self._prepare(cql.SELECT_DEADLINES_IN_BUCKET), args)
        deadlines = [row for result in results for row in result]
        # deadlines are written far ahead of now (a lease lasts the task's timeout), so
        # none can land at or before now after this read
        moved = replace(state, expired_ms=slices[-1][1])
        if not deadlines:
            return 0, moved
        leases = self._leases_by_id(queue, shard, list({r.id for r in deadlines}))
        batches = []
        expired = 0
        fence = state.fence
        for row in deadlines:
            batch = self._batch()
            _add(
                batch,
                self._prepare(cql.DELETE_DEADLINE),
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
                _add(batch, self._prepare(cql.DELETE_LEASE), (fence, queue, shard, row.id))
                envelope = Envelope(
                    row.id,
                    queue,
                    lease.key,
                    lease.priority,
                    lease.due_ms,
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
            self._count(queue, "redelivered", expired)
        return expired, moved

    def _next_due(self, queue: str, shards: list[int]) -> int | None:
        """The earliest ready time after the read positions of ``shards`` (just claimed
        from, so their positions are fresh). Lease deadlines are not included: an expired
        lease is found by the next claim (workers poll at least every ``poll_interval_s``)."""
        buckets = list(range(self.meta(queue).buckets))
        candidates = []
        for shard in shards:
            with self._guard:
                after = self._positions.get((queue, shard), _ORIGIN)
            rows = self._run(
                self._prepare(cql.SELECT_FIRST_PENDING_AFTER), (queue, buckets, shard, *after)
            )
            candidates += [r.ready_ms for r in rows]
        return min(candidates) if candidates else None

    def _held(self, claim: Claim) -> Any:
        """The lease row if ``claim`` still holds it."""
        shard = self._shard(claim.queue, claim.id, claim.key)
        lease = self._lease(claim.queue, shard, claim.id)
        return lease if lease is not None and lease.lease_token == claim.token else None

    def _drop_lease(self, batch: BatchStatement, claim: Claim, lease: Any) -> int:
        fence = int(claim.token)
        ts = fence + _ACK_DELETE
        shard = self._shard(claim.queue, claim.id, claim.key)
        deadline_bucket = self._bucket(claim.queue, lease.deadline_ms)
        _add(batch, self._prepare(cql.DELETE_LEASE), (ts, claim.queue, shard, claim.id))
        _add(batch, self._prepare(cql.DELETE_INDEX), (ts, claim.queue, claim.id))
        _add(
            batch,
            self._prepare(cql.DELETE_DEADLINE),
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
            self._insert(batch, nxt, fence + _ACK_INSERT)
        elif claim.key is not None and key_holder == claim.id:
            key_shard = self._key_shard(claim.queue, claim.key)
            _add(
                batch,
                self._prepare(cql.DELETE_KEY),
                (fence + _ACK_DELETE, claim.queue, key_shard, claim.key),
            )

    def ack(self, items: Sequence[tuple[Claim, Envelope | None]]) -> list[bool]:
        """One read of the leases per shard, then logged batches of several acks."""
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
        batches = _Batches()
        acked: dict[str, int] = {}
        for claim, nxt in items:
            lease = leases.get((claim.queue, claim.id))
            if lease is None or lease.lease_token != claim.token:
                results.append(False)
                continue
            holder = None if claim.key is None else holders.get((claim.queue, claim.key))
            self._finish(batches.current, claim, lease, nxt, holder)
            results.append(True)
            acked[claim.queue] = acked.get(claim.queue, 0) + 1
            batches.added(0 if nxt is None else len(nxt.body))
        self._execute_many(batches.all())
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
        """One read of the leases per shard, then logged batches of several releases."""
        claims = list(claims)
        leases = self._held_many(claims)
        batches = _Batches()
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
                lease.due_ms,
                claim.timeout_ms,
                claim.body,
            )
            attempt = max(lease.attempt - 1, 0)
            self._insert(batch, envelope, fence + _ACK_INSERT, attempt, lease.last_error)
            batches.added(len(claim.body))
            released += 1
        self._execute_many(batches.all())
        return released

    def extend(self, claims: Sequence[Claim], lease_ms: int) -> list[bool]:
        """One read of the leases per shard, then logged batches of several extensions."""
        leases = self._held_many(claims)
        deadline = self.now_ms() + lease_ms
        batches = _Batches()
        results = []
        for claim in claims:
            lease = leases.get((claim.queue, claim.id))
            if lease is None or lease.lease_token != claim.token:
                results.append(False)
                continue
            shard = self._shard(claim.queue, claim.id, claim.key)
            ts = int(claim.token) + _ACK_DELETE
            bucket = self._bucket(claim.queue, deadline)
            batch = batches.current
            _add(
                batch, self._prepare(cql.EXTEND_LEASE), (ts, deadline, claim.queue, shard, claim.id)
            )
            _add(
                batch,
                self._prepare(cql.INSERT_DEADLINE),
                (claim.queue, shard, bucket, deadline, claim.id, ts),
            )
            batches.added(0)
            results.append(True)
        self._execute_many(batches.all())
        return results

    def requeue_expired(self, queue: str) -> int:
        count = 0
        for shard in range(self.meta(queue).shards):
            state = self._lock(queue, shard)
            if state is None:
                continue
            after = state
            try:
                expired, after = self._expire(queue, shard, state)
                count += expired
            finally:
                self._unlock(queue, shard, after)
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
            row = self._run(self._prepare(cql.SELECT_POISON_ONE), (name, message_id)).one()
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
            self._run(self._prepare(cql.DELETE_QUEUE_POISON), (name,))
        return purged

    # -- operations ----------------------------------------------------------------------

    def queues(self) -> list[str]:
        rows = self._run(self._prepare(cql.SELECT_QUEUES))
        return sorted(str(r.queue) for r in rows)

    def stats(self, queue: str | None = None) -> list[QueueStats]:
        """Counts from the live rows only: pending rows after each shard's sweep position
        and leases with a deadline after its expiry position (older ones are tombstones)."""
        result = []
        now = self.now_ms()
        for name in [queue] if queue is not None else self.queues():
            ready = scheduled = in_flight = 0
            next_due: int | None = None
            per_shard: dict[int, int] = {}
            for shard in range(self.meta(name).shards):
                stored = _stored_state(self._lock_row(name, shard))
                # an id stored twice (two identical late writes at once) counts once
                rows = self._pending_after_sweep(name, shard, stored)
                dues = list({str(row.id): row.ready_ms for row in rows}.values())
                leases = self._live_leases(name, shard, stored)
                ready += sum(d <= now for d in dues)
                scheduled += sum(d > now for d in dues)
                in_flight += len(leases)
                per_shard[shard] = len(dues) + len(leases)
                if dues:
                    next_due = min(dues) if next_due is None else min(next_due, min(dues))
            poison = len(list(self._run(self._prepare(cql.SELECT_POISON_IDS), (name,))))
            counters = {
                str(r.name): int(r.value)
                for r in self._run(self._prepare(cql.SELECT_COUNTERS), (name,))
            }
            result.append(
                QueueStats(name, ready, scheduled, in_flight, poison, next_due, counters, per_shard)
            )
        return result

    def _pending_after_sweep(self, queue: str, shard: int, stored: ShardState) -> list[Any]:
        """(ready_ms, id) of every pending row of a shard: those after its sweep position
        (at or before it everything was consumed)."""
        buckets = list(range(self.meta(queue).buckets))
        params = (queue, buckets, shard, *stored.swept)
        return list(self._run(self._prepare(cql.SELECT_PENDING_AFTER), params))

    def _live_leases(self, queue: str, shard: int, stored: ShardState) -> list[str]:
        """Ids of a shard's leases: found through their deadlines, between the expiry
        position and the longest lease from now, one read per second of deadlines (the
        deadlines of acked leases lie in between, as tombstones)."""
        now = self.now_ms()
        first = max(stored.expired_ms, now - stored.lease_ms) + 1
        slices = _slices(first, now + stored.lease_ms, 1000, 10**6)
        args = [(queue, shard, self._bucket(queue, lo), lo - 1, hi) for lo, hi in slices]
        results = self._concurrently(self._prepare(cql.SELECT_DEADLINES_IN_BUCKET), args)
        ids = list({str(row.id) for result in results for row in result})
        chunks = [(queue, shard, ids[i : i + 100]) for i in range(0, len(ids), 100)]
        leases = self._concurrently(self._prepare(cql.SELECT_LEASES_BY_IDS), chunks)
        return [str(row.id) for result in leases for row in result]

    def add_counters(self, queue: str, deltas: dict[str, int]) -> None:
        for name, delta in deltas.items():
            self._count(queue, name, delta)

    def purge(self, queue: str) -> int:
        """Delete every pending and in-flight message (whole partitions at once)."""
        meta = self.meta(queue)
        removed = 0
        ts = self._now_us()
        for shard in range(meta.shards):
            stored = _stored_state(self._lock_row(queue, shard))
            ids = list({str(row.id) for row in self._pending_after_sweep(queue, shard, stored)})
            ids += self._live_leases(queue, shard, stored)
            removed += len(ids)
            self._execute_many(
                [self._prepare(cql.DELETE_INDEX).bind((ts, queue, i)) for i in ids]
                + [
                    self._prepare(cql.DELETE_BUCKET).bind((ts, queue, bucket, shard))
                    for bucket in range(meta.buckets)
                ]
                + [
                    self._prepare(cql.DELETE_DEADLINE_BUCKET).bind((ts, queue, shard, bucket))
                    for bucket in range(meta.buckets)
                ]
                + [
                    self._prepare(statement).bind((ts, queue, shard))
                    for statement in (cql.DELETE_SHARD_LEASES, cql.DELETE_SHARD_KEYS)
                ]
            )
        return removed


def _slices(
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


def _claim_delete_ts(fence: int, row: Any) -> int:
    """The timestamp that deletes a claimed pending row: above the fence, and above the
    row's own write, which a producer may have stamped after the fence was taken."""
    return max(fence + _CLAIM_DELETE, int(row.written) + 1)


def _stored_state(lock_row: Any) -> ShardState:
    """The positions stored in a shard's lock row (the origin for a shard never consumed),
    with its current fence."""
    if lock_row is None:
        return ShardState(0, _ORIGIN, _ORIGIN, _ORIGIN[0], 0)
    read = _ORIGIN if lock_row.read_ms is None else (lock_row.read_ms, lock_row.read_id or "")
    swept = _ORIGIN if lock_row.swept_ms is None else (lock_row.swept_ms, lock_row.swept_id or "")
    expired = _ORIGIN[0] if lock_row.expired_ms is None else lock_row.expired_ms
    return ShardState(lock_row.fence or 0, read, swept, expired, lock_row.lease_ms or 0)


def _advance(
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


class _Batches:
    """Logged batches of about ``_BATCH_BYTES`` each: fill ``current``, then call
    ``added`` with the size of the body just added."""

    def __init__(self) -> None:
        self._done: list[BatchStatement] = []
        self.current = BatchStatement(batch_type=BatchType.LOGGED)
        self._size = 0

    def added(self, body_bytes: int) -> None:
        self._size += body_bytes + _ROW_BYTES
        if self._size >= _BATCH_BYTES:
            self._done.append(self.current)
            self.current = BatchStatement(batch_type=BatchType.LOGGED)
            self._size = 0

    def all(self) -> list[BatchStatement]:
        if len(self.current) > 0:
            self._done.append(self.current)
            self.current = BatchStatement(batch_type=BatchType.LOGGED)
        return self._done


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
