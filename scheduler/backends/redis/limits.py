"""The Redis backend's concurrency limits: each limit's keys share one hash tag
``{prefix:limit:NAME}`` (one cluster slot): ``:h`` holders (id -> lease end), ``:w``
waiters (queue, key and id -> place in line), ``:q`` the line's counter. A slot step
is one ``slot_*`` script on those keys; waking a waiter is one ``wake`` script on its
message's shard. On one node the calls of a batch are pipelined (one round trip); on a
cluster they go one by one, as the keys live in different slots."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tickwork.scheduler.backends.records import SlotRequest, Waiter
from tickwork.scheduler.backends.redis.shards import RedisShards
from tickwork.scheduler.backends.roles import Limits


class RedisLimits(Limits):
    """Slots and waiters of concurrency limits."""

    def __init__(self, store: RedisShards) -> None:
        self._store = store

    def _limit_keys(self, limit: str) -> list[str]:
        tag = f"{{{self._store.prefix}:limit:{limit}}}"
        return [f"{tag}:h", f"{tag}:w", f"{tag}:q"]

    def acquire(self, requests: Sequence[SlotRequest]) -> list[int | None]:
        calls: list[tuple[str, list[str], list[Any]]] = []
        groups = self._store.calls_by_limit([r.limit for r in requests])
        for indexes in groups:
            keys, args = [], []
            for i in indexes:
                r = requests[i]
                keys += self._limit_keys(r.limit)[:2]
                args += [r.message_id, r.capacity, r.lease_ms, _member(r)]
            calls.append(("slot_acquire", keys, args))
        answers: list[int | None] = [None] * len(requests)
        for indexes, found in zip(groups, self._store.run_scripts(calls), strict=True):
            for i, answer in zip(indexes, found, strict=True):
                answers[i] = None if int(answer) < 0 else int(answer)
        return answers

    def wait(self, request: SlotRequest) -> bool:
        member = _member(request)
        answer = self._store.script(
            "slot_wait", self._limit_keys(request.limit), [member, request.capacity]
        )
        return bool(int(answer))

    def release(self, held: Sequence[tuple[str, str]]) -> list[Waiter]:
        limits, calls = self.release_calls(held)
        return self.released(limits, self._store.run_scripts(calls))

    def release_calls(
        self, held: Sequence[tuple[str, str]]
    ) -> tuple[list[str], list[tuple[str, list[str], list[Any]]]]:
        """The limits of ``held`` (in order) and the ``slot_release`` calls for them."""
        by_limit: dict[str, list[str]] = {}
        for limit, message_id in held:
            by_limit.setdefault(limit, []).append(message_id)
        limits = list(by_limit)
        calls: list[tuple[str, list[str], list[Any]]] = []
        for indexes in self._store.calls_by_limit(limits):
            keys: list[str] = []
            args: list[Any] = []
            for i in indexes:
                keys += self._limit_keys(limits[i])[:2]
                args += [len(by_limit[limits[i]]), *by_limit[limits[i]]]
            calls.append(("slot_release", keys, args))
        return limits, calls

    def released(self, limits: list[str], replies: list[Any]) -> list[Waiter]:
        """The waiters the ``slot_release`` calls for ``limits`` took off their lines."""
        waiters: list[Waiter] = []
        for indexes, popped in zip(self._store.calls_by_limit(limits), replies, strict=True):
            for i, members in zip(indexes, popped, strict=True):
                waiters += [_waiter(limits[i], member) for member in members]
        return waiters

    def pop_waiters(self, limit: str, count: int) -> list[Waiter]:
        popped = self._store.call(self._store.client.zpopmin, self._limit_keys(limit)[1], count)
        return [_waiter(limit, member) for member, _ in popped]

    def extend(self, held: Sequence[tuple[str, str]], lease_ms: int) -> None:
        by_limit: dict[str, list[str]] = {}
        for limit, message_id in held:
            by_limit.setdefault(limit, []).append(message_id)
        self._store.run_scripts(
            [
                ("slot_extend", self._limit_keys(limit)[:1], [lease_ms, *ids])
                for limit, ids in by_limit.items()
            ]
        )

    def wake(self, waiters: Sequence[Waiter]) -> list[bool]:
        groups: dict[tuple[str, int], list[int]] = {}
        for index, waiter in enumerate(waiters):
            shard = self._store.shard_for(waiter.queue, waiter.message_id, waiter.key)
            groups.setdefault((waiter.queue, shard), []).append(index)
        calls = [
            (queue, shard, [len(indexes), *(waiters[i].message_id for i in indexes)])
            for (queue, shard), indexes in groups.items()
        ]
        woken = [False] * len(waiters)
        for indexes, answer in zip(
            groups.values(), self._store.run_many("wake", calls), strict=True
        ):
            for index, flag in zip(indexes, answer, strict=True):
                woken[index] = bool(int(flag))
        return woken

    def usage(self, limits: Sequence[str]) -> dict[str, tuple[int, int]]:
        now = self._store.now_ms()
        usage: dict[str, tuple[int, int]] = {}
        for limit in limits:
            holders, waiters, _ = self._limit_keys(limit)
            held = self._store.call(self._store.client.zcount, holders, f"({now}", "+inf")
            waiting = self._store.call(self._store.client.zcard, waiters)
            usage[limit] = (int(held), int(waiting))
        return usage


def _member(request: SlotRequest) -> str:
    """How a waiting message is named in its limit's line: queue, key (empty for none:
    keys are never empty) and id, joined by the unit separator."""
    return f"{request.queue}\x1f{request.key or ''}\x1f{request.message_id}"


def _waiter(limit: str, member: bytes) -> Waiter:
    queue, rest = member.decode().split("\x1f", 1)
    key, message_id = rest.rsplit("\x1f", 1)
    return Waiter(limit, queue, key or None, message_id)
