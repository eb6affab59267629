"""Redis operations off the hot path: lease expiry on demand, the poison queue, stats,
counters, paused queues, bounds of queues, abort requests and purge."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from scheduler.backends.base import Claim, Envelope, PoisonRecord
from scheduler.backends.records import AbortRequest, Failure, LedgerEntry, QueueStats
from scheduler.backends.redis.scripts import BOUND, FAIR_STATE, stored_envelope
from scheduler.backends.redis.shards import RedisShards
from scheduler.errors import ConfigurationError


def shares(max_pending: int, shards: int) -> list[int]:
    """``max_pending`` split over ``shards`` as evenly as whole numbers go (summing to it)."""
    each, extra = divmod(max_pending, shards)
    return [each + (1 if shard < extra else 0) for shard in range(shards)]


class RedisAdmin(RedisShards):
    """The poison queue and the operator's reads and writes of a Redis deployment."""

    def requeue_expired(self, queue: str) -> int:
        before = self._counter_total(queue, "redelivered")
        for shard in range(self.shard_count(queue)):
            self._run("claim", queue, shard, [0, 0, "", self._sweep])
        return self._counter_total(queue, "redelivered") - before

    def poison(
        self,
        claim: Claim,
        failure: Failure,
        next_occurrence: Envelope | None = None,
        ledger: LedgerEntry | None = None,
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
        keys = self._shard_keys(queue, shard)
        if ledger is not None and ledger.records:
            keys.append(self._ledger_key(queue, shard, ledger.subject))
        args += self._ledger_args(ledger)
        return bool(self._script("poison", keys, args))

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

    def poison_purge(self, queue: str | None = None, ids: Sequence[str] | None = None) -> int:
        purged = 0
        for name in [queue] if queue is not None else self.queues():
            for shard in range(self.shard_count(name)):
                if ids is not None:
                    purged += int(self._run("poison_delete", name, shard, list(ids)))
                    continue
                keys = self._shard_keys(name, shard)
                purged += int(self._call(self._client.zcard, keys[10]))
                for key in keys[8:11]:
                    self._call(self._client.delete, key)
        return purged

    def stats(self, queue: str | None = None) -> list[QueueStats]:
        now = self.now_ms()
        result = []
        paused = set(self.paused_queues())
        bounds = self.queue_bounds()
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

    def pause_queue(self, queue: str) -> bool:
        self.shard_count(queue)  # registers the queue, so it is listed while empty
        return bool(self._call(self._client.sadd, self._paused_key(), queue))

    def resume_queue(self, queue: str) -> bool:
        return bool(self._call(self._client.srem, self._paused_key(), queue))

    def paused_queues(self) -> list[str]:
        members = self._call(self._client.smembers, self._paused_key())
        return sorted(m.decode() for m in members)

    # bounds: the queue's max_pending in one hash (for listing), and each shard's share of
    # it beside the shard's messages (the enqueue script compares it with HLEN of m)

    def set_queue_bound(self, queue: str, max_pending: int | None) -> None:
        shards = self.shard_count(queue)  # registers the queue, so it is listed while empty
        if max_pending is None:
            self._call(self._client.hdel, self._bounds_key(), queue)
            for shard in range(shards):
                self._call(self._client.delete, self._shard_keys(queue, shard)[BOUND])
            return
        if max_pending < shards:
            raise ConfigurationError(
                f"max_pending of {queue!r} must be at least its {shards} shards (each shard "
                f"holds an equal share of the bound), not {max_pending}"
            )
        for shard, share in enumerate(shares(max_pending, shards)):
            self._call(self._client.set, self._shard_keys(queue, shard)[BOUND], share)
        self._call(self._client.hset, self._bounds_key(), queue, max_pending)

    def queue_bounds(self) -> dict[str, int]:
        found = self._call(self._client.hgetall, self._bounds_key())
        return {name.decode(): int(value) for name, value in sorted(found.items())}

    # abort requests: one hash, message id -> JSON; expired entries are skipped on read and
    # dropped by the next request (a hash field cannot carry its own TTL before Redis 7.4)

    def request_abort(self, request: AbortRequest) -> None:
        key = self._aborts_key()
        now = self.now_ms()
        expired = [field for field, req in self._read_aborts() if req.expires_ms <= now]
        if expired:
            self._call(self._client.hdel, key, *expired)
        value = json.dumps(
            [request.queue, request.continue_chain, request.requested_ms, request.expires_ms]
        )
        self._call(self._client.hset, key, request.message_id, value)

    def abort_requests(self) -> list[AbortRequest]:
        found = self._read_aborts()
        if not found:  # the usual answer: one round trip
            return []
        now = self.now_ms()
        return sorted(
            (req for _, req in found if req.expires_ms > now), key=lambda req: req.message_id
        )

    def _read_aborts(self) -> list[tuple[bytes, AbortRequest]]:
        found = []
        for field, value in self._call(self._client.hgetall, self._aborts_key()).items():
            queue, continue_chain, requested_ms, expires_ms = json.loads(value)
            request = AbortRequest(
                field.decode(), queue, bool(continue_chain), requested_ms, expires_ms
            )
            found.append((field, request))
        return found

    def clear_aborts(self, message_ids: Sequence[str]) -> int:
        if not message_ids:
            return 0
        return int(self._call(self._client.hdel, self._aborts_key(), *message_ids))

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
