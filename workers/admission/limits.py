"""Concurrency limits on the worker's side: a limited run holds a slot of its limit.

Before claimed work starts, ``admit`` takes a slot for each limited message (one backend
call per batch) that its claim did not take already (a backend may take them in the
claim itself: Redis on one node does, given ``capacities``). A message over its limit
does not run and is not held here: it goes back to storage, attempt not counted, due
again when the earliest holder's lease ends (the fallback if nobody wakes it, e.g. when
the holder's worker died), and joins its limit's waiting line. When a run settles, its
slot is given back and the longest waiter of that limit is woken (made due now), so
waiting work is not polled for. A worker that dies holding slots gives them back when
their leases run out (heartbeats extend them with the message's lease while the handler
runs).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from tickwork.scheduler import BackendError
from tickwork.scheduler.backends import SlotRequest, Waiter
from tickwork.scheduler.schedules.overlap import is_overlap_limit
from tickwork.workers.admission.live_limits import LiveCapacities
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.context import WorkerContext
from tickwork.workers.intake.holdings import Work

log = logging.getLogger("tickwork.worker")

_RETRY_MS = 1000  # when the backend could not be asked: look again this soon
_MAX_POPS = 1000  # waiters gone or running already: take the next, up to this many per call


class LimitGate:
    """Takes and gives back the slots of this worker's limited runs."""

    def __init__(self, context: WorkerContext) -> None:
        self._woke = context.nudge  # waiters were made due: the consumer claims at once
        self._app = context.app
        self._backend = context.backend
        self._counters = context.counters
        self._now_ms = context.now_ms
        self._holdings = context.holdings
        self.capacities = claim_capacities(context.app)
        #: the capacities set at run time (``app.limits.set``), shared with the rate gate
        declared = {
            limit.name: limit.capacity
            for task in context.app.tasks.values()
            if (limit := task.options.concurrency_limit) is not None
        }
        self.live = LiveCapacities(context.backend, self.capacities, self.widened, declared)

    def request(self, work: Work) -> SlotRequest | None:
        """The slot ``work`` needs, or None when it is not limited (the capacity is the
        one this worker's registration of the task declares)."""
        message = work.message
        if message.limit is None:
            return None
        if is_overlap_limit(message.limit):  # a run of a schedule that runs one at a time
            capacity = 1
        else:
            task = self._app.registry.tasks.get(message.task)
            limit = task.options.concurrency_limit if task is not None else None
            if limit is None:
                return None
            capacity = self.live.concurrency(limit.name, limit.capacity)
        claim = work.claim
        return SlotRequest(
            message.limit, capacity, claim.id, claim.queue, claim.key, claim.timeout_ms
        )

    def admit(self, works: Sequence[Work]) -> list[Work]:
        """The works that may start now, each limited one holding a slot; the others are
        sent back to wait (the caller forgets them)."""
        requests = [
            (work, request)
            for work in works
            if work.slot is None and (request := self.request(work))  # else taken by its claim
        ]
        if not requests:
            return list(works)
        try:
            answers = self._backend.limits.acquire([request for _, request in requests])
        except BackendError as err:
            log.warning("cannot take concurrency slots (looking again soon): %s", err)
            answers = [self._now_ms() + _RETRY_MS] * len(requests)
        refused: dict[int, int] = {}
        for (work, request), retry_at in zip(requests, answers, strict=True):
            if retry_at is None:
                work.slot = request.limit
            else:
                refused[id(work)] = retry_at
                self._wait(work, request, retry_at)
        return [work for work in works if id(work) not in refused]

    def _wait(self, work: Work, request: SlotRequest, retry_at: int) -> None:
        """Send ``work`` back to storage to wait for a slot of its limit."""
        self._counters.add("limited")
        log.debug(
            "%s id=%s waits for a slot of %s", work.message.task, work.claim.id, request.limit
        )
        try:
            if not self._backend.leases.release([work.claim], due_ms=max(retry_at, self._now_ms())):
                return  # the lease was lost meanwhile: whoever holds it now decides
            if self._backend.limits.wait(request):  # a slot came free meanwhile
                self.wake([Waiter(request.limit, request.queue, request.key, request.message_id)])
        except BackendError as err:
            log.warning(
                "%s id=%s waits for a slot without a place in line (due again by its "
                "lease or its release): %s",
                work.message.task,
                work.claim.id,
                err,
            )

    @staticmethod
    def take_slots(works: Sequence[Work]) -> list[tuple[str, str]]:
        """The slots ``(limit, message id)`` that ``works`` hold, which they no longer
        hold afterwards: the caller gives them back."""
        held = [(work.slot, work.claim.id) for work in works if work.slot is not None]
        for work in works:
            work.slot = None
        return held

    def settled(self, works: Sequence[Work]) -> None:
        """Give back the slots of runs that ended and wake the longest waiters."""
        self.release(self.take_slots(works))

    def release(self, held: list[tuple[str, str]]) -> None:
        """Give back slots ``(limit, message id)`` and wake the longest waiters."""
        if not held:
            return
        try:
            waiters = self._backend.limits.release(held)
        except BackendError as err:
            log.warning(
                "cannot give back %d concurrency slot(s) (their leases will end): %s",
                len(held),
                err,
            )
            return
        self.wake(waiters)

    def widened(self, name: str, more: int) -> None:
        """Concurrency limit ``name`` allows ``more`` runs at once than before: wake that
        many of its longest waiters (of each of its keys this worker holds a slot of, for
        a limit per key), who would otherwise wait for a slot's release, one at a time.
        Every worker does it: a waiter woken too many is refused again and waits on."""
        held = {w.slot for w in self._holdings.all() if w.slot and w.slot.startswith(name + ":")}
        for key in sorted({name, *held}):
            try:
                waiters = self._backend.limits.pop_waiters(key, more)
            except BackendError as err:
                log.warning("cannot wake the waiters of %s (they wake by themselves): %s", key, err)
                continue
            self.wake(waiters)

    def wake(self, waiters: list[Waiter]) -> None:
        """Wake ``waiters``; for each one gone or running already (a line can hold such
        entries: a message woken by its fallback time runs while still in line), take
        the next waiter of its limit instead, until one wakes or the line is empty. A
        backend error is logged: those waiters wake at their fallback time instead."""
        try:
            self._wake(waiters)
        except BackendError as err:
            log.warning(
                "cannot wake %d waiter(s) (they wake later by themselves): %s", len(waiters), err
            )

    def _wake(self, waiters: list[Waiter]) -> None:
        pops = 0
        while waiters:
            woken = self._backend.limits.wake(waiters)
            if any(woken):
                self._woke()
            missed = [w for w, ok in zip(waiters, woken, strict=True) if not ok]
            waiters = []
            for waiter in missed:
                if pops >= _MAX_POPS:
                    return
                pops += 1
                waiters += self._backend.limits.pop_waiters(waiter.limit, 1)


def claim_capacities(app: WorkerApp) -> dict[str, int]:
    """The concurrency limits (name -> capacity) whose slots a claim may take: those of
    the registered tasks, less any name two tasks give different capacities, and any
    name that with a ``:VALUE`` could read as another (``a`` and ``a:b``): the slots of
    those are taken by ``admit``, with the capacity of each message's own task."""
    capacities: dict[str, int] = {}
    conflicting: set[str] = set()
    for task in app.tasks.values():
        limit = task.options.concurrency_limit
        if limit is None:
            continue
        if capacities.setdefault(limit.name, limit.capacity) != limit.capacity:
            conflicting.add(limit.name)
    for name in capacities:  # "a" and "a:b": "a:b:c" could be either's
        if prefixed := {other for other in capacities if other.startswith(name + ":")}:
            conflicting |= {name, *prefixed}
    return {name: cap for name, cap in capacities.items() if name not in conflicting}
