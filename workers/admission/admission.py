"""Admission: which claimed work that is due may start now. The worker hands every due
claim here (from the consumer or the timer) before it starts any.

In order: work whose task is not registered here waits for a worker that knows it, or is
poisoned past its grace (``workers/admission/unknown_tasks.py``); work not started within
its ``expires`` of when it became due (its time, or a retry's or a replay's) never runs
(it is settled as expired); an occurrence of a schedule older than its
``catch_up_window`` never runs (settled as missed, its schedule going on); work whose
abort was requested before it started never runs (it is settled as aborted); then a
rate-limited one reserves its start (``workers/admission/rates.py``: one over its rate
goes back to storage, due at the start reserved for it, or, over a throttle that drops
its excess, is settled as throttled); then a concurrency-limited one
takes a slot (``workers/admission/limits.py``: one over its limit goes back to wait for a
slot). Rate first: a start reserved is a start counted, and a slot taken for a run that
could not start would be held for nothing. What is sent back is forgotten here (its
permit given back); what is left may start. A batch with no rate-limited (or no
concurrency-limited) message does not enter that gate at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from tickwork.scheduler.clock import to_ms
from tickwork.workers.admission.limits import LimitGate
from tickwork.workers.admission.rates import RateGate
from tickwork.workers.admission.unknown_tasks import UnknownTasks
from tickwork.workers.context import WorkerContext
from tickwork.workers.intake.aborts import AbortWatcher
from tickwork.workers.intake.holdings import Work
from tickwork.workers.pools.execution import HandlerResult, Verdict, aborted
from tickwork.workers.settling.settler import Settler

_MS = timedelta(milliseconds=1)


class Admission:
    """The gate between claimed work and the pool."""

    def __init__(
        self,
        context: WorkerContext,
        aborts: AbortWatcher,
        rates: RateGate,
        limits: LimitGate,
        settler: Settler,
    ) -> None:
        self._now_ms = context.now_ms
        self._unknown = UnknownTasks(context)
        self._aborts = aborts
        self.rates = rates
        self.limits = limits
        self._settler = settler

    def admit(self, works: Sequence[Work]) -> list[Work]:
        """The works that may start now, in order; the rest are settled or sent back."""
        runnable = []
        now = None
        tasks = self._unknown.tasks
        for work in works:
            if work.message.task not in tasks:  # a rolling deploy: unknown_tasks.py
                now = self._now_ms() if now is None else now
                self._settler.finished(work, self._unknown.result(work, now))
                continue
            after_ms = work.message.expire_after_ms
            if after_ms is not None:
                now = self._now_ms() if now is None else now
                if now > work.claim.due_ms + after_ms:  # its time, a retry's or a replay's
                    self._settler.finished(work, _expired(after_ms))
                    continue
            trigger = work.message.trigger
            if trigger is not None and trigger.catch_up_window is not None:
                now = self._now_ms() if now is None else now
                missed = _missed(work, trigger.catch_up_window, now)
                if missed is not None:
                    self._settler.finished(work, missed)
                    continue
            request = work.abort or self._aborts.requested(work.claim.id)
            if request is not None:  # aborted before it started: it never runs
                work.abort = request
                self._settler.finished(work, aborted("aborted before it started"))
            else:
                runnable.append(work)
        admitted = runnable
        if any(work.message.rate is not None for work in admitted):
            admitted, dropped = self.rates.admit(admitted)
            if dropped:
                for work in dropped:
                    self._settler.finished(work, _THROTTLED)
                gone = {id(work) for work in dropped}
                runnable = [work for work in runnable if id(work) not in gone]
        if any(work.message.limit is not None and work.slot is None for work in admitted):
            admitted = self.limits.admit(admitted)
        if len(admitted) < len(runnable):
            kept = {id(work) for work in admitted}
            self._settler.forget([work for work in runnable if id(work) not in kept])
        return admitted


def _missed(work: Work, window: timedelta, now: int) -> HandlerResult | None:
    """Not run: an occurrence of a schedule found older than its catch-up window (a first
    attempt: a retry or a redelivery is not a catch-up)."""
    if work.claim.attempt > 1:
        return None
    late_ms = now - to_ms(work.message.scheduled_at)
    if late_ms <= window // _MS:
        return None
    window_s = window.total_seconds()
    return HandlerResult(
        Verdict.MISSED,
        "Missed",
        f"{late_ms / 1000:.1f} s late, past its catch_up_window of {window_s:g} s",
    )


#: a run over its task's throttle, which drops the excess
_THROTTLED = HandlerResult(
    Verdict.THROTTLED, "Throttled", "over its throttle (excess='drop'): not run"
)


def _expired(after_ms: int) -> HandlerResult:
    return HandlerResult(
        Verdict.EXPIRED, "Expired", f"not started within {after_ms / 1000:g} s of its time"
    )
