"""A hierarchical timing wheel (Kafka's ``TimingWheel``) for firing claimed messages on time.

Consumers claim messages that fall due within a short lookahead and park them here; the
timer thread hands each one to the worker pool when its due time comes. Adding and
expiring an item are O(1); the thread sleeps until the earliest non-empty bucket is due.

How it works: level 0 has ``wheel_size`` buckets of ``tick_ms`` each; level 1 has buckets
of ``tick_ms * wheel_size``; and so on, each level created when first needed. An item
goes into the finest level whose span covers its due time. When a coarse bucket comes
due, its items are added again and fall into finer buckets, until they expire.

Worked example, ``tick_ms=1, wheel_size=20``, current time 1000: an item due at 1007 goes
into level 0 bucket [1007, 1008). One due at 1150 is past level 0 (span 20 ms), so it goes
into level 1 (20 ms buckets, span 400 ms), bucket [1140, 1160). At 1140 that bucket
expires, the item is re-added with current time 1140 and lands in level 0 bucket
[1150, 1151), which expires at 1150 and yields it.

Thread-safety: not thread-safe; ``Timer`` (in ``workers.timer``) owns one and
serialises access with its condition lock. The clock is the caller's: ``advance`` takes
the current time, so tests drive time without sleeping.
"""

from __future__ import annotations

import heapq
from typing import Generic, TypeVar

T = TypeVar("T")


class _Bucket(Generic[T]):
    __slots__ = ("expiration", "items")

    def __init__(self) -> None:
        self.expiration = -1
        self.items: list[tuple[int, T]] = []


class TimingWheel(Generic[T]):
    """Buckets of due items at growing granularity; see the module docstring."""

    def __init__(self, tick_ms: int, wheel_size: int, start_ms: int) -> None:
        if tick_ms < 1 or wheel_size < 2:
            raise ValueError("tick_ms must be >= 1 and wheel_size >= 2")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval = tick_ms * wheel_size
        self.current = start_ms - start_ms % tick_ms
        self.buckets: list[_Bucket[T]] = [_Bucket() for _ in range(wheel_size)]
        self.overflow: TimingWheel[T] | None = None
        self._queue: list[tuple[int, int, _Bucket[T]]] | None = None  # shared across levels
        self.size = 0

    def _shared_queue(self) -> list[tuple[int, int, _Bucket[T]]]:
        if self._queue is None:
            self._queue = []
        return self._queue

    def add(self, item: T, due_ms: int) -> bool:
        """Park ``item`` until ``due_ms``. Returns False (and keeps nothing) if already due."""
        if not self._add(item, due_ms, self._shared_queue()):
            return False
        self.size += 1
        return True

    def _add(self, item: T, due_ms: int, queue: list[tuple[int, int, _Bucket[T]]]) -> bool:
        if due_ms < self.current + self.tick_ms:
            return False
        if due_ms < self.current + self.interval:
            slot = (due_ms // self.tick_ms) % self.wheel_size
            bucket = self.buckets[slot]
            bucket.items.append((due_ms, item))
            expiration = due_ms - due_ms % self.tick_ms
            if bucket.expiration != expiration:
                bucket.expiration = expiration
                heapq.heappush(queue, (expiration, id(bucket), bucket))
            return True
        if self.overflow is None:
            self.overflow = TimingWheel(self.interval, self.wheel_size, self.current)
        return self.overflow._add(item, due_ms, queue)

    def _advance_clock(self, now_ms: int) -> None:
        if now_ms >= self.current + self.tick_ms:
            self.current = now_ms - now_ms % self.tick_ms
            if self.overflow is not None:
                self.overflow._advance_clock(self.current)

    def next_expiration(self) -> int | None:
        """When the earliest bucket comes due (None when empty)."""
        queue = self._shared_queue()
        while queue and queue[0][2].expiration != queue[0][0]:
            heapq.heappop(queue)  # a stale entry: the bucket was flushed and reused
        return queue[0][0] if queue else None

    def advance(self, now_ms: int) -> list[T]:
        """Move time to ``now_ms`` and return every item now due, in due order."""
        queue = self._shared_queue()
        due: list[tuple[int, T]] = []
        while queue and queue[0][0] <= now_ms:
            expiration, _, bucket = heapq.heappop(queue)
            if bucket.expiration != expiration:
                continue
            items, bucket.items, bucket.expiration = bucket.items, [], -1
            self._advance_clock(expiration)
            for due_ms, item in items:
                if not self._add(item, due_ms, queue):
                    due.append((due_ms, item))
        self._advance_clock(now_ms)
        self.size -= len(due)
        due.sort(key=lambda pair: pair[0])
        return [item for _, item in due]

    def drain(self) -> list[T]:
        """Remove and return every parked item (for shutdown)."""
        items: list[T] = []
        wheel: TimingWheel[T] | None = self
        while wheel is not None:
            for bucket in wheel.buckets:
                items.extend(item for _, item in bucket.items)
                bucket.items, bucket.expiration = [], -1
            wheel = wheel.overflow
        self._shared_queue().clear()
        self.size = 0
        return items
