"""Live changes by pub/sub: published changes go out in one ``PUBLISH`` on the prefix's
changes channel (one change a line), and each listener holds a subscription of its own.
On a cluster a publish reaches the subscribers of every node. Nothing is stored."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

import redis

from tickwork.scheduler.backends.redis.shards import RedisShards
from tickwork.scheduler.backends.roles.changes import ChangeFeed, Changes
from tickwork.scheduler.backends.roles.records import Ledger
from tickwork.scheduler.errors import BackendUnavailable

#: seconds a new subscription may take to be confirmed
_SUBSCRIBE_S = 10.0


class RedisChanges(Changes):
    """Publishes with ``PUBLISH``; listens with ``SUBSCRIBE``."""

    def __init__(self, store: RedisShards, ledger: Ledger) -> None:
        super().__init__(ledger)
        self._store = store
        self._channel = f"{store.prefix}:changes"

    def publish(self, changes: Sequence[bytes]) -> None:
        if changes:
            self._store.call(self._store.client.publish, self._channel, b"\n".join(changes))

    def listen(self) -> ChangeFeed:
        return _SubscribedFeed(self._store, self._channel)


class _SubscribedFeed(ChangeFeed):
    def __init__(self, store: RedisShards, channel: str) -> None:
        self._description = store.description
        self._pubsub: Any = store.client.pubsub()
        self._guarded(lambda: self._pubsub.subscribe(channel))
        deadline = time.monotonic() + _SUBSCRIBE_S
        while True:  # what is published once ``listen`` returns is heard
            message = self._guarded(lambda: self._pubsub.get_message(timeout=0.1))
            if message is not None and message["type"] == "subscribe":
                return
            if time.monotonic() > deadline:
                self.close()
                raise BackendUnavailable(f"{store.description}: the subscription to changes")

    def _guarded(self, call: Any) -> Any:
        try:
            return call()
        except redis.RedisError as err:
            raise BackendUnavailable(
                f"{self._description}: listening for changes failed: {err}"
            ) from err

    def next(self, timeout_s: float) -> list[bytes]:
        found: list[bytes] = []
        wait = timeout_s
        while True:
            message = self._guarded(
                lambda wait=wait: self._pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=wait
                )
            )
            if message is None:
                return found
            if message["type"] == "message":
                found.extend(message["data"].split(b"\n"))
            wait = 0.0

    def close(self) -> None:
        with contextlib.suppress(redis.RedisError):  # what the server already dropped
            self._pubsub.close()
