"""This worker's record in the backend's worker registry (``scheduler/views/presence.py``): who
it is (host, pid, queues, concurrency, pools), when it started, what it holds now and its
counters, written every ``interval_s`` by its own thread, and removed when it stops. A
worker killed without a word is shown as gone after three intervals and dropped after ten.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections import Counter

from tickwork.scheduler import BackendError
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.limits.view import declared_limits
from tickwork.scheduler.views.presence import KEPT_FOR, WorkerInfo
from tickwork.workers.context import WorkerContext
from tickwork.workers.intake.holdings import Work

log = logging.getLogger("tickwork.worker")


class Presence:
    """Writes this worker's registry record until ``until`` is set, then removes it."""

    def __init__(self, context: WorkerContext) -> None:
        self._backend = context.backend
        self._config = context.config
        self._holdings = context.holdings
        self._counters = context.counters
        self._now_ms = context.now_ms
        registry = context.app.registry
        self._has_async = registry.has_async
        host = socket.gethostname()
        self.worker_id = f"{host}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._host = host
        self._started_ms = context.now_ms()
        self._limits = declared_limits(registry)

    def record(self) -> bytes:
        """This worker's record now."""
        config = self._config
        works = self._holdings.all()
        info = WorkerInfo(
            id=self.worker_id,
            host=self._host,
            pid=os.getpid(),
            queues=list(config.queues),
            concurrency=config.concurrency,
            pool=config.pool,
            async_concurrency=config.async_concurrency if self._has_async else None,
            started_at=to_datetime(self._started_ms),
            last_seen=to_datetime(self._now_ms()),
            interval_s=config.registry_interval_s,
            held=len(works),
            stats=self._counters.snapshot().as_dict(),
            limits=self._limits,
            holding=_running_limits(works),
        )
        return info.model_dump_json().encode()

    def run(self, until: threading.Event) -> None:
        ttl_ms = int(self._config.registry_interval_s * 1000 * KEPT_FOR)
        try:
            self._write(ttl_ms)
            while not until.wait(self._config.registry_interval_s):
                self._write(ttl_ms)
        finally:
            try:
                self._backend.registry.delete(self.worker_id)
            except BackendError as err:
                log.warning("cannot leave the worker registry (the record expires): %s", err)

    def _write(self, ttl_ms: int) -> None:
        try:
            self._backend.registry.put(self.worker_id, self.record(), ttl_ms)
        except BackendError as err:
            log.warning("cannot write this worker's registry record: %s", err)


def _running_limits(works: list[Work]) -> dict[str, int]:
    """Concurrency limit key -> runs of it started here (they hold its slots)."""
    return dict(Counter(w.message.limit for w in works if w.started_ms and w.message.limit))
