"""The Redis backend's batches: per batch a hash ``{prefix:batch:ID}`` (its description
and the count of failed members) and a hash ``{prefix:batch:ID}:o`` of member outcomes,
whose length is the settled count. Both share one hash tag (one cluster slot), so the
``batch_settle`` script records an outcome and counts it in one step; the members a
worker settles together go in one script call per batch (pipelined on one node)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tickwork.scheduler.backends.records import BatchRecord, MemberOutcome
from tickwork.scheduler.backends.redis.shards import RedisShards
from tickwork.scheduler.backends.roles import Batches


class RedisBatches(Batches):
    """Descriptions, counts and member outcomes of batches."""

    def __init__(self, store: RedisShards) -> None:
        self._store = store

    def _batch_keys(self, batch_id: str) -> list[str]:
        tag = f"{{{self._store.prefix}:batch:{batch_id}}}"
        return [tag, f"{tag}:o"]

    def open(self, batch_id: str, description: bytes, expires_ms: int) -> None:
        self._store.run_scripts(
            [("batch_open", self._batch_keys(batch_id), [description, expires_ms])]
        )

    def settle(self, outcomes: Sequence[MemberOutcome]) -> list[tuple[int, int]]:
        groups: dict[str, list[int]] = {}
        for index, o in enumerate(outcomes):
            groups.setdefault(o.batch, []).append(index)
        calls: list[tuple[str, list[str], list[Any]]] = []
        for batch_id, indexes in groups.items():
            args: list[Any] = [max(outcomes[i].expires_ms for i in indexes)]
            for i in indexes:
                o = outcomes[i]
                args += [o.member, int(o.failed), o.outcome]
            calls.append(("batch_settle", self._batch_keys(batch_id), args))
        counts = [(0, 0)] * len(outcomes)
        for indexes, answer in zip(groups.values(), self._store.run_scripts(calls), strict=True):
            for i, (settled, failed) in zip(indexes, answer, strict=True):
                counts[i] = (int(settled), int(failed))
        return counts

    def read(self, batch_id: str, outcomes: bool = True) -> BatchRecord | None:
        head, members = self._batch_keys(batch_id)
        fields: dict[bytes, bytes] = self._store.call(self._store.client.hgetall, head)
        found: dict[int, bytes] = {}
        if outcomes:
            stored = self._store.call(self._store.client.hgetall, members)
            found = {int(member): bytes(outcome) for member, outcome in stored.items()}
            settled = len(found)
        else:
            settled = int(self._store.call(self._store.client.hlen, members))
        if not fields and not settled:
            return None
        description = fields.get(b"d")
        return BatchRecord(description, settled, int(fields.get(b"f", 0)), found)
