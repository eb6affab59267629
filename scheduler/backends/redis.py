"""Redis and Redis Cluster storage, after Netflix dyno-queues: sharded sorted sets, one Lua
script per state change, one round trip per batch.

URLs::

    redis://[user:password@]host:6379/0?shards=1&prefix=tw
    rediss://...                                   (TLS; ssl_cert_reqs etc. as in redis-py)
    redis+cluster://[user:password@]host:7000,host:7001?shards=16

Layout: every queue has ``shards`` shards (default 1; stored under ``{prefix}:meta:{queue}``
on first use so every client agrees). More shards spread a queue over several cluster
slots (and nodes); priority is then strict within a shard and within each claimed batch,
but only best-effort across shards, as in dyno-queues. The keys of one shard share the hash tag
``{prefix:queue:n}``, so a shard lives in one cluster slot; the key list and what each
holds is at the top of ``redis_scripts.py``. A keyed message lives in the shard chosen by
a stable hash of its key; an unkeyed one in the shard of its chain's first id (a random,
time-ordered id, so these spread evenly); a chain's later occurrences stay in its shard.

Time comes from the server (``TIME`` inside the scripts). Consumers rotate over the
shards, starting at a random one; an empty claim returns the shard's next due time so the
worker sleeps until then.
"""

from __future__ import annotations

import itertools
import json
import random
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import redis
from redis.backoff import ExponentialBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.commands.core import Script
from redis.retry import Retry

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
from scheduler.backends.redis_scripts import SCRIPTS, SHARD_KEYS
from scheduler.clock import Clock
from scheduler.errors import BackendError, BackendUnavailable, ConfigurationError, KeyConflict
from scheduler.ids import stable_shard

T = TypeVar("T")

_OPTIONS = {"shards", "prefix", "sweep"}
_SWEEP = 1000
_OUTCOMES = {
    outcome.value.encode(): outcome for outcome in Outcome
}  # expired leases / due messages moved per claim, at most


def _chain_root(message_id: str) -> str:
    return message_id.split(".", 1)[0]


def _record(e: Envelope) -> bytes:
    """The stored form of a message: a small header, the key, then the body."""
    key = (e.key or "").encode()
    return b"%d|%d|%d|%d|%s%s" % (e.priority, e.timeout_ms, e.due_ms, len(key), key, e.body)


def _parse_record(record: bytes) -> tuple[int, int, int, str | None, bytes]:
    """(priority, timeout_ms, due_ms, key, body) from a stored record."""
    fields = record.split(b"|", 4)
    priority, timeout, due, key_length = (int(f) for f in fields[:4])
    rest = fields[4]
    key = rest[:key_length].decode() if key_length else None
    return priority, timeout, due, key, rest[key_length:]


