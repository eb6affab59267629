"""The abort watcher: stops the handlers of running messages someone asked to abort.

``app.abort`` stores an ``AbortRequest`` in the backend. While this process holds work,
the watcher reads the requests every ``interval_s`` (one small read: nothing per
message) and, for each held message named, records the request on the work and asks the
pool to stop its handler; the settler then settles the run as aborted. Work not yet handed
to the pool (parked in the timer) is settled as aborted when it would start.
"""

from __future__ import annotations

import logging
import threading

from tickwork.scheduler import BackendError
from tickwork.scheduler.backends import AbortRequest, Backend
from tickwork.scheduler.model.headers import OVERLAP
from tickwork.triggers import Overlap
from tickwork.workers.intake.holdings import Holdings, Work
from tickwork.workers.pools.pool import HandlerPool

log = logging.getLogger("tickwork.worker")


class AbortWatcher:
    """Reads abort requests and stops the handlers they name."""

    def __init__(self, backend: Backend, holdings: Holdings, interval_s: float = 0.5) -> None:
        self._backend = backend
        self._holdings = holdings
        self._interval_s = interval_s
        self._requests: dict[str, AbortRequest] = {}  # as last read
        self._delivered: set[tuple[str, str]] = set()  # handles the pool confirmed
        self._pool: HandlerPool[Work] | None = None

    def run(self, pool: HandlerPool[Work], until: threading.Event) -> None:
        self._pool = pool
        while not until.wait(self._interval_s):
            self.check()

    def requested(self, message_id: str) -> AbortRequest | None:
        """The abort request for ``message_id`` as last read, if any."""
        return self._requests.get(message_id)

    def check(self) -> None:
        """Read the requests once and stop every held handler they name (one step)."""
        held = self._holdings.all()
        if not held:
            self._requests = {}
            self._delivered.clear()
            return
        try:
            requests = self._backend.aborts.pending()
        except BackendError as err:
            log.warning("cannot read abort requests (trying again): %s", err)
            return
        self._requests = {request.message_id: request for request in requests}
        self._delivered.intersection_update(work.handle for work in held)
        for work in held:
            request = self._requests.get(work.claim.id)
            if request is None or work.handle in self._delivered:
                continue
            if work.abort is None:
                work.abort = request
                log.info("aborting %s id=%s", work.message.task, work.claim.id)
            # until the pool confirms (work on its way to the pool is not there yet; if
            # it reaches it, the next check stops it)
            terminate = work.message.headers.get(OVERLAP) == Overlap.TERMINATE_OTHER
            if self._pool is not None and self._pool.abort(work, 0 if terminate else None):
                self._delivered.add(work.handle)
