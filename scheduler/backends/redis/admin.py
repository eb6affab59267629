"""The Redis backend's operator roles: the poison queue, queues (stats, counters, pause,
bounds, purge) and abort requests."""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from typing import Any

from tickwork.scheduler.backends.records import AbortRequest, Failure, QueueStats
from tickwork.scheduler.backends.redis.scripts import (
    BOUND,
    COUNTERS,
    FAIR_STATE,
    stored_envelope,
)
from tickwork.scheduler.backends.redis.shards import RedisShards
from tickwork.scheduler.backends.roles import Aborts, PoisonStore, QueueAdmin
from tickwork.scheduler.backends.values import PoisonRecord
from tickwork.scheduler.errors import ConfigurationError


def shares(max_pending: int, shards: int) -> list[int]:
    """``max_pending`` split over ``shards`` as evenly as whole numbers go (summing to it)."""
    each, extra = divmod(max_pending, shards)
    return [each + (1 if shard < extra else 0) for shard in range(shards)]


_WEIGHT = b"fair_w|"  # a fair-share key's weight in a shard's counters hash


class RedisPoison(PoisonStore):
    """The poison queue: reading, replaying, purging."""

    def __init__(self, store: RedisShards) -> None:
        self._store = store

    def _poison_records(self, queue: str, shard: int, ids: list[bytes]) -> list[PoisonRecord]:
        keys = self._store.shard_keys(queue, shard)
        if not ids:
            return []
        records = self._store.call(self._store.client.hmget, keys[8], ids)
        failures = self._store.call(self._store.client.hmget, keys[9], ids)
        found = []
        for message_id, record, failure in zip(ids, records, failures, strict=True):
            if record is None or failure is None:
                continue
            attempts, failed_ms, details = failure.split(b"|", 2)
            data = json.loads(details)
            envelope = stored_envelope(message_id.decode(), queue, record)
            found.append(
                PoisonRecord(
                    envelope,
                    Failure(data["reason"], data["error_type"], data["message"], data["traceback"]),
                    int(attempts),
                    int(failed_ms),
                )
            )
        return found

    def list(self, queue: str | None = None, limit: int = 100) -> builtins.list[PoisonRecord]:
        found: list[PoisonRecord] = []
        for name in [queue] if queue is not None else self._store.queues():
            for shard in range(self._store.shard_count(name)):
                ids = self._store.call(
                    self._store.client.zrange, self._store.shard_keys(name, shard)[10], 0, limit - 1
                )
                found += self._poison_records(name, shard, ids)
        found.sort(key=lambda r: (r.failed_at_ms, r.envelope.id))
        return found[:limit]

    def get(self, message_id: str) -> PoisonRecord | None:
        for name in self._store.queues():
            for shard in range(self._store.shard_count(name)):
                records = self._poison_records(name, shard, [message_id.encode()])
                if records:
                    return records[0]
        return None

    def replay(self, ids: Sequence[str] | None = None, queue: str | None = None) -> int:
        moved = 0
        for name in [queue] if queue is not None else self._store.queues():
            for shard in range(self._store.shard_count(name)):
                args = ["all"] if ids is None else ["ids", *ids]
                moved += int(self._store.run("poison_replay", name, shard, args))
        return moved

    def purge(self, queue: str | None = None, ids: Sequence[str] | None = None) -> int:
        purged = 0
        for name in [queue] if queue is not None else self._store.queues():
            for shard in range(self._store.shard_count(name)):
                if ids is not None:
                    purged += int(self._store.run("poison_delete", name, shard, list(ids)))
                    continue
                keys = self._store.shard_keys(name, shard)
                purged += int(self._store.call(self._store.client.zcard, keys[10]))
                for key in keys[8:11]:
                    self._store.call(self._store.client.delete, key)
        return purged


