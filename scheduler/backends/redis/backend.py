"""Redis and Redis Cluster storage, after Netflix dyno-queues: sharded sorted sets, one Lua
script per state change, one round trip per batch.

URLs (options in ``options.py``)::

    redis://[user:password@]host:6379/0?shards=1&prefix=tw
    rediss://...                                   (TLS; ssl_cert_reqs etc. as in redis-py)
    redis+cluster://[user:password@]host:7000,host:7001?shards=16

More shards spread a queue over several cluster slots (and nodes); priority is then strict
within a shard and within each claimed batch, but only best-effort across shards, as in
dyno-queues. Time comes from the server (``TIME`` inside the scripts). Consumers rotate over
the shards, starting at a random one; an empty claim returns the shard's next due time so
the worker sleeps until then.

Modules: ``options.py`` (URL options, connecting), ``shards.py`` (key layout, script
calls), ``scripts.py`` + ``lua/`` (the scripts), ``admin.py`` (poison queue, stats,
purge), ``limits.py`` (concurrency limits), this one (enqueue, read, cancel, claim, settle).
"""

from __future__ import annotations

import itertools
import random
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from scheduler.backends.base import (
    Backend,
    Claim,
    ClaimBatch,
    Envelope,
    OnConflict,
    Outcome,
    StoredMessage,
)
from scheduler.backends.records import LedgerEntry, Waiter
from scheduler.backends.redis.admin import RedisAdmin
from scheduler.backends.redis.batches import RedisBatches
from scheduler.backends.redis.ledger import RedisLedger
from scheduler.backends.redis.loop_wire import LoopWire
from scheduler.backends.redis.options import connect, without_query
from scheduler.backends.redis.rates import RedisRates
from scheduler.backends.redis.registry import RedisRegistry
from scheduler.backends.redis.results import RedisResults
from scheduler.backends.redis.scripts import encode_record, raise_errors
from scheduler.clock import Clock
from scheduler.errors import KeyConflict
from scheduler.ids import stable_shard

_OUTCOMES = {outcome.value.encode(): outcome for outcome in Outcome}

#: how many times a read by key follows a moving holder before it gives up
REREADS = 20


