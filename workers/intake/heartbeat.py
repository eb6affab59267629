"""The heartbeat thread: extends the leases of work this process holds.

Every ``interval_s`` it extends each lease with less than half of its length left (or
less than three of its recent extensions took, over a slow network), by one backend call
per lease length, so a slow handler is not run twice; the concurrency slots
those runs hold are extended with them. A lease the backend
says is no longer held (it expired and was claimed elsewhere, or was cancelled) and whose
work is still held at the next beat is logged once and not extended again; its settle
will be refused by the fence. (One settled by then was acked before the extension came.)
"""

from __future__ import annotations

import logging
import threading
import time
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
        self._refused: list[Work] = []  # extensions refused at the last beat
        self._extend_ms = 0.0  # how long an extension takes here (see ``beat``)
        #: ``time.monotonic()`` when the loop last turned (the worker's liveness)
        self.turned_at = time.monotonic()

    def run(self, until: threading.Event) -> None:
        while not until.wait(self._interval_s):
            self.beat()
            self.turned_at = time.monotonic()

    def beat(self) -> None:
        """Extend every lease that is past half its length, or that has less left than a
        few extensions take over this network (one step; tests call it)."""
        self._confirm_refused()
        now = self._now_ms()
        margin_ms = 3 * self._extend_ms + 1000 * self._interval_s
        by_timeout: dict[int, list[Work]] = {}
        for work in self._holdings.expiring(now, margin_ms):
            by_timeout.setdefault(work.claim.timeout_ms, []).append(work)
        for timeout_ms, works in by_timeout.items():
            started = time.monotonic()
            try:
                held = self._backend.leases.extend([w.claim for w in works], timeout_ms)
            except BackendError as err:
                log.warning("lease heartbeat failed: %s", err)
                continue
            took_ms = 1000 * (time.monotonic() - started)
            # the slowest recent extension, decaying: a slow network's round trips
            self._extend_ms = max(took_ms, 0.9 * self._extend_ms)
            kept = [work for work, ok in zip(works, held, strict=True) if ok]
            self._holdings.extended(kept, now + timeout_ms)
            slots = [(work.slot, work.claim.id) for work in kept if work.slot is not None]
            if slots:
                try:
                    self._backend.limits.extend(slots, timeout_ms)
                except BackendError as err:
                    log.warning("concurrency slot heartbeat failed: %s", err)
            self._refused += [work for work, ok in zip(works, held, strict=True) if not ok]

    def _confirm_refused(self) -> None:
        """A lease whose extension the last beat saw refused is lost if its work is still
        held now; one settled meanwhile was not: its ack reached the backend before the
        extension did (an ack on its way as the beat began: a slow network widens that
        window to a round trip)."""
        if not self._refused:
            return
        refused, self._refused = self._refused, []
        lost = self._holdings.still_held(refused)
        self._holdings.lost(lost)
        for work in lost:
            log.warning("lease of %s was lost while it ran", work.claim.id)
