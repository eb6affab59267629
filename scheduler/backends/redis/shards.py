"""The plumbing every Redis operation shares: the client, key names, shards, script calls.

Layout: every queue has ``shards`` shards (default 1; stored under ``{prefix}:meta:{queue}``
on first use so every client agrees). The keys of one shard share the hash tag
``{prefix:queue:n}``, so a shard lives in one cluster slot; the key list and what each
holds is at the top of ``lua/prelude.lua``. A keyed message lives in the shard chosen by a
stable hash of its key; an unkeyed one in the shard of its chain's first id (a random,
time-ordered id, so these spread evenly); a chain's later occurrences stay in its shard.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import redis
from redis.cluster import RedisCluster
from redis.commands.core import Script

from tickwork.scheduler.backends.base import Claim, Envelope, State, StoredMessage
from tickwork.scheduler.backends.records import LedgerEntry
from tickwork.scheduler.backends.redis.loop_wire import LoopWire
from tickwork.scheduler.backends.redis.options import RedisOptions, unreachable
from tickwork.scheduler.backends.redis.replicas import WAITED, ReplicaWait
from tickwork.scheduler.backends.redis.scripts import (
    SHARD_KEYS,
    evalsha_round_trip,
    load_scripts,
    priority_arg,
    raise_errors,
    redis_error,
    stored_envelope,
)
from tickwork.scheduler.errors import BackendFull
from tickwork.scheduler.ids import stable_shard

T = TypeVar("T")


def chain_root(message_id: str) -> str:
    return message_id.split(".", 1)[0]


class RedisShards:
    """A Redis client with the shard layout. Thread-safe (redis-py pools connections)."""

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        options: RedisOptions | None = None,
        *,
        cluster: bool = False,
        description: str = "redis",
        loop_wire: LoopWire | None = None,
    ) -> None:
        """``options``: the URL's (shards, prefix, sweep, replicas to wait for; defaults
        without). ``loop_wire`` writes from an event loop on the loop itself
        (``loop_wire.py``; without it they go through a thread)."""
        options = options or RedisOptions()
        # redis-py's return types are unions of bytes/str/awaitables; this class reads
        # bytes only (decode_responses is off), so treat the client as untyped here
        self.client: Any = client
        self.cluster = cluster
        self.default_shards = options.shards
        self.prefix = options.prefix
        self.description = description
        self.sweep = options.sweep
        self.shard_counts: dict[str, int] = {}
        self.cursor: dict[str, Iterator[int]] = {}
        self.lock = threading.Lock()
        self.scripts: dict[str, Script] = {
            name: client.register_script(source) for name, source in load_scripts().items()
        }
        self.waiter = (
            ReplicaWait(
                client,
                self.scripts,
                replicas=options.wait_replicas,
                timeout_ms=options.wait_timeout_ms,
                cluster=cluster,
                description=description,
            )
            if options.wait_replicas > 0
            else None
        )
        # a write that must wait for replicas goes through the blocking path, which waits
        self.loop_wire = None if cluster or self.waiter is not None else loop_wire
        self.call(client.ping)

    # -- plumbing ------------------------------------------------------------------------

    def call(self, operation: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a Redis call, translating driver errors at the boundary."""
        try:
            return operation(*args, **kwargs)
        except (redis.ConnectionError, redis.TimeoutError) as err:
            raise unreachable(self.description, err) from err
        except redis.RedisError as err:
            raise redis_error(err) from err

    def script(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """Run one script call (``_run_scripts``: waited for replicas when it writes and
        the URL asks)."""
        return self.run_scripts([(name, keys, args)])[0]

    def shard_keys(self, queue: str, shard: int) -> list[str]:
        tag = f"{{{self.prefix}:{queue}:{shard}}}"
        return [f"{tag}:{name}" for name in SHARD_KEYS]

    def meta_key(self, queue: str) -> str:
        return f"{self.prefix}:meta:{queue}"

    def queues_key(self) -> str:
        return f"{self.prefix}:queues"

    def bounds_key(self) -> str:
        return f"{self.prefix}:bounds"

    def paused_key(self) -> str:
        return f"{self.prefix}:paused"

    def aborts_key(self) -> str:
        return f"{self.prefix}:aborts"

    def shard_count(self, queue: str) -> int:
        """How many shards ``queue`` has (fixed when the queue is first used)."""
        count = self.shard_counts.get(queue)
        if count is not None:
            return count
        meta = self.meta_key(queue)
        stored = self.call(self.client.hget, meta, "shards")  # read first: no write when
        if stored is None:  # known (a worker starting on a full server writes nothing)
            try:
                self.call(self.client.hsetnx, meta, "shards", self.default_shards)
                self.call(self.client.sadd, self.queues_key(), queue)
            except BackendFull:
                # a queue never written to holds nothing: read as the default, not kept
                # (a write to it is refused too, until the server has room)
                return self.default_shards
            stored = self.call(self.client.hget, meta, "shards")
        count = int(stored)
        self.shard_counts[queue] = count
        return count

    def shard_for(self, queue: str, message_id: str, key: str | None) -> int:
        count = self.shard_count(queue)
        if count == 1:
            return 0
        return stable_shard(key if key is not None else chain_root(message_id), count)

    def run(self, name: str, queue: str, shard: int, args: Sequence[Any]) -> Any:
        return self.script(name, self.shard_keys(queue, shard), list(args))

    def run_many(self, name: str, calls: list[tuple[str, int, list[Any]]]) -> list[Any]:
        """Run one script per (queue, shard): one pipelined round trip on a single node;
        one round trip per shard on a cluster."""
        return self.run_scripts(
            [(name, self.shard_keys(queue, shard), args) for queue, shard, args in calls]
        )

    def run_scripts(self, calls: list[tuple[str, list[str], list[Any]]]) -> list[Any]:
        """Run (script, keys, args) calls: in one round trip on a single node, sent on a
        pooled connection directly (``evalsha_round_trip``, ``scripts.py``), one by one
        through redis-py's ``Script`` on a cluster (their keys may live in different
        slots). With ``wait_replicas``, calls that write what a caller is told is done
        wait for the replicas (``replicas.py``)."""
        if not calls:
            return []
        if self.waiter is not None and any(name in WAITED for name, _, _ in calls):
            return self.call(self.waiter.run, calls)
        if self.cluster:
            return [
                self.call(self.scripts[name], keys=keys, args=args) for name, keys, args in calls
            ]
        replies, _ = self.call(evalsha_round_trip, self.client, self.scripts, calls)
        return raise_errors(replies)

    def pipelined(self, calls: list[tuple[Any, ...]], command: str) -> list[Any]:
        def run() -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for args in calls:
                getattr(pipe, command)(*args)
            return list(pipe.execute())

        return self.call(run)

    def calls_by_limit(self, limits: Sequence[str]) -> list[list[int]]:
        """Indexes of ``limits`` grouped into script calls: all in one on a single node,
        one call per limit on a cluster (a script's keys must share one slot there)."""
        if not self.cluster:
            return [list(range(len(limits)))] if limits else []
        groups: dict[str, list[int]] = {}
        for index, limit in enumerate(limits):
            groups.setdefault(limit, []).append(index)
        return list(groups.values())

    def now_ms(self) -> int:
        seconds, micros = self.call(self.client.time)
        return int(seconds) * 1000 + int(micros) // 1000

    def close(self) -> None:
        self.client.close()

    def locate(self, message_id: str, queue: str | None) -> tuple[str, int] | None:
        """Find the (queue, shard) holding ``message_id``: its home shard first, then all."""
        queues = [queue] if queue is not None else self.queues()
        for name in queues:
            home = stable_shard(chain_root(message_id), self.shard_count(name))
            if self.call(self.client.hexists, self.shard_keys(name, home)[0], message_id):
                return name, home
        candidates = [(name, s) for name in queues for s in range(self.shard_count(name))]
        found = self.pipelined(
            [(self.shard_keys(name, s)[0], message_id) for name, s in candidates], "hexists"
        )
        for where, present in zip(candidates, found, strict=True):
            if present:
                return where
        return None

    def read(self, queue: str, shard: int, message_id: str) -> StoredMessage | None:
        return self.read_many(queue, shard, [message_id])[0]

    def read_many(
        self, queue: str, shard: int, message_ids: Sequence[str]
    ) -> list[StoredMessage | None]:
        """Read messages of one shard in one pipelined round trip (and a clock read),
        ``None`` for each one gone."""
        if not message_ids:
            return []
        m, s, _, l_, _, a, e = self.shard_keys(queue, shard)[:7]

        def run() -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for message_id in message_ids:
                pipe.hget(m, message_id)
                pipe.zscore(l_, message_id)
                pipe.zscore(s, message_id)
                pipe.hget(a, message_id)
                pipe.hget(e, message_id)
            return list(pipe.execute())

        replies = self.call(run)
        now_ms = self.now_ms()  # a cluster's pipeline refuses TIME
        found: list[StoredMessage | None] = []
        for index, message_id in enumerate(message_ids):
            record, leased, scheduled, attempt, error = replies[5 * index : 5 * index + 5]
            found.append(
                None
                if record is None
                else _stored(message_id, queue, record, leased, scheduled, attempt, error, now_ms)
            )
        return found

    def by_shard(self, claims: Iterable[Claim]) -> dict[tuple[str, int], list[Claim]]:
        groups: dict[tuple[str, int], list[Claim]] = {}
        for claim in claims:
            where = self.claim_shard(claim)
            groups.setdefault(where, []).append(claim)
        return groups

    def claim_shard(self, claim: Claim) -> tuple[str, int]:
        home = self.shard_for(claim.queue, claim.id, claim.key)
        return claim.queue, home

    def ledger_key(self, queue: str, shard: int, subject: str) -> str:
        """The list holding ``subject``'s ledger records written in this shard (in the
        shard's hash tag, so the scripts of the shard can write it)."""
        return f"{{{self.prefix}:{queue}:{shard}}}:h:{subject}"

    @staticmethod
    def ledger_args(entry: LedgerEntry | None) -> list[Any]:
        """A ledger entry as the scripts read it from ``ARGV`` (``ledger`` in the prelude)."""
        if entry is None or not entry.records:
            return [0]
        records = entry.records
        return [_ledger_head(len(records), entry.keep, entry.ttl_ms), *records]

    @staticmethod
    def next_args(nxt: Envelope | None) -> list[Any]:
        if nxt is None:
            return ["", "", 0, 0, 0, "", "", ""]
        return [
            nxt.id,
            nxt.key or "",
            priority_arg(nxt),
            nxt.due_ms,
            nxt.timeout_ms,
            nxt.fair or "",
            nxt.body,
            nxt.limit or "",
        ]

    def queues(self) -> list[str]:
        members = self.call(self.client.smembers, self.queues_key())
        return sorted(m.decode() for m in members)

    def counter_total(self, queue: str, name: str) -> int:
        values = self.pipelined(
            [(self.shard_keys(queue, s)[11], name) for s in range(self.shard_count(queue))], "hget"
        )
        return sum(int(v or 0) for v in values)


@functools.lru_cache(maxsize=256)
def _ledger_head(count: int, keep: int, ttl_ms: int) -> bytes:
    """A ledger entry's first argument: ``count|keep|ttl_ms`` (the same few for every run
    of a worker: built once)."""
    return b"%d|%d|%d" % (count, max(1, keep), max(1, ttl_ms))


def _stored(
    message_id: str,
    queue: str,
    record: bytes,
    leased: float | None,
    scheduled: float | None,
    attempt: bytes | None,
    error: bytes | None,
    now_ms: int,
) -> StoredMessage:
    envelope = stored_envelope(message_id, queue, record)
    if leased is not None:
        state = State.RUNNING
    elif scheduled is not None and envelope.due_ms > now_ms:
        state = State.SCHEDULED
    else:
        state = State.READY
    return StoredMessage(
        envelope, state, int(attempt or 0), error.decode() if error is not None else None
    )
