"""The heartbeat thread: extends the leases of work this process holds.

Every ``interval_s`` it extends each lease with less than half of its length left, by one
backend call per lease length, so a slow handler is not run twice; the concurrency slots
those runs hold are extended with them. A lease the backend
says is no longer held (it expired and was claimed elsewhere, or was cancelled) is logged
once and not extended again; its settle will be refused by the fence.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tickwork.scheduler import BackendError
from tickwork.scheduler.backends import Backend
from tickwork.workers.intake.holdings import Holdings, Work

log = logging.getLogger("tickwork.worker")


class Heartbeat:
    """Keeps held leases alive until ``until`` is set."""

    def __init__(
        self,
        backend: Backend,
        holdings: Holdings,
        now_ms: Callable[[], int],
        interval_s: float = 0.25,
    ) -> None:
        self._backend = backend
        self._holdings = holdings
        self._now_ms = now_ms
        self._interval_s = interval_s

    def run(self, until: threading.Event) -> None:
        while not until.wait(self._interval_s):
            self.beat()

    def beat(self) -> None:
        """Extend every lease that is past half its length (one step; tests call it)."""
        now = self._now_ms()
        by_timeout: dict[int, list[Work]] = {}
        for work in self._holdings.expiring(now):
            by_timeout.setdefault(work.claim.timeout_ms, []).append(work)
        for timeout_ms, works in by_timeout.items():
            try:
                held = self._backend.leases.extend([w.claim for w in works], timeout_ms)
            except BackendError as err:
                log.warning("lease heartbeat failed: %s", err)
                continue
            kept = [work for work, ok in zip(works, held, strict=True) if ok]
            self._holdings.extended(kept, now + timeout_ms)
            slots = [(work.slot, work.claim.id) for work in kept if work.slot is not None]
            if slots:
                try:
                    self._backend.limits.extend(slots, timeout_ms)
                except BackendError as err:
                    log.warning("concurrency slot heartbeat failed: %s", err)
            lost = [work for work, ok in zip(works, held, strict=True) if not ok]
            self._holdings.lost(lost)
            for work in lost:
                log.warning("lease of %s was lost while it ran", work.claim.id)