class RedisBackend(Backend):
    """Storage on Redis or Redis Cluster. Thread-safe (redis-py pools connections)."""

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        *,
        shards: int = 1,
        prefix: str = "tw",
        cluster: bool = False,
        description: str = "redis",
    ) -> None:
        if shards < 1:
            raise ConfigurationError("shards must be at least 1")
        # redis-py's return types are unions of bytes/str/awaitables; this class reads
        # bytes only (decode_responses is off), so treat the client as untyped here
        self._client: Any = client
        self._cluster = cluster
        self._default_shards = shards
        self._prefix = prefix
        self._description = description
        self._shard_counts: dict[str, int] = {}
        self._cursor: dict[str, Iterator[int]] = {}
        self._lock = threading.Lock()
        self._scripts: dict[str, Script] = {
            name: client.register_script(source) for name, source in SCRIPTS.items()
        }
        self._call(client.ping)

    @classmethod
    def from_url(cls, url: str, clock: Clock | None = None) -> RedisBackend:
        del clock  # shared state always runs on the server's clock (TIME in the scripts)
        parts = urlsplit(url)
        options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        ours = {k: options.pop(k) for k in list(options) if k in _OPTIONS}
        try:
            shards = int(ours.get("shards", 1))
        except ValueError as err:
            raise ConfigurationError(f"shards must be an integer in {url!r}") from err
        prefix = ours.get("prefix", "tw")
        retry = Retry(ExponentialBackoff(cap=2.0, base=0.05), retries=5)
        common: dict[str, Any] = {
            "retry": retry,
            "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
            "socket_timeout": 10,
            "socket_connect_timeout": 5,
            "health_check_interval": 30,
        }
        query = urlencode(options)
        where = parts.hostname or "localhost"
        try:
            if parts.scheme == "redis+cluster":
                nodes = []
                for host_port in parts.netloc.rsplit("@", 1)[-1].split(","):
                    host, _, port = host_port.partition(":")
                    node = ClusterNode(host or "localhost", int(port or 6379))  # type: ignore[no-untyped-call]
                    nodes.append(node)
                client: redis.Redis | RedisCluster = RedisCluster(
                    startup_nodes=nodes,
                    username=parts.username,
                    password=parts.password,
                    **common,
                )
                where = parts.netloc.rsplit("@", 1)[-1]
                cluster = True
            else:
                clean = urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))
                client = redis.Redis.from_url(clean, **common)
                where = f"{parts.hostname}:{parts.port or 6379}"
                cluster = False
        except redis.RedisError as err:
            raise BackendUnavailable(f"cannot reach Redis at {where}: {err}") from err
        except ValueError as err:
            raise ConfigurationError(f"invalid Redis URL {url!r}: {err}") from err
        return cls(client, shards=shards, prefix=prefix, cluster=cluster, description=where)

    # -- plumbing ------------------------------------------------------------------------

    def _call(self, operation: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a Redis call, translating driver errors at the boundary."""
        try:
            return operation(*args, **kwargs)
        except (redis.ConnectionError, redis.TimeoutError) as err:
            raise BackendUnavailable(f"Redis at {self._description} is unreachable: {err}") from err
        except redis.RedisError as err:
            raise BackendError(f"Redis error: {err}") from err

    def _shard_keys(self, queue: str, shard: int) -> list[str]:
        tag = f"{{{self._prefix}:{queue}:{shard}}}"
        return [f"{tag}:{name}" for name in SHARD_KEYS]

    def _meta_key(self, queue: str) -> str:
        return f"{self._prefix}:meta:{queue}"

    def _queues_key(self) -> str:
        return f"{self._prefix}:queues"

    def shard_count(self, queue: str) -> int:
        """How many shards ``queue`` has (fixed when the queue is first used)."""
        count = self._shard_counts.get(queue)
        if count is not None:
            return count
        meta = self._meta_key(queue)
        self._call(self._client.hsetnx, meta, "shards", self._default_shards)
        self._call(self._client.sadd, self._queues_key(), queue)
        count = int(self._call(self._client.hget, meta, "shards"))
        self._shard_counts[queue] = count
        return count

    def _shard_for(self, queue: str, message_id: str, key: str | None) -> int:
        count = self.shard_count(queue)
        if count == 1:
            return 0
        return stable_shard(key if key is not None else _chain_root(message_id), count)

    def _run(self, name: str, queue: str, shard: int, args: Sequence[Any]) -> Any:
        return self._call(self._scripts[name], keys=self._shard_keys(queue, shard), args=list(args))

    def _run_many(self, name: str, calls: list[tuple[str, int, list[Any]]]) -> list[Any]:
        """Run one script per (queue, shard): one pipelined round trip on a single node;
        one round trip per shard on a cluster."""
        if not calls:
            return []
        if self._cluster or len(calls) == 1:
            return [self._run(name, queue, shard, args) for queue, shard, args in calls]
        script = self._scripts[name]

        def pipelined() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            for queue, shard, args in calls:
                script(keys=self._shard_keys(queue, shard), args=args, client=pipe)
            return list(pipe.execute())

        return self._call(pipelined)

    def now_ms(self) -> int:
        seconds, micros = self._call(self._client.time)
        return int(seconds) * 1000 + int(micros) // 1000

    def close(self) -> None:
        self._client.close()

    # -- producing -----------------------------------------------------------------------

    def enqueue(
        self, envelopes: Sequence[Envelope], on_conflict: OnConflict = OnConflict.ERROR
    ) -> list[Outcome]:
        if not envelopes:
            return []
        groups: dict[tuple[str, int], list[int]] = {}
        for index, e in enumerate(envelopes):
            shard = self._shard_for(e.queue, e.id, e.key)
            groups.setdefault((e.queue, shard), []).append(index)
        if on_conflict is OnConflict.ERROR and len(groups) > 1:
            self._check_keys(envelopes)
        calls = []
        for (queue, shard), indexes in groups.items():
            args: list[Any] = [on_conflict.value, len(indexes)]
            for i in indexes:
                e = envelopes[i]
                args += [e.id, e.key or "", e.priority, e.due_ms, _record(e)]
            calls.append((queue, shard, args))
        replies = self._run_many("enqueue", calls)
        outcomes: list[Outcome | None] = [None] * len(envelopes)
        conflicts: list[str] = []
        for (_, indexes), reply in zip(groups.items(), replies, strict=True):
            if reply and reply[0] == b"CONFLICT":
                conflicts += [k.decode() for k in reply[1:]]
                continue
            for i, outcome in zip(indexes, reply, strict=True):
                outcomes[i] = _OUTCOMES[outcome]
        if conflicts:
            raise KeyConflict(envelopes[0].queue, conflicts)
        return [o for o in outcomes if o is not None]

    def _check_keys(self, envelopes: Sequence[Envelope]) -> None:
        """Before a multi-shard batch with ``ERROR``: refuse it whole if a key is taken
        (each shard re-checks atomically; only a racing writer can slip in between)."""
        keyed = [e for e in envelopes if e.key is not None]
        if not keyed:
            return
        holders = self._pipelined(
            [
                (self._shard_keys(e.queue, self._shard_for(e.queue, e.id, e.key))[7], e.key)
                for e in keyed
            ],
            "hget",
        )
        taken = [
            e.key
            for e, holder in zip(keyed, holders, strict=True)
            if holder is not None and holder.decode() != e.id
        ]
        if taken:
            raise KeyConflict(envelopes[0].queue, [k for k in taken if k is not None])

    def _pipelined(self, calls: list[tuple[Any, ...]], command: str) -> list[Any]:
        def run() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            for args in calls:
                getattr(pipe, command)(*args)
            return list(pipe.execute())

        return self._call(run)

    # -- reading and cancelling ----------------------------------------------------------

    def _locate(self, message_id: str, queue: str | None) -> tuple[str, int] | None:
        """Find the (queue, shard) holding ``message_id``: its home shard first, then all."""
        queues = [queue] if queue is not None else self.queues()
        for name in queues:
            home = stable_shard(_chain_root(message_id), self.shard_count(name))
            if self._call(self._client.hexists, self._shard_keys(name, home)[0], message_id):
                return name, home
        candidates = [(name, s) for name in queues for s in range(self.shard_count(name))]
        found = self._pipelined(
            [(self._shard_keys(name, s)[0], message_id) for name, s in candidates], "hexists"
        )
        for where, present in zip(candidates, found, strict=True):
            if present:
                return where
        return None

    def _read(self, queue: str, shard: int, message_id: str) -> StoredMessage | None:
        m, s, _, l_, _, a, e = self._shard_keys(queue, shard)[:7]

        def run() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            pipe.hget(m, message_id)
            pipe.zscore(l_, message_id)
            pipe.zscore(s, message_id)
            pipe.hget(a, message_id)
            pipe.hget(e, message_id)
            return list(pipe.execute())

        record, leased, scheduled, attempt, error = self._call(run)
        if record is None:
            return None
        priority, timeout, due, key, body = _parse_record(record)
        if leased is not None:
            state = State.RUNNING
        elif scheduled is not None and due > self.now_ms():
            state = State.SCHEDULED
        else:
            state = State.READY
        envelope = Envelope(message_id, queue, key, priority, due, timeout, body)
        return StoredMessage(
            envelope, state, int(attempt or 0), error.decode() if error is not None else None
        )

    def get(self, message_id: str, queue: str | None = None) -> StoredMessage | None:
        where = self._locate(message_id, queue)
        return None if where is None else self._read(where[0], where[1], message_id)

    def get_by_key(self, queue: str, key: str) -> StoredMessage | None:
        shard = stable_shard(key, self.shard_count(queue))
        holder = self._call(self._client.hget, self._shard_keys(queue, shard)[7], key)
        return None if holder is None else self._read(queue, shard, holder.decode())

    def delete(self, message_id: str, queue: str | None = None) -> bool:
        where = self._locate(message_id, queue)
        return where is not None and bool(self._run("delete", where[0], where[1], [message_id]))

    def delete_by_key(self, queue: str, key: str) -> bool:
        shard = stable_shard(key, self.shard_count(queue))
        return bool(self._run("delete_by_key", queue, shard, [key]))

    def keyed(self, queue: str | None = None) -> list[StoredMessage]:
        found = []
        for name in [queue] if queue is not None else self.queues():
            for shard in range(self.shard_count(name)):
                holders = self._call(self._client.hgetall, self._shard_keys(name, shard)[7])
                for key in sorted(holders):
                    stored = self._read(name, shard, holders[key].decode())
                    if stored is not None:
                        found.append(stored)
        return found

    # -- consuming -----------------------------------------------------------------------

    def _shard_cycle(self, queue: str) -> Iterator[int]:
        with self._lock:
            cycle = self._cursor.get(queue)
            if cycle is None:
                count = self.shard_count(queue)
                start = random.randrange(count)
                cycle = itertools.cycle([(start + i) % count for i in range(count)])
                self._cursor[queue] = cycle
            return cycle

    def claim(self, queue: str, limit: int, lookahead_ms: int = 0) -> ClaimBatch:
        """One script call per shard, starting at this client's next shard and moving on
        only while the batch is not full (so a busy queue costs one round trip)."""
        cycle = self._shard_cycle(queue)
        next_due: int | None = None
        found: list[tuple[int, int, Claim]] = []
        for _ in range(self.shard_count(queue)):
            with self._lock:
                shard = next(cycle)
            token = secrets.token_hex(8)
            wanted = limit - len(found)
            reply = self._run("claim", queue, shard, [wanted, lookahead_ms, token, _SWEEP])
            due = int(reply[1])
            if due >= 0:
                next_due = due if next_due is None else min(next_due, due)
            for i in range(2, len(reply), 8):
                mid, key, body, attempt, due_ms, deadline, timeout, priority = reply[i : i + 8]
                claim = Claim(
                    mid.decode(),
                    queue,
                    key.decode() or None,
                    body,
                    token,
                    int(attempt),
                    int(due_ms),
                    int(deadline),
                    int(timeout),
                )
                found.append((-int(priority), int(due_ms), claim))
            if len(found) >= limit:
                break
        # each shard pops in priority order; merge the shards' batches the same way
        found.sort(key=lambda entry: (entry[0], entry[1]))
        claims = [claim for _, _, claim in found]
        return ClaimBatch(claims, None if claims else next_due)

    def _by_shard(self, claims: Iterable[Claim]) -> dict[tuple[str, int], list[Claim]]:
        groups: dict[tuple[str, int], list[Claim]] = {}
        for claim in claims:
            where = self._claim_shard(claim)
            groups.setdefault(where, []).append(claim)
        return groups

    def _claim_shard(self, claim: Claim) -> tuple[str, int]:
        home = self._shard_for(claim.queue, claim.id, claim.key)
        return claim.queue, home

    def ack(self, items: Sequence[tuple[Claim, Envelope | None]]) -> list[bool]:
        if not items:
            return []
        groups: dict[tuple[str, int], list[int]] = {}
        for index, (claim, _) in enumerate(items):
            groups.setdefault(self._claim_shard(claim), []).append(index)
        calls = []
        for (queue, shard), indexes in groups.items():
            args: list[Any] = [len(indexes)]
            for i in indexes:
                claim, nxt = items[i]
                if nxt is None:
                    args += [claim.id, claim.token, 0]
                else:
                    args += [claim.id, claim.token, 1, *self._next_args(nxt)]
            calls.append((queue, shard, args))
        results = [False] * len(items)
        for (_, indexes), reply in zip(groups.items(), self._run_many("ack", calls), strict=True):
            for i, ok in zip(indexes, reply, strict=True):
                results[i] = bool(ok)
        return results

    @staticmethod
    def _next_args(nxt: Envelope | None) -> list[Any]:
        if nxt is None:
            return ["", "", 0, 0, 0, ""]
        return [nxt.id, nxt.key or "", nxt.priority, nxt.due_ms, nxt.timeout_ms, nxt.body]

    def retry(self, claim: Claim, due_ms: int, error: str) -> bool:
        queue, shard = self._claim_shard(claim)
        return bool(self._run("retry", queue, shard, [claim.id, claim.token, due_ms, error]))

    def release(self, claims: Iterable[Claim]) -> int:
        calls = []
        for (queue, shard), group in self._by_shard(claims).items():
            args: list[Any] = [len(group)]
            for claim in group:
                args += [claim.id, claim.token]
            calls.append((queue, shard, args))
        return sum(int(r) for r in self._run_many("release", calls))

    def extend(self, claims: Sequence[Claim], lease_ms: int) -> list[bool]:
        groups: dict[tuple[str, int], list[int]] = {}
        for index, claim in enumerate(claims):
            groups.setdefault(self._claim_shard(claim), []).append(index)
        calls = []
        for (queue, shard), indexes in groups.items():
            args: list[Any] = [lease_ms, len(indexes)]
            for i in indexes:
                args += [claims[i].id, claims[i].token]
            calls.append((queue, shard, args))
        results = [False] * len(claims)
        for (_, indexes), reply in zip(
            groups.items(), self._run_many("extend", calls), strict=True
        ):
            for i, ok in zip(indexes, reply, strict=True):
                results[i] = bool(ok)
        return results

    def requeue_expired(self, queue: str) -> int:
        before = self._counter_total(queue, "redelivered")
        for shard in range(self.shard_count(queue)):
            self._run("claim", queue, shard, [0, 0, "", _SWEEP])
        return self._counter_total(queue, "redelivered") - before

    def _counter_total(self, queue: str, name: str) -> int:
        values = self._pipelined(
            [(self._shard_keys(queue, s)[11], name) for s in range(self.shard_count(queue))], "hget"
        )
        return sum(int(v or 0) for v in values)

    # -- the poison queue ----------------------------------------------------------------

    def poison(
        self, claim: Claim, failure: Failure, next_occurrence: Envelope | None = None
    ) -> bool:
        queue, shard = self._claim_shard(claim)
        payload = json.dumps(
            {
                "reason": failure.reason,
                "error_type": failure.error_type,
                "message": failure.message,
                "traceback": failure.traceback,
            }
        )
        args = [claim.id, claim.token, payload, *self._next_args(next_occurrence)]
        return bool(self._run("poison", queue, shard, args))

    def _poison_records(self, queue: str, shard: int, ids: list[bytes]) -> list[PoisonRecord]:
        keys = self._shard_keys(queue, shard)
        if not ids:
            return []
        records = self._call(self._client.hmget, keys[8], ids)
        failures = self._call(self._client.hmget, keys[9], ids)
        found = []
        for message_id, record, failure in zip(ids, records, failures, strict=True):
            if record is None or failure is None:
                continue
            priority, timeout, due, key, body = _parse_record(record)
            attempts, failed_ms, details = failure.split(b"|", 2)
            data = json.loads(details)
            envelope = Envelope(message_id.decode(), queue, key, priority, due, timeout, body)
            found.append(
                PoisonRecord(
                    envelope,
                    Failure(data["reason"], data["error_type"], data["message"], data["traceback"]),
                    int(attempts),
                    int(failed_ms),
                )
            )
        return found

    def poison_list(self, queue: str | None = None, limit: int = 100) -> list[PoisonRecord]:
        found: list[PoisonRecord] = []
        for name in [queue] if queue is not None else self.queues():
            for shard in range(self.shard_count(name)):
                ids = self._call(
                    self._client.zrange, self._shard_keys(name, shard)[10], 0, limit - 1
                )
                found += self._poison_records(name, shard, ids)
        found.sort(key=lambda r: (r.failed_at_ms, r.envelope.id))
        return found[:limit]

    def poison_get(self, message_id: str) -> PoisonRecord | None:
        for name in self.queues():
            for shard in range(self.shard_count(name)):
                records = self._poison_records(name, shard, [message_id.encode()])
                if records:
                    return records[0]
        return None

    def poison_replay(self, ids: Sequence[str] | None = None, queue: str | None = None) -> int:
        moved = 0
        for name in [queue] if queue is not None else self.queues():
            for shard in range(self.shard_count(name)):
                args = ["all"] if ids is None else ["ids", *ids]
                moved += int(self._run("poison_replay", name, shard, args))
        return moved

    def poison_purge(self, queue: str | None = None) -> int:
        purged = 0
        for name in [queue] if queue is not None else self.queues():
            for shard in range(self.shard_count(name)):
                keys = self._shard_keys(name, shard)
                purged += int(self._call(self._client.zcard, keys[10]))
                for key in keys[8:11]:
                    self._call(self._client.delete, key)
        return purged

    # -- operations ----------------------------------------------------------------------

    def queues(self) -> list[str]:
        members = self._call(self._client.smembers, self._queues_key())
        return sorted(m.decode() for m in members)

    def stats(self, queue: str | None = None) -> list[QueueStats]:
        now = self.now_ms()
        result = []
        for name in [queue] if queue is not None else self.queues():
            shards = self.shard_count(name)

            def run(name: str = name, shards: int = shards) -> list[Any]:
                pipe = self._client.pipeline(transaction=False)
                for shard in range(shards):
                    keys = self._shard_keys(name, shard)
                    s, r, l_ = keys[1:4]
                    pipe.zcard(r)
                    pipe.zcount(s, "-inf", now)
                    pipe.zcard(s)
                    pipe.zcard(l_)
                    pipe.zcard(keys[10])
                    pipe.zrange(s, 0, 0, withscores=True)
                    pipe.hgetall(keys[11])
                return list(pipe.execute())

            replies = self._call(run)
            ready = scheduled = in_flight = poison = 0
            next_due: int | None = None
            counters: dict[str, int] = {}
            per_shard: dict[int, int] = {}
            for shard in range(shards):
                r_count, s_due, s_count, l_count, p_count, first, counts = replies[
                    shard * 7 : shard * 7 + 7
                ]
                ready += r_count + s_due
                scheduled += s_count - s_due
                in_flight += l_count
                poison += p_count
                per_shard[shard] = r_count + s_count + l_count
                if r_count:
                    next_due = now if next_due is None else min(next_due, now)
                if first:
                    due = int(first[0][1])
                    next_due = due if next_due is None else min(next_due, due)
                for counter, value in counts.items():
                    counters[counter.decode()] = counters.get(counter.decode(), 0) + int(value)
            result.append(
                QueueStats(name, ready, scheduled, in_flight, poison, next_due, counters, per_shard)
            )
        return result

    def add_counters(self, queue: str, deltas: dict[str, int]) -> None:
        key = self._shard_keys(queue, 0)[11]
        for name, delta in deltas.items():
            if delta:
                self._call(self._client.hincrby, key, name, delta)

    def purge(self, queue: str) -> int:
        removed = 0
        for shard in range(self.shard_count(queue)):
            keys = self._shard_keys(queue, shard)
            removed += int(self._call(self._client.hlen, keys[0]))
            for key in keys[:8]:
                self._call(self._client.delete, key)
        return removed
