"""The consumer thread: claims batches by permits (Pulsar's flow control).

It takes as many permits as are free (idle handler slots plus a prefetch), claims up to
that many messages across its queues (skipping paused ones, read from the backend once
per poll interval), and gives back what it did not use. Each claim is
decoded and checked here: what can never run goes to the poison queue at once; what is
due later than now is parked in the timer; the rest goes to the pool. With nothing due,
it backs off (doubling up to ``poll_interval_s``), waking early when the backend said
when the next message falls due.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from tickwork.scheduler import BackendError, DecodeError
from tickwork.scheduler.backends import Claim, Failure
from tickwork.scheduler.model.message import Message
from tickwork.workers.admission.admission import Admission
from tickwork.workers.context import WorkerContext
from tickwork.workers.intake.holdings import Work
from tickwork.workers.intake.special import SPECIAL_MESSAGES, may_be_special
from tickwork.workers.intake.timer import Timer
from tickwork.workers.settling.settler import Settler

log = logging.getLogger("tickwork.worker")

_FLUSH_S = 5.0  # empty polls are added to the backend's counters this often


class Consumer:
    """Claims work for this process and routes each claim."""

    def __init__(
        self,
        context: WorkerContext,
        timer: Timer,
        settler: Settler,
        admission: Admission,
        submit: Callable[[list[Work]], None],
        stop: Callable[[], None],
    ) -> None:
        self._limits = admission.limits  # whose slots claims may take
        self._slots = admission.limits.capacities
        self._metrics = context.counting  # None: nothing counts, no call per claim
        self._backend = context.backend
        self._pace = context.pace
        self._config = config = context.config
        self._permits = context.permits
        self._holdings = context.holdings
        self._timer = timer
        self._settler = settler
        self._specials = tuple(SPECIAL_MESSAGES)
        self._tasks = context.app.registry.tasks  # the registry's own dict: aliases too
        self._counters = context.counters
        self._now_ms = context.now_ms
        self._submit = submit
        self._stopping = context.stopping
        self._stop = stop
        # work this worker sent to wait for its rate is due by then
        self._deferred_until = admission.rates.deferred_until
        self._empty_polls = 0  # not yet added to the backend's counters
        self._active = config.queues  # the consumed queues that are not paused
        self._paused_read_at = -float("inf")
        self._nudged = context.wake
        self.done = threading.Event()

    def run(self) -> None:
        """Claim until stopping; an idle wait is cut short by ``nudge`` (work made due
        here) and by the backend's notifications where it sends them (PostgreSQL's
        ``LISTEN/NOTIFY``) for the queues this worker claims from."""
        stop_listening = self._backend.listen(self._config.queues, lambda _: self.nudge())
        try:
            self._claim_until_stopping()
        finally:
            if stop_listening is not None:
                stop_listening()

    def _claim_until_stopping(self) -> None:
        idle_s = 0.01
        last_flush = time.monotonic()
        try:
            while not self._stopping.is_set():
                if time.monotonic() - last_flush > _FLUSH_S:
                    self._flush_counters()
                    last_flush = time.monotonic()
                self._refresh_paused()
                if not self._active:  # every queue paused: look again next poll interval
                    if self._config.burst and self._holdings.empty():
                        log.info("burst: every queue is paused and nothing runs; stopping")
                        self._stop()
                        break
                    self._stopping.wait(self._config.poll_interval_s)
                    continue
                wanted = self._permits.take(self._config.batch_size, timeout_s=0.2, linger_s=0.01)
                if not wanted:
                    continue
                # read before the claim: work settling during it may make more due (a next
                # occurrence, a woken waiter for a concurrency slot) after the claim looked
                idle_before = self._holdings.empty()
                claimed, next_due = self.claim_round(wanted)
                if claimed:
                    idle_s = 0.01
                    continue
                self._counters.add("empty_polls")
                self._empty_polls += 1
                now = self._now_ms()
                nothing_due = next_due is None or next_due > now
                idle = idle_before and self._holdings.empty() and now >= self._deferred_until()
                if self._config.burst and idle and nothing_due:
                    log.info("burst: nothing due, running or waiting for its start; stopping")
                    self._stop()
                    break
                if self._nudged.wait(self._sleep_s(idle_s, next_due)):
                    self._nudged.clear()
                    idle_s = 0.01
                else:
                    idle_s = min(idle_s * 2, self._config.poll_interval_s)
        finally:
            self._flush_counters()
            self.done.set()

    def nudge(self) -> None:
        """Cut an idle wait short: something was made due (a waiter woken for a concurrency
        slot) or the worker is stopping. Any thread."""
        self._nudged.set()

    @property
    def active(self) -> tuple[str, ...]:
        """The consumed queues not paused, as last read from the backend."""
        return self._active

    def _refresh_paused(self) -> None:
        """Read which queues are paused, at most once per poll interval (one small read:
        the whole cost of pausing on the claim path)."""
        now = time.monotonic()
        if now - self._paused_read_at < self._config.poll_interval_s:
            return
        self._paused_read_at = now
        try:
            paused = set(self._backend.queues.paused())
        except BackendError as err:
            log.warning("cannot read paused queues (keeping the last answer): %s", err)
            return
        active = tuple(q for q in self._config.queues if q not in paused)
        if active != self._active:
            stopped = sorted(set(self._active) - set(active))
            started = sorted(set(active) - set(self._active))
            if stopped:
                log.info("queue(s) paused: %s", ", ".join(stopped))
            if started:
                log.info("queue(s) resumed: %s", ", ".join(started))
        self._active = active

    def _sleep_s(self, idle_s: float, next_due: int | None) -> float:
        """How long to wait after an empty claim: the backoff, or less if something falls
        due (within the lookahead) sooner."""
        sleep_s = min(idle_s, self._config.poll_interval_s)
        if next_due is None:
            return sleep_s
        until_due = (next_due - self._config.lookahead_ms - self._now_ms()) / 1000
        return max(0.001, min(sleep_s, until_due)) if until_due > 0 else 0.001

    def claim_round(self, wanted: int) -> tuple[int, int | None]:
        """Claim across the queues with ``wanted`` permits; give back what was not used.
        Returns how many were claimed and the earliest next due time the backend gave."""
        claimed = 0
        next_due: int | None = None
        ready: list[Work] = []
        unused: list[tuple[str, str]] = []  # slots claims took for messages that will not run
        try:
            for queue in self._active:
                if claimed >= wanted:
                    break
                lookahead = self._config.lookahead_ms if self._timer.has_room() else 0
                asked = time.perf_counter()
                batch = self._backend.leases.claim(queue, wanted - claimed, lookahead, self._slots)
                took_s = time.perf_counter() - asked
                if self._metrics is not None:
                    self._metrics.claim_took(queue, took_s)
                if self._pace is not None:
                    self._pace.claimed(took_s)
                claimed += len(batch.claims)
                if batch.next_due_ms is not None:
                    next_due = (
                        batch.next_due_ms if next_due is None else min(next_due, batch.next_due_ms)
                    )
                now = self._now_ms()  # once a batch: its claims are accepted at once
                for claim in batch.claims:
                    work = self.accept(claim, unused, now)
                    if work is not None:
                        ready.append(work)
        except BackendError as err:
            self._counters.add("backend_errors")
            log.warning("claim failed: %s", err)
            self._stopping.wait(0.5)
        finally:
            self._permits.give(wanted - claimed)
            if unused:
                self._limits.release(unused)  # one call for the round
            if ready:
                self._submit(ready)
        self._counters.add("claimed", claimed)
        return claimed, next_due

    def accept(self, claim: Claim, unused: list[tuple[str, str]], now_ms: int) -> Work | None:
        """Take ownership of a claim (it holds a permit): decode it, then park it (due
        after ``now_ms``), or return it to be run now. A claim that will not run adds the
        slot it took, if any, to ``unused`` (the caller gives them back)."""
        message = self._runnable(claim)
        if message is None:
            if claim.slot is not None:
                unused.append((claim.slot, claim.id))
            return None
        work = Work(claim, message, slot=claim.slot)
        self._holdings.add(work)
        if self._metrics is not None:
            self._metrics.claimed(work)
        if claim.due_ms > now_ms and self._timer.park(work, claim.due_ms):
            # a parked message waits for its time, not for a worker: its lease counts
            # from its due time, so it gives its permit back until it fires
            work.holds_permit = False
            self._permits.give(1)
            return None
        return work

    def _runnable(self, claim: Claim) -> Message | None:
        """The message of a claim that may run; None for one settled here at once (it
        can never run, or is a special message: ``intake/special.py``)."""
        if claim.malformed is not None:
            self._settler.poison_now(claim, Failure("undecodable", "DecodeError", claim.malformed))
            return None
        try:
            message = Message.decode(claim.body)
        except DecodeError as err:
            self._settler.poison_now(claim, Failure("undecodable", "DecodeError", str(err)))
            return None
        if not may_be_special(message):
            return message  # the fast path of a plain message
        for special in self._specials:  # settled here, not run: intake/special.py
            if special.matches(message):
                if special.needs_task and message.task not in self._tasks:
                    return message  # admission defers or poisons it
                special.take(claim, message, self._settler)
                return None
        return message

    def _flush_counters(self) -> None:
        pending, self._empty_polls = self._empty_polls, 0
        if pending:
            try:
                self._backend.queues.add_counters(self._config.queues[0], {"empty_polls": pending})
            except BackendError:
                self._empty_polls += pending
