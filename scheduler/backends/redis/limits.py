"""The Redis backend's concurrency limits: each limit's keys share one hash tag
``{prefix:limit:NAME}`` (one cluster slot): ``:h`` holders (id -> lease end), ``:w``
waiters (a JSON [queue, key, id] -> place in line), ``:q`` the line's counter. A slot step
is one ``slot_*`` script on those keys; waking a waiter is one ``wake`` script on its
message's shard. On one node the calls of a batch are pipelined (one round trip); on a
cluster they go one by one, as the keys live in different slots."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from scheduler.backends.base import SlotRequest, Waiter
from scheduler.backends.redis.shards import RedisShards


class RedisLimits(RedisShards):
    """Slots and waiters of concurrency limits."""

    def _limit_keys(self, limit: str) -> list[str]:
        tag = f"{{{self._prefix}:limit:{limit}}}"
        return [f"{tag}:h", f"{tag}:w", f"{tag}:q"]

    def _run_scripts(self, calls: list[tuple[str, list[str], list[Any]]]) -> list[Any]:
        """Run (script, keys, args) calls: pipelined on one node, one by one on a cluster."""
        if not calls:
            return []
        if self._cluster or len(calls) == 1:
            return [
                self._call(self._scripts[name], keys=keys, args=args) for name, keys, args in calls
            ]

        def pipelined() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            for name, keys, args in calls:
                self._scripts[name](keys=keys, args=args, client=pipe)
            return list(pipe.execute())

        return self._call(pipelined)

    def acquire_slots(self, requests: Sequence[SlotRequest]) -> list[int | None]:
        answers = self._run_scripts(
            [
                (
                    "slot_acquire",
                    self._limit_keys(r.limit)[:1],
                    [r.message_id, r.capacity, r.lease_ms],
                )
                for r in requests
            ]
        )
        return [None if int(a) < 0 else int(a) for a in answers]

    def wait_for_slot(self, request: SlotRequest) -> bool:
        member = json.dumps([request.queue, request.key, request.message_id])
        answer = self._call(
            self._scripts["slot_wait"],
            keys=self._limit_keys(request.limit),
            args=[member, request.capacity],
        )
        return bool(int(answer))

    def release_slots(self, held: Sequence[tuple[str, str]]) -> list[Waiter]:
        by_limit: dict[str, list[str]] = {}
        for limit, message_id in held:
            by_limit.setdefault(limit, []).append(message_id)
        answers = self._run_scripts(
            [("slot_release", self._limit_keys(limit)[:2], ids) for limit, ids in by_limit.items()]
        )
        return [
            Waiter(limit, *json.loads(member))
            for limit, popped in zip(by_limit, answers, strict=True)
            for member in popped
        ]

    def pop_waiters(self, limit: str, count: int) -> list[Waiter]:
        popped = self._call(self._client.zpopmin, self._limit_keys(limit)[1], count)
        return [Waiter(limit, *json.loads(member)) for member, _ in popped]

    def extend_slots(self, held: Sequence[tuple[str, str]], lease_ms: int) -> None:
        by_limit: dict[str, list[str]] = {}
        for limit, message_id in held:
            by_limit.setdefault(limit, []).append(message_id)
        self._run_scripts(
            [
                ("slot_extend", self._limit_keys(limit)[:1], [lease_ms, *ids])
                for limit, ids in by_limit.items()
            ]
        )

    def wake(self, waiters: Sequence[Waiter]) -> list[bool]:
        groups: dict[tuple[str, int], list[int]] = {}
        for index, waiter in enumerate(waiters):
            shard = self._shard_for(waiter.queue, waiter.message_id, waiter.key)
            groups.setdefault((waiter.queue, shard), []).append(index)
        calls = [
            (queue, shard, [len(indexes), *(waiters[i].message_id for i in indexes)])
            for (queue, shard), indexes in groups.items()
        ]
        woken = [False] * len(waiters)
        for indexes, answer in zip(groups.values(), self._run_many("wake", calls), strict=True):
            for index, flag in zip(indexes, answer, strict=True):
                woken[index] = bool(int(flag))
        return woken

    def limit_usage(self, limits: Sequence[str]) -> dict[str, tuple[int, int]]:
        now = self.now_ms()
        usage: dict[str, tuple[int, int]] = {}
        for limit in limits:
            holders, waiters, _ = self._limit_keys(limit)
            held = self._call(self._client.zcount, holders, f"({now}", "+inf")
            waiting = self._call(self._client.zcard, waiters)
            usage[limit] = (int(held), int(waiting))
        return usage
