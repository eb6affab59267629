"""The Redis backend's occurrence ledger: per subject, a list in the hash tag of the shard
that wrote it (``S:h:{subject}``), newest record first, each stored as
``written_ms|expires_ms|record``; a push moves its expiry to ``ttl_ms`` ahead, and trims
it to ``keep`` once it holds an eighth more (reads take the newest ``limit``).

A run writes its entry inside the shard's ``ack``, ``retry`` or ``poison`` script (the same
atomic step, no extra round trip). A keyed schedule lives in one shard, so its ledger is
one list; a subject written from several shards (a schedule's manual runs, which live
where their own ids put them) has one list per shard, and a read merges them by time."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from scheduler.backends.records import LedgerEntry
from scheduler.backends.redis.shards import RedisShards
from scheduler.ids import stable_shard


class RedisLedger(RedisShards):
    """The ledger operations of the contract."""

    def append_ledger(self, entries: Sequence[LedgerEntry]) -> None:
        calls = []
        for entry in entries:
            if not entry.records:
                continue
            shard = stable_shard(entry.subject, self.shard_count(entry.queue))
            key = self._ledger_key(entry.queue, shard, entry.subject)
            calls.append(("ledger_append", [key], self._ledger_args(entry)))
        self._run_scripts(calls)

    def read_ledger(self, queue: str, subject: str, limit: int = 100) -> list[bytes]:
        if limit <= 0:
            return []
        now = self.now_ms()
        keys = [self._ledger_key(queue, s, subject) for s in range(self.shard_count(queue))]
        lists = self._pipelined([(key, 0, limit - 1) for key in keys], "lrange")
        found: list[tuple[int, bytes]] = []
        for items in lists:
            for item in items:
                written, expires, record = bytes(item).split(b"|", 2)
                if int(expires) > now:
                    found.append((int(written), record))
        # each list is newest first: merge them by write time (stable within a list)
        newest = heapq.nlargest(limit, found, key=lambda pair: pair[0])
        return [record for _, record in newest]
