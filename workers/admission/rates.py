"""Rate limits on the worker's side: a rate-limited run starts only in a start the
backend granted or reserved for it.

When claimed work is due, ``admit`` asks the backend for a start of each rate-limited
message (one call per batch). A message that may start now runs; one over its rate goes
back to storage, attempt not counted, due at the start reserved for it, so it is not
polled for and waiting messages do not all rush at the next free start: each has its own
time, a period after the start ``count`` places before it. When it comes due, the
backend finds its reservation (named by id and attempt) and it runs. A retry is a new
start and reserves again. A message of a task whose limit drops its excess (a
``throttle``) reserves nothing: over the rate it is dropped (settled as throttled). A
message with ``cost=`` asks for that many units of its rate.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from tickwork.scheduler import BackendError
from tickwork.scheduler.backends import RateRequest
from tickwork.workers.admission.live_limits import LiveCapacities
from tickwork.workers.context import WorkerContext
from tickwork.workers.intake.holdings import Work

log = logging.getLogger("tickwork.worker")

_RETRY_MS = 1000  # when the backend could not be asked: look again this soon


class RateGate:
    """Reserves the starts of this worker's rate-limited runs."""

    def __init__(self, context: WorkerContext, live: LiveCapacities) -> None:
        self._app = context.app
        self._live = live  # the capacities set at run time (``app.limits.set``)
        self._backend = context.backend
        self._counters = context.counters
        self._now_ms = context.now_ms
        self._lock = threading.Lock()
        self._deferred_until = 0

    def deferred_until(self) -> int:
        """When the last start this worker sent work back to wait for is due (a burst
        worker does not stop before it)."""
        return self._deferred_until

    def request(self, work: Work) -> RateRequest | None:
        """The start ``work`` needs, or None when it is not rate-limited (the rate is the
        one this worker's registration of the task declares)."""
        message = work.message
        if message.rate is None:
            return None
        task = self._app.registry.tasks.get(message.task)
        rate = task.options.rate_limit if task is not None else None
        if rate is None:
            return None
        claim = work.claim
        count = self._live.rate(rate.name, rate.count)
        member = f"{claim.id}:{claim.attempt}"
        units = min(message.cost, count)  # a capacity set lower at run time caps the cost
        return RateRequest(
            message.rate, count, rate.period_ms, member, units, rate.excess != "drop"
        )

    def admit(self, works: Sequence[Work]) -> tuple[list[Work], list[Work]]:
        """The works that may start now, and those dropped (over a limit that drops its
        excess: the caller settles them); the others are sent back to storage, due at
        their reserved start (the caller forgets them)."""
        requests = [(work, request) for work in works if (request := self.request(work))]
        if not requests:
            return list(works), []
        unanswered = False
        try:
            answers = self._backend.rates.reserve([request for _, request in requests])
        except BackendError as err:
            log.warning("cannot reserve rate-limited starts (looking again soon): %s", err)
            answers = [self._now_ms() + _RETRY_MS] * len(requests)
            unanswered = True  # none is dropped for want of an answer: all look again
        waiting: set[int] = set()
        dropped: list[Work] = []
        for (work, request), start_at in zip(requests, answers, strict=True):
            if start_at is None:
                continue
            waiting.add(id(work))
            if request.reserve or unanswered:
                self._defer(work, request, start_at)
            else:
                dropped.append(work)
        return [work for work in works if id(work) not in waiting], dropped

    def _defer(self, work: Work, request: RateRequest, start_at: int) -> None:
        """Send ``work`` back to storage, due at ``start_at``."""
        self._counters.add("rate_limited")
        with self._lock:
            self._deferred_until = max(self._deferred_until, start_at)
        log.debug(
            "%s id=%s starts at %d (rate limit %s)",
            work.message.task,
            work.claim.id,
            start_at,
            request.limit,
        )
        try:
            self._backend.leases.release([work.claim], due_ms=max(start_at, self._now_ms()))
        except BackendError as err:
            log.warning(
                "%s id=%s could not be sent back to wait for its start (due again when its "
                "lease ends): %s",
                work.message.task,
                work.claim.id,
                err,
            )
