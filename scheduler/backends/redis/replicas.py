"""Waiting for replicas: a write that returns only once ``wait_replicas`` replicas hold it.

Redis replicates asynchronously: a master acknowledges a write before any replica has it,
so a failover can lose what the old master acknowledged last. With ``wait_replicas=N`` in
the URL, every script that writes what a caller is told is done (enqueue, ack, retry,
release, poison and its replay or purge, cancel, a batch's records, a ledger record) is
followed by ``WAIT N timeout`` on the same connection, in the same round trip. ``WAIT``
counts the replicas that acknowledged the connection's writes so far; fewer than ``N``
within ``wait_timeout_ms`` raises :class:`~scheduler.errors.ReplicaTimeout` (the write
is applied on the master; a failover now could lose it). Claims, lease extensions and
limit bookkeeping are not waited for: losing one in a failover makes a message run
again (at least once), never lost.

On a Redis Cluster the calls are grouped by the node serving each shard's slot and each
group is pipelined on that node's own connection with its ``WAIT``; a call the cluster
answers with ``MOVED`` (a failover moved the slot), or a group whose connection dropped,
is sent again once the slot map is read anew.
"""

from __future__ import annotations

import time
from typing import Any

import redis
from redis.commands.core import Script
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ReadOnlyError,
    SlotNotCoveredError,
    TryAgainError,
)

from tickwork.scheduler.backends.redis.scripts import Call, evalsha_round_trip, raise_errors
from tickwork.scheduler.errors import ReplicaTimeout

#: the scripts whose writes a caller is told are done; these wait for replicas
WAITED = frozenset(
    {
        "enqueue",
        "ack",
        "retry",
        "release",
        "poison",
        "poison_replay",
        "poison_delete",
        "delete",
        "delete_by_key",
        "batch_open",
        "batch_settle",
        "ledger_append",
    }
)

#: a call a moving cluster refuses is sent again, the slot map read anew, up to this many
#: times in all (about 5 s of waiting between them)
ATTEMPTS = 7

#: the answers of a node that no longer serves the slot (MOVED is an AskError)
MOVING = (AskError, ClusterDownError, TryAgainError, ReadOnlyError)


class ReplicaWait:
    """Runs script calls, each group followed by ``WAIT`` on the connection that ran it."""

    def __init__(
        self,
        client: Any,
        scripts: dict[str, Script],
        *,
        replicas: int,
        timeout_ms: int,
        cluster: bool,
        description: str,
    ) -> None:
        self._client = client
        self._scripts = scripts
        self._replicas = replicas
        self._timeout_ms = timeout_ms
        self._cluster = cluster
        self._description = description

    def run(self, calls: list[Call]) -> list[Any]:
        """The scripts' replies, in order, once the replicas acknowledged them."""
        if not self._cluster:
            return self._checked(*self._on(self._client, calls))
        replies: list[Any] = [None] * len(calls)
        acknowledged = self._replicas
        pending = list(range(len(calls)))
        moved: Exception | None = None
        for attempt in range(ATTEMPTS):
            if attempt:
                time.sleep(min(2.0, 0.05 * 2**attempt))
                self._client.nodes_manager.initialize()
            moving: list[int] = []
            try:
                groups = self._by_node(calls, pending)
            except (SlotNotCoveredError, ClusterDownError) as err:
                moved = err
                continue
            for node, indexes in groups:
                try:
                    answers, count = self._on(
                        self._client.get_redis_connection(node), [calls[i] for i in indexes]
                    )
                except (redis.ConnectionError, redis.TimeoutError) as err:
                    moved, moving = err, moving + indexes
                    continue
                acknowledged = min(acknowledged, count)
                for i, answer in zip(indexes, answers, strict=True):
                    if isinstance(answer, MOVING):
                        moved = answer
                        moving.append(i)
                    else:
                        replies[i] = answer
            if not moving:
                return self._checked(replies, acknowledged)
            pending = moving
        assert moved is not None
        raise moved

    def _by_node(self, calls: list[Call], indexes: list[int]) -> list[tuple[Any, list[int]]]:
        """``indexes`` of ``calls`` grouped by the node serving each call's slot."""
        groups: dict[str, tuple[Any, list[int]]] = {}
        for index in indexes:
            node = self._client.get_node_from_key(calls[index][1][0])
            groups.setdefault(node.name, (node, []))[1].append(index)
        return list(groups.values())

    def _on(self, client: Any, calls: list[Call]) -> tuple[list[Any], int]:
        """One round trip on one connection: the scripts, then ``WAIT``; (the scripts'
        replies, errors in place; how many replicas acknowledged)."""
        replies, acknowledged = evalsha_round_trip(
            client, self._scripts, calls, (self._replicas, self._timeout_ms)
        )
        assert acknowledged is not None
        return replies, acknowledged

    def _checked(self, replies: list[Any], acknowledged: int) -> list[Any]:
        raise_errors(replies)
        if acknowledged < self._replicas:
            raise ReplicaTimeout(
                f"the write is applied on Redis at {self._description} but {acknowledged} "
                f"of {self._replicas} replica(s) acknowledged it within {self._timeout_ms} ms "
                "(wait_replicas): a failover now could lose it"
            )
        return replies