class RedisBackend(
    RedisAdmin, RedisRates, RedisResults, RedisRegistry, RedisBatches, RedisLedger, Backend
):
    """Storage on Redis or Redis Cluster. Thread-safe (redis-py pools connections)."""

    @classmethod
    def from_url(cls, url: str, clock: Clock | None = None) -> RedisBackend:
        del clock  # shared state always runs on the server's clock (TIME in the scripts)
        client, options, cluster, where = connect(url)
        return cls(
            client,
            loop_wire=None if cluster else LoopWire(without_query(url), options.client_options()),
            shards=options.shards,
            prefix=options.prefix,
            cluster=cluster,
            description=where,
            sweep=options.sweep,
            wait_replicas=options.wait_replicas,
            wait_timeout_ms=options.wait_timeout_ms,
        )

    def enqueue(
        self,
        envelopes: Sequence[Envelope],
        on_conflict: OnConflict = OnConflict.ERROR,
        bounded: bool = False,
    ) -> list[Outcome]:
        if not envelopes:
            return []
        groups = self._enqueue_groups(envelopes)
        if on_conflict is OnConflict.ERROR and len(groups) > 1:
            self._check_keys(envelopes)
        calls = self._enqueue_calls(envelopes, groups, on_conflict, bounded)
        return self._enqueue_outcomes(envelopes, groups, self._run_many("enqueue", calls))

    async def aenqueue(
        self,
        envelopes: Sequence[Envelope],
        on_conflict: OnConflict = OnConflict.ERROR,
        bounded: bool = False,
    ) -> list[Outcome]:
        """On one node, written from the running loop itself (``loop_wire.py``); in a
        thread (as the base class does) on a cluster, with ``wait_replicas``, when a
        queue's shard count is not yet known (reading it blocks), for a batch that must
        check keys across shards first, or when the loop's connection failed."""
        wire = self._loop_wire
        if wire is not None and envelopes and all(e.queue in self._shard_counts for e in envelopes):
            groups = self._enqueue_groups(envelopes)
            if on_conflict is not OnConflict.ERROR or len(groups) == 1:
                calls = [
                    ("enqueue", self._shard_keys(queue, shard), args)
                    for queue, shard, args in self._enqueue_calls(
                        envelopes, groups, on_conflict, bounded
                    )
                ]
                replies = await wire.scripts(self._scripts, calls)
                if replies is not None:
                    return self._enqueue_outcomes(envelopes, groups, raise_errors(replies))
        return await super().aenqueue(envelopes, on_conflict, bounded)

    def _enqueue_groups(self, envelopes: Sequence[Envelope]) -> dict[tuple[str, int], list[int]]:
        """The indexes of ``envelopes`` by the (queue, shard) each is written in."""
        groups: dict[tuple[str, int], list[int]] = {}
        for index, e in enumerate(envelopes):
            shard = self._shard_for(e.queue, e.id, e.key)
            groups.setdefault((e.queue, shard), []).append(index)
        return groups

    @staticmethod
    def _enqueue_calls(
        envelopes: Sequence[Envelope],
        groups: dict[tuple[str, int], list[int]],
        on_conflict: OnConflict,
        bounded: bool,
    ) -> list[tuple[str, int, list[Any]]]:
        """One enqueue script call per (queue, shard)."""
        calls = []
        for (queue, shard), indexes in groups.items():
            args: list[Any] = [on_conflict.value, "1" if bounded else "0", len(indexes)]
            for i in indexes:
                e = envelopes[i]
                args += [e.id, e.key or "", e.priority, e.due_ms, encode_record(e)]
            calls.append((queue, shard, args))
        return calls

    @staticmethod
    def _enqueue_outcomes(
        envelopes: Sequence[Envelope], groups: dict[tuple[str, int], list[int]], replies: list[Any]
    ) -> list[Outcome]:
        """Each envelope's outcome from the scripts' replies; ``KeyConflict`` if a script
        refused its batch (``ERROR``: a key is held by another message)."""
        outcomes: list[Outcome | None] = [None] * len(envelopes)
        conflicts: list[str] = []
        for indexes, reply in zip(groups.values(), replies, strict=True):
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

    def get(self, message_id: str, queue: str | None = None) -> StoredMessage | None:
        where = self._locate(message_id, queue)
        return None if where is None else self._read(where[0], where[1], message_id)

    def get_by_key(self, queue: str, key: str) -> StoredMessage | None:
        # two reads: the key's holder, then the message; an ack between them replaces the
        # message, so a miss is read again while the holder keeps changing (bounded)
        shard = stable_shard(key, self.shard_count(queue))
        keys_hash = self._shard_keys(queue, shard)[7]
        holder = self._call(self._client.hget, keys_hash, key)
        for _ in range(REREADS):
            if holder is None:
                return None
            found = self._read(queue, shard, holder.decode())
            if found is not None:
                return found
            again = self._call(self._client.hget, keys_hash, key)
            if again == holder:
                return None
            holder = again
        return None

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

    def _shard_cycle(self, queue: str) -> Iterator[int]:
        with self._lock:
            cycle = self._cursor.get(queue)
            if cycle is None:
                count = self.shard_count(queue)
                start = random.randrange(count)
                cycle = itertools.cycle([(start + i) % count for i in range(count)])
                self._cursor[queue] = cycle
            return cycle

    def claim(
        self,
        queue: str,
        limit: int,
        lookahead_ms: int = 0,
        slots: Mapping[str, int] | None = None,
    ) -> ClaimBatch:
        """One script call per shard, starting at this client's next shard and moving on
        only while the batch is not full (so a busy queue costs one round trip). On one
        node the script also takes the concurrency slots of ``slots``' limits."""
        cycle = self._shard_cycle(queue)
        next_due: int | None = None
        found: list[tuple[int, int, Claim]] = []
        extra = self._slot_args(queue, slots)
        for _ in range(self.shard_count(queue)):
            with self._lock:
                shard = next(cycle)
            token = secrets.token_hex(8)
            wanted = limit - len(found)
            args = [wanted, lookahead_ms, token, self._sweep, *extra]
            reply = self._run("claim", queue, shard, args)
            due = int(reply[1])
            if due >= 0:
                next_due = due if next_due is None else min(next_due, due)
            for i in range(2, len(reply), 10):
                mid, key, body, attempt, due_ms, deadline, timeout, priority, place, slot = reply[
                    i : i + 10
                ]
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
                    slot=slot.decode() or None,
                )
                found.append((-int(priority), int(place), claim))
            if len(found) >= limit:
                break
        # each shard pops in priority order, then by place (due time, or a fair turn);
        # merge the shards' batches the same way
        found.sort(key=lambda entry: (entry[0], entry[1]))
        claims = [claim for _, _, claim in found]
        return ClaimBatch(claims, None if claims else next_due)

    def _slot_args(self, queue: str, slots: Mapping[str, int] | None) -> list[Any]:
        """The claim script's arguments that make it take slots of ``slots``' limits:
        none on a cluster (a limit's keys live in other slots than the shard's)."""
        if not slots or self._cluster:
            return []
        pairs = [value for name, capacity in slots.items() for value in (name, capacity)]
        return [queue, f"{{{self._prefix}:limit:", *pairs]

    def ack(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> list[bool]:
        if not items:
            return []
        groups, calls = self._ack_calls(items, ledger)
        return self._ack_results(len(items), groups, self._run_scripts(calls))

    def ack_releasing(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        held: Sequence[tuple[str, str]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> tuple[list[bool], list[Waiter]]:
        """On one node, the ack and slot scripts go in one pipelined round trip."""
        if self._cluster or not items or not held:
            return super().ack_releasing(items, held, ledger)
        groups, calls = self._ack_calls(items, ledger)
        limits, release_calls = self._release_calls(held)
        replies = self._run_scripts(calls + release_calls)
        acked = self._ack_results(len(items), groups, replies[: len(calls)])
        return acked, self._released(limits, replies[len(calls) :])

    def _ack_calls(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        ledger: Sequence[LedgerEntry | None],
    ) -> tuple[dict[tuple[str, int], list[int]], list[tuple[str, list[str], list[Any]]]]:
        """One ``ack`` script call per shard: its keys (the shard's, then the ledger of
        each item with an entry) and its arguments."""
        groups: dict[tuple[str, int], list[int]] = {}
        for index, (claim, _) in enumerate(items):
            groups.setdefault(self._claim_shard(claim), []).append(index)
        calls = []
        for (queue, shard), indexes in groups.items():
            keys = self._shard_keys(queue, shard)
            args: list[Any] = [len(indexes)]
            for i in indexes:
                claim, nxt = items[i]
                if nxt is None:
                    args += [claim.id, claim.token, 0]
                else:
                    args += [claim.id, claim.token, 1, *self._next_args(nxt)]
                entry = ledger[i] if i < len(ledger) else None
                args += self._ledger_args(entry)
                if entry is not None and entry.records:
                    keys.append(self._ledger_key(queue, shard, entry.subject))
            calls.append(("ack", keys, args))
        return groups, calls

    @staticmethod
    def _ack_results(
        count: int, groups: dict[tuple[str, int], list[int]], replies: list[Any]
    ) -> list[bool]:
        results = [False] * count
        for indexes, reply in zip(groups.values(), replies, strict=True):
            for i, ok in zip(indexes, reply, strict=True):
                results[i] = bool(ok)
        return results

    def retry(
        self, claim: Claim, due_ms: int, error: str, ledger: LedgerEntry | None = None
    ) -> bool:
        queue, shard = self._claim_shard(claim)
        keys = self._shard_keys(queue, shard)
        if ledger is not None and ledger.records:
            keys.append(self._ledger_key(queue, shard, ledger.subject))
        args = [claim.id, claim.token, due_ms, error, *self._ledger_args(ledger)]
        return bool(self._script("retry", keys, args))

    def release(self, claims: Iterable[Claim], due_ms: int | None = None) -> int:
        calls = []
        for (queue, shard), group in self._by_shard(claims).items():
            args: list[Any] = [len(group), -1 if due_ms is None else due_ms]
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