class RedisQueues(QueueAdmin):
    """Counting, pausing, bounding and purging queues."""

    def __init__(self, store: RedisShards) -> None:
        self._store = store

    def names(self) -> list[str]:
        return self._store.queues()

    def stats(self, queue: str | None = None) -> list[QueueStats]:
        now = self._store.now_ms()
        result = []
        paused = set(self.paused())
        bounds = self.bounds()
        for name in [queue] if queue is not None else self._store.queues():
            shards = self._store.shard_count(name)

            def run(name: str = name, shards: int = shards) -> list[Any]:
                pipe = self._store.client.pipeline(transaction=False)
                for shard in range(shards):
                    keys = self._store.shard_keys(name, shard)
                    s, r, l_ = keys[1:4]
                    pipe.zcard(r)
                    pipe.zcount(s, "-inf", now)
                    pipe.zcard(s)
                    pipe.zcard(l_)
                    pipe.zcard(keys[10])
                    pipe.zrange(s, 0, 0, withscores=True)
                    pipe.hgetall(keys[11])
                return list(pipe.execute())

            replies = self._store.call(run)
            ready = scheduled = in_flight = poison = 0
            next_due: int | None = None
            counters: dict[str, int] = {}
            per_shard: dict[int, int] = {}
            # the due time of each shard's oldest ready message, all shards in one round
            # trip on a single node (now where only fair ones wait: their age is unknown)
            holding = [shard for shard in range(shards) if replies[shard * 7]]
            ages = self._store.run_scripts(
                [("oldest_ready", self._store.shard_keys(name, s), []) for s in holding]
            )
            for oldest in ages:
                due = now if oldest is None else int(oldest)
                next_due = due if next_due is None else min(next_due, due)
            for shard in range(shards):
                r_count, s_due, s_count, l_count, p_count, first, counts = replies[
                    shard * 7 : shard * 7 + 7
                ]
                ready += r_count + s_due
                scheduled += s_count - s_due
                in_flight += l_count
                poison += p_count
                per_shard[shard] = r_count + s_count + l_count
                if first:
                    due = int(first[0][1])
                    next_due = due if next_due is None else min(next_due, due)
                for counter, value in counts.items():
                    if not counter.startswith(FAIR_STATE):
                        counters[counter.decode()] = counters.get(counter.decode(), 0) + int(value)
            result.append(
                QueueStats(
                    name,
                    ready,
                    scheduled,
                    in_flight,
                    poison,
                    next_due,
                    counters,
                    per_shard,
                    name in paused,
                    bounds.get(name),
                )
            )
        return result

    def pause(self, queue: str) -> bool:
        self._store.shard_count(queue)  # registers the queue, so it is listed while empty
        return bool(self._store.call(self._store.client.sadd, self._store.paused_key(), queue))

    def resume(self, queue: str) -> bool:
        return bool(self._store.call(self._store.client.srem, self._store.paused_key(), queue))

    def paused(self) -> list[str]:
        members = self._store.call(self._store.client.smembers, self._store.paused_key())
        return sorted(m.decode() for m in members)

    # bounds: the queue's max_pending in one hash (for listing), and each shard's share of
    # it beside the shard's messages (the enqueue script compares it with HLEN of m)

    def set_bound(self, queue: str, max_pending: int | None) -> None:
        shards = self._store.shard_count(queue)  # registers the queue, so it is listed while empty
        if max_pending is None:
            self._store.call(self._store.client.hdel, self._store.bounds_key(), queue)
            for shard in range(shards):
                self._store.call(
                    self._store.client.delete, self._store.shard_keys(queue, shard)[BOUND]
                )
            return
        if max_pending < shards:
            raise ConfigurationError(
                f"max_pending of {queue!r} must be at least its {shards} shards (each shard "
                f"holds an equal share of the bound), not {max_pending}"
            )
        for shard, share in enumerate(shares(max_pending, shards)):
            self._store.call(
                self._store.client.set, self._store.shard_keys(queue, shard)[BOUND], share
            )
        self._store.call(self._store.client.hset, self._store.bounds_key(), queue, max_pending)

    def set_fair_weight(self, queue: str, fair: str, weight: int | None) -> None:
        """Stored in each shard's counters hash (``fair_w|KEY``, with ``fair_weighted``
        while any is set, so a claim of a queue without weights reads none)."""
        field = f"fair_w|{fair}"
        client = self._store.client
        for shard in range(self._store.shard_count(queue)):
            counters = self._store.shard_keys(queue, shard)[COUNTERS]
            if weight is None or weight == 1:
                self._store.call(client.hdel, counters, field)
                fields = self._store.call(client.hkeys, counters)
                if not any(name.startswith(_WEIGHT) for name in fields):
                    self._store.call(client.hdel, counters, "fair_weighted")
            else:
                self._store.call(client.hset, counters, mapping={field: weight, "fair_weighted": 1})

    def fair_weights(self, queue: str) -> dict[str, int]:
        counters = self._store.shard_keys(queue, 0)[COUNTERS]
        found: dict[bytes, bytes] = self._store.call(self._store.client.hgetall, counters)
        return {
            name[len(_WEIGHT) :].decode(): int(value)
            for name, value in sorted(found.items())
            if name.startswith(_WEIGHT)
        }

    def bounds(self) -> dict[str, int]:
        found = self._store.call(self._store.client.hgetall, self._store.bounds_key())
        return {name.decode(): int(value) for name, value in sorted(found.items())}

    # abort requests: one hash, message id -> JSON; expired entries are skipped on read and
    # dropped by the next request (a hash field cannot carry its own TTL before Redis 7.4)

    def add_counters(self, queue: str, deltas: dict[str, int]) -> None:
        key = self._store.shard_keys(queue, 0)[11]
        for name, delta in deltas.items():
            if delta:
                self._store.call(self._store.client.hincrby, key, name, delta)

    def purge(self, queue: str) -> int:
        removed = 0
        for shard in range(self._store.shard_count(queue)):
            keys = self._store.shard_keys(queue, shard)
            removed += int(self._store.call(self._store.client.hlen, keys[0]))
            for key in keys[:8]:
                self._store.call(self._store.client.delete, key)
        return removed


class RedisAborts(Aborts):
    """Requests to abort running messages."""

    def __init__(self, store: RedisShards) -> None:
        self._store = store

    def request(self, request: AbortRequest) -> None:
        key = self._store.aborts_key()
        now = self._store.now_ms()
        expired = [field for field, req in self._read_aborts() if req.expires_ms <= now]
        if expired:
            self._store.call(self._store.client.hdel, key, *expired)
        value = json.dumps(
            [request.queue, request.continue_chain, request.requested_ms, request.expires_ms]
        )
        self._store.call(self._store.client.hset, key, request.message_id, value)

    def pending(self) -> list[AbortRequest]:
        found = self._read_aborts()
        if not found:  # the usual answer: one round trip
            return []
        now = self._store.now_ms()
        return sorted(
            (req for _, req in found if req.expires_ms > now), key=lambda req: req.message_id
        )

    def _read_aborts(self) -> list[tuple[bytes, AbortRequest]]:
        found = []
        for field, value in self._store.call(
            self._store.client.hgetall, self._store.aborts_key()
        ).items():
            queue, continue_chain, requested_ms, expires_ms = json.loads(value)
            request = AbortRequest(
                field.decode(), queue, bool(continue_chain), requested_ms, expires_ms
            )
            found.append((field, request))
        return found

    def clear(self, message_ids: Sequence[str]) -> int:
        if not message_ids:
            return 0
        return int(
            self._store.call(self._store.client.hdel, self._store.aborts_key(), *message_ids)
        )
