"""Emitted events told to the streams (``GET /api/v1/stream``) while one listens: an
``emitted`` change (``scheduler.runs.changes``) that the emitting app publishes once the
event's message is stored. Whether anyone listens is read from the backend at most every
half second (``backend.changes.listened``, as workers look), so an app that emits while
nobody watches makes that one read at most; a publish that fails is dropped and said in
the log once until one succeeds (the event is stored: its delivery does not depend on
the notice)."""

from __future__ import annotations

import contextlib
import itertools
import logging
import secrets
import time
from collections.abc import Callable

from tickwork.scheduler.backends import Backend
from tickwork.scheduler.errors import BackendError
from tickwork.scheduler.events.fanout import EVENT_TASK
from tickwork.scheduler.runs.changes import EMITTED, encoded

log = logging.getLogger("tickwork.events")

#: seconds between two looks whether someone listens (a stream says ``ready`` once
#: workers and emitters can have seen it: ``tickwork/api/stream.py``'s ``READY_AFTER_S``)
LOOK_EVERY_S = 0.5


class LiveEvents:
    """Publishes an ``emitted`` change for each event this app emits, while someone
    listens."""

    def __init__(self, backend: Callable[[], Backend], now_ms: Callable[[], int]) -> None:
        self._backend = backend
        self._now_ms = now_ms
        self._source = f"app-{secrets.token_hex(4)}"  # the change's ``worker``
        self._seq = itertools.count()
        self._looked = -LOOK_EVERY_S
        self._listened = False
        self._failing = False

    def emitted(self, event_id: str, name: str, key: str | None, queue: str) -> None:
        """Event ``event_id`` was stored: tell the streams, if any listens."""
        if not self._someone_listens():
            return
        change = encoded(
            EMITTED, event_id, EVENT_TASK, queue, key, 0, self._now_ms(), self._source,
            next(self._seq), None, name=name,
        )  # fmt: skip
        try:
            self._backend().changes.publish([change])
        except BackendError as err:
            if not self._failing:
                log.warning("event %s not told to the streams (%s)", event_id, err)
            self._failing = True
        else:
            self._failing = False

    def _someone_listens(self) -> bool:
        now = time.monotonic()
        if now - self._looked >= LOOK_EVERY_S:
            self._looked = now
            with contextlib.suppress(BackendError):  # unknown: as it was
                self._listened = self._backend().changes.listened()
        return self._listened
