"""The Redis backend's messages: enqueue (one ``enqueue`` script call per shard, one
round trip per batch), reads and cancels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tickwork.scheduler.backends.redis.scripts import (
    encode_record,
    priority_arg,
    raise_errors,
)
from tickwork.scheduler.backends.redis.shards import RedisShards
from tickwork.scheduler.backends.roles import Messages
from tickwork.scheduler.backends.values import (
    Envelope,
    OnConflict,
    Outcome,
    StoredMessage,
)
from tickwork.scheduler.errors import KeyConflict
from tickwork.scheduler.ids import stable_shard

_OUTCOMES = {outcome.value.encode(): outcome for outcome in Outcome}

#: how many times a read by key follows a moving holder before it gives up
REREADS = 20

#: how many keyed messages one pipelined read asks for (``keyed`` reads them in chunks)
READ_CHUNK = 500


class RedisMessages(Messages):
    """Stores, reads and cancels messages."""

    def __init__(self, store: RedisShards) -> None:
        self._store = store

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
        return self._enqueue_outcomes(envelopes, groups, self._store.run_many("enqueue", calls))

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
        wire = self._store.loop_wire
        if (
            wire is not None
            and envelopes
            and all(e.queue in self._store.shard_counts for e in envelopes)
        ):
            groups = self._enqueue_groups(envelopes)
            if on_conflict is not OnConflict.ERROR or len(groups) == 1:
                calls = [
                    ("enqueue", self._store.shard_keys(queue, shard), args)
                    for queue, shard, args in self._enqueue_calls(
                        envelopes, groups, on_conflict, bounded
                    )
                ]
                replies = await wire.scripts(self._store.scripts, calls)
                if replies is not None:
                    return self._enqueue_outcomes(envelopes, groups, raise_errors(replies))
        return await Messages.aenqueue(self, envelopes, on_conflict, bounded)

    def _enqueue_groups(self, envelopes: Sequence[Envelope]) -> dict[tuple[str, int], list[int]]:
        """The indexes of ``envelopes`` by the (queue, shard) each is written in."""
        groups: dict[tuple[str, int], list[int]] = {}
        for index, e in enumerate(envelopes):
            shard = self._store.shard_for(e.queue, e.id, e.key)
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
                args += [e.id, e.key or "", priority_arg(e), e.due_ms, encode_record(e)]
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
        holders = self._store.pipelined(
            [
                (
                    self._store.shard_keys(e.queue, self._store.shard_for(e.queue, e.id, e.key))[7],
                    e.key,
                )
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
        where = self._store.locate(message_id, queue)
        return None if where is None else self._store.read(where[0], where[1], message_id)

    def get_by_key(self, queue: str, key: str) -> StoredMessage | None:
        # two reads: the key's holder, then the message; an ack between them replaces the
        # message, so a miss is read again while the holder keeps changing (bounded)
        shard = stable_shard(key, self._store.shard_count(queue))
        keys_hash = self._store.shard_keys(queue, shard)[7]
        holder = self._store.call(self._store.client.hget, keys_hash, key)
        for _ in range(REREADS):
            if holder is None:
                return None
            found = self._store.read(queue, shard, holder.decode())
            if found is not None:
                return found
            again = self._store.call(self._store.client.hget, keys_hash, key)
            if again == holder:
                return None
            holder = again
        return None

    def delete(self, message_id: str, queue: str | None = None) -> bool:
        where = self._store.locate(message_id, queue)
        return where is not None and bool(
            self._store.run("delete", where[0], where[1], [message_id])
        )

    def delete_by_key(self, queue: str, key: str) -> bool:
        shard = stable_shard(key, self._store.shard_count(queue))
        return bool(self._store.run("delete_by_key", queue, shard, [key]))

    def keyed(self, queue: str | None = None) -> list[StoredMessage]:
        found: list[StoredMessage] = []
        for name in [queue] if queue is not None else self._store.queues():
            for shard in range(self._store.shard_count(name)):
                holders = self._store.call(
                    self._store.client.hgetall, self._store.shard_keys(name, shard)[7]
                )
                ids = [holders[key].decode() for key in sorted(holders)]
                for start in range(0, len(ids), READ_CHUNK):
                    chunk = ids[start : start + READ_CHUNK]
                    found.extend(
                        stored
                        for stored in self._store.read_many(name, shard, chunk)
                        if stored is not None
                    )
        return found
