"""The Redis backend's occurrence ledger: per subject, a list in the hash tag of the shard
that wrote it (``S:h:{subject}``), newest record first, each stored as
``written_ms|expires_ms|record``; a push moves its expiry to ``ttl_ms`` ahead, and trims
it to ``keep`` once it holds an eighth more (reads take the newest ``limit``).

A run writes its entry inside the shard's ``ack``, ``retry`` or ``poison`` script (the same
atomic step, no extra round trip); entries written alone go in one script call per
shard. A keyed schedule lives in one shard, so its ledger is one list; a subject
written from several shards (a schedule's manual runs, which live where their own ids
put them) has one list per shard, and a read merges them by time."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from tickwork.scheduler.backends.records import LedgerEntry
from tickwork.scheduler.backends.redis.shards import RedisShards
from tickwork.scheduler.backends.roles import Ledger
from tickwork.scheduler.ids import stable_shard


class RedisLedger(Ledger):
    """The ledger operations of the contract."""

    def __init__(self, store: RedisShards) -> None:
        self._store = store

    def append(self, entries: Sequence[LedgerEntry]) -> None:
        """One script call per shard written (its entries in order)."""
        calls: dict[tuple[str, int], tuple[list[str], list[Any]]] = {}
        for entry in entries:
            if not entry.records:
                continue
            shard = stable_shard(entry.subject, self._store.shard_count(entry.queue))
            keys, args = calls.setdefault((entry.queue, shard), ([], []))
            keys.append(self._store.ledger_key(entry.queue, shard, entry.subject))
            args += self._store.ledger_args(entry)
        self._store.run_scripts([("ledger_append", keys, args) for keys, args in calls.values()])

    def read(self, queue: str, subject: str, limit: int = 100) -> list[bytes]:
        return self.read_many([(queue, subject)], limit)[0]

    def read_many(self, subjects: Sequence[tuple[str, str]], limit: int = 100) -> list[list[bytes]]:
        """Every list of every subject (one per shard of its queue) in one pipeline."""
        if limit <= 0 or not subjects:
            return [[] for _ in subjects]
        now = self._store.now_ms()
        keys = [
            [
                self._store.ledger_key(queue, shard, subject)
                for shard in range(self._store.shard_count(queue))
            ]
            for queue, subject in subjects
        ]
        lists = iter(
            self._store.pipelined([(k, 0, limit - 1) for ks in keys for k in ks], "lrange")
        )
        return [_newest([next(lists) for _ in ks], now, limit) for ks in keys]


def _newest(lists: list[list[bytes]], now: int, limit: int) -> list[bytes]:
    """The newest ``limit`` live records of one subject's lists (each newest first), merged
    by write time (stable within a list)."""
    found: list[tuple[int, bytes]] = []
    for items in lists:
        for item in items:
            written, expires, record = bytes(item).split(b"|", 2)
            if int(expires) > now:
                found.append((int(written), record))
    newest = heapq.nlargest(limit, found, key=lambda pair: pair[0])
    return [record for _, record in newest]
