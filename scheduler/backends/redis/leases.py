"""The Redis backend's leases: claims rotate over a queue's shards (one ``claim``
script call each); acks, retries, releases and poisons are one script call per shard,
fenced by the claim's token."""

from __future__ import annotations

import itertools
import json
import random
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from tickwork.scheduler.backends.records import Failure, LedgerEntry, Waiter
from tickwork.scheduler.backends.redis.limits import RedisLimits
from tickwork.scheduler.backends.redis.shards import RedisShards
from tickwork.scheduler.backends.roles import Leases
from tickwork.scheduler.backends.values import (
    Claim,
    ClaimBatch,
    Envelope,
)


class RedisLeases(Leases):
    """Claims and their settling."""

    def __init__(self, store: RedisShards, limits: RedisLimits) -> None:
        self._store = store
        self._limits = limits

    def _shard_cycle(self, queue: str) -> Iterator[int]:
        with self._store.lock:
            cycle = self._store.cursor.get(queue)
            if cycle is None:
                count = self._store.shard_count(queue)
                start = random.randrange(count)
                cycle = itertools.cycle([(start + i) % count for i in range(count)])
                self._store.cursor[queue] = cycle
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
        for _ in range(self._store.shard_count(queue)):
            with self._store.lock:
                shard = next(cycle)
            token = secrets.token_hex(8)
            wanted = limit - len(found)
            args = [wanted, lookahead_ms, token, self._store.sweep, *extra]
            reply = self._store.run("claim", queue, shard, args)
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
        if not slots or self._store.cluster:
            return []
        pairs = [value for name, capacity in slots.items() for value in (name, capacity)]
        return [queue, f"{{{self._store.prefix}:limit:", *pairs]

    def ack(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> list[bool]:
        if not items:
            return []
        groups, calls = self._ack_calls(items, ledger)
        return self._ack_results(len(items), groups, self._store.run_scripts(calls))

    def ack_releasing(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        held: Sequence[tuple[str, str]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> tuple[list[bool], list[Waiter]]:
        """On one node, the ack and slot scripts go in one pipelined round trip."""
        if self._store.cluster or not items or not held:
            return self.ack(items, ledger), self._limits.release(held) if held else []
        groups, calls = self._ack_calls(items, ledger)
        limits, release_calls = self._limits.release_calls(held)
        replies = self._store.run_scripts(calls + release_calls)
        acked = self._ack_results(len(items), groups, replies[: len(calls)])
        return acked, self._limits.released(limits, replies[len(calls) :])

    def _ack_calls(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        ledger: Sequence[LedgerEntry | None],
    ) -> tuple[dict[tuple[str, int], list[int]], list[tuple[str, list[str], list[Any]]]]:
        """One ``ack`` script call per shard: its keys (the shard's, then the ledger of
        each item with an entry) and its arguments."""
        groups: dict[tuple[str, int], list[int]] = {}
        for index, (claim, _) in enumerate(items):
            groups.setdefault(self._store.claim_shard(claim), []).append(index)
        calls = []
        for (queue, shard), indexes in groups.items():
            keys = self._store.shard_keys(queue, shard)
            args: list[Any] = [len(indexes)]
            for i in indexes:
                claim, nxt = items[i]
                keyed = 0 if claim.key is None else 1
                if nxt is None:
                    args += [claim.id, claim.token, keyed, 0]
                else:
                    args += [claim.id, claim.token, keyed, 1, *self._store.next_args(nxt)]
                entry = ledger[i] if i < len(ledger) else None
                args += self._store.ledger_args(entry)
                if entry is not None and entry.records:
                    keys.append(self._store.ledger_key(queue, shard, entry.subject))
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
        queue, shard = self._store.claim_shard(claim)
        keys = self._store.shard_keys(queue, shard)
        if ledger is not None and ledger.records:
            keys.append(self._store.ledger_key(queue, shard, ledger.subject))
        args = [claim.id, claim.token, due_ms, error, *self._store.ledger_args(ledger)]
        return bool(self._store.script("retry", keys, args))

    def release(self, claims: Iterable[Claim], due_ms: int | None = None) -> int:
        calls = []
        for (queue, shard), group in self._store.by_shard(claims).items():
            args: list[Any] = [len(group), -1 if due_ms is None else due_ms]
            for claim in group:
                args += [claim.id, claim.token]
            calls.append((queue, shard, args))
        return sum(int(r) for r in self._store.run_many("release", calls))

    def extend(self, claims: Sequence[Claim], lease_ms: int) -> list[bool]:
        groups: dict[tuple[str, int], list[int]] = {}
        for index, claim in enumerate(claims):
            groups.setdefault(self._store.claim_shard(claim), []).append(index)
        calls = []
        for (queue, shard), indexes in groups.items():
            args: list[Any] = [lease_ms, len(indexes)]
            for i in indexes:
                args += [claims[i].id, claims[i].token]
            calls.append((queue, shard, args))
        results = [False] * len(claims)
        for (_, indexes), reply in zip(
            groups.items(), self._store.run_many("extend", calls), strict=True
        ):
            for i, ok in zip(indexes, reply, strict=True):
                results[i] = bool(ok)
        return results

    def requeue_expired(self, queue: str) -> int:
        before = self._store.counter_total(queue, "redelivered")
        for shard in range(self._store.shard_count(queue)):
            self._store.run("claim", queue, shard, [0, 0, "", self._store.sweep])
        return self._store.counter_total(queue, "redelivered") - before

    def poison(
        self,
        claim: Claim,
        failure: Failure,
        next_occurrence: Envelope | None = None,
        ledger: LedgerEntry | None = None,
    ) -> bool:
        queue, shard = self._store.claim_shard(claim)
        payload = json.dumps(
            {
                "reason": failure.reason,
                "error_type": failure.error_type,
                "message": failure.message,
                "traceback": failure.traceback,
            }
        )
        args = [claim.id, claim.token, payload, *self._store.next_args(next_occurrence)]
        keys = self._store.shard_keys(queue, shard)
        if ledger is not None and ledger.records:
            keys.append(self._store.ledger_key(queue, shard, ledger.subject))
        args += self._store.ledger_args(ledger)
        return bool(self._store.script("poison", keys, args))
