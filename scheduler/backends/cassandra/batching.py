"""Logged batches of bounded size and TTLs that keep a row at least as long as asked (adding
a statement to a batch: ``binding.py``)."""

from __future__ import annotations

import math

from cassandra.query import BatchStatement, BatchType

from tickwork.scheduler.backends.cassandra.binding import add_to_batch as add_to_batch
from tickwork.scheduler.backends.cassandra.binding import unset_nulls as unset_nulls

_BATCH_BYTES = 8_000  # messages per logged batch up to about this size (Cassandra fails
# batches over 50 KiB by default and warns over 5 KiB: raise that warning for this workload)


_ROW_BYTES = 200  # what a message adds to a batch besides its body


MAX_BODY_BYTES = 32_768  # with a batch's other rows, stays under the 50 KiB batch limit


class Batches:
    """Logged batches of about ``_BATCH_BYTES`` each: fill ``current``, then call
    ``added`` with the size of the body just added."""

    def __init__(self) -> None:
        self._done: list[BatchStatement] = []
        self.current = BatchStatement(batch_type=BatchType.LOGGED)
        self._size = 0

    def added(self, body_bytes: int) -> None:
        self._size += body_bytes + _ROW_BYTES
        if self._size >= _BATCH_BYTES:
            self._done.append(self.current)
            self.current = BatchStatement(batch_type=BatchType.LOGGED)
            self._size = 0

    def all(self) -> list[BatchStatement]:
        if len(self.current) > 0:
            self._done.append(self.current)
            self.current = BatchStatement(batch_type=BatchType.LOGGED)
        return self._done


def ttl_seconds(ttl_ms: float) -> int:
    """A Cassandra TTL that keeps a row for at least ``ttl_ms``: Cassandra counts a TTL from
    the current whole second, so a row written 0.9 s into a second with ``TTL 1`` lives 0.1 s;
    one second more covers that."""
    return max(0, math.ceil(ttl_ms / 1000)) + 1
