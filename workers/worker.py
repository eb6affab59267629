"""The worker daemon: consumers claim by permits, a pool runs handlers, one thread acks.

Threads of a worker process::

    consumer ──claim batch──> timer (timing wheel, for messages due within the lookahead)
        │                          │
        └────── due now ───────────┴──> pool (threads, or processes) runs handlers
                                             │
    heartbeat: extends leases of held work   └──results──> acker: ack + next occurrence,
                                                           retry, poison; gives permits back

Shutdown, in this order (SIGTERM/SIGINT, ``--duration``, ``--burst`` or ``stop()``):
1. consumers stop claiming;
2. claims not started (parked in the wheel or queued for the pool) are released at once;
3. running handlers get ``grace_s`` to finish while heartbeats keep their leases;
4. the acker commits every result; heartbeats stop; the pool and backend are closed.
A second signal skips step 3: running handlers are abandoned and their leases expire.
"""

from __future__ import annotations

import logging
import queue as queue_module
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from scheduler import App, BackendError, DecodeError, Message, TickworkError
from scheduler.backends import Claim, Envelope, Failure
from scheduler.clock import to_datetime
from workers.execution import HandlerResult, Verdict
from workers.flow import Counters, Permits, WorkerStats
from workers.pool import ProcessPool, ThreadPool
from workers.timing_wheel import TimingWheel

log = logging.getLogger("tickwork.worker")


class WorkerConfig(BaseModel):
    """How a worker consumes. Defaults suit I/O-bound handlers on a small machine."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    queues: tuple[str, ...] = ("default",)
    concurrency: int = Field(default=8, ge=1)
    pool: Literal["thread", "process"] = "thread"
    prefetch: int | None = Field(default=None, ge=0)  # default: 2 x concurrency
    batch_size: int = Field(default=100, ge=1)
    lookahead_ms: int = Field(default=500, ge=0)
    poll_interval_s: float = Field(default=1.0, gt=0)
    grace_s: float = Field(default=30.0, ge=0)
    burst: bool = False
    timer_capacity: int = Field(default=10_000, ge=0)  # claims parked in the wheel, at most
    install_periodic: bool = True
    app_reference: str | None = None  # "module" or "module:app", needed by the process pool

    @property
    def permits(self) -> int:
        return self.concurrency + (2 * self.concurrency if self.prefetch is None else self.prefetch)


@dataclass(slots=True)
class _Work:
    claim: Claim
    message: Message
    started_ms: int = 0
    holds_permit: bool = True  # parked in the timing wheel: no permit until it fires


class Worker:
    """One worker process's dispatcher. ``run()`` blocks; ``start()``/``stop()``/``join()``
    let tests and embedders drive it."""

    def __init__(self, app: App, config: WorkerConfig | None = None) -> None:
        self.app = app
        self.config = config or WorkerConfig()
        if self.config.pool == "process" and not self.config.app_reference:
            raise TickworkError("the process pool needs app_reference ('module' or 'module:app')")
        self.backend = app.backend
        self._counters = Counters()
        self._permits = Permits(self.config.permits)
        self._results: queue_module.SimpleQueue[tuple[_Work, HandlerResult]] = (
            queue_module.SimpleQueue()
        )
        self._held: dict[tuple[str, str], _Work] = {}  # (id, token) -> work owned here
        self._held_lock = threading.Lock()
        self._deadlines: dict[tuple[str, str], int] = {}
        self._stopping = threading.Event()
        self._force = threading.Event()
        self._consumers_done = threading.Event()
        self._acker_done = threading.Event()
        self._offset_ms = 0
        self._wheel_condition = threading.Condition()
        self._wheel: TimingWheel[_Work] = TimingWheel(1, 20, self._now_ms())
        self._threads: list[threading.Thread] = []
        self._pool: ThreadPool[_Work] | ProcessPool[_Work] | None = None
        self._pending_empty_polls = 0
        self._grace_deadline: float | None = None

    # -- public --------------------------------------------------------------------------

    @property
    def stats(self) -> WorkerStats:
        return self._counters.snapshot()

    def start(self) -> None:
        """Install periodic schedules and start the threads."""
        self._offset_ms = self.backend.now_ms() - int(time.time() * 1000)
        if self.config.install_periodic:
            self.app.install_periodic()
        if self.config.pool == "process":
            assert self.config.app_reference is not None
            self._pool = ProcessPool(
                self.config.app_reference, self.config.concurrency, self._finished
            )
        else:
            self._pool = ThreadPool(self.app, self.config.concurrency, self._finished)
        for name, target in (
            ("consumer", self._consume),
            ("timer", self._time),
            ("acker", self._ack_loop),
            ("heartbeat", self._heartbeat),
        ):
            thread = threading.Thread(target=target, name=f"tickwork-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info(
            "worker started: queues=%s concurrency=%d pool=%s",
            ",".join(self.config.queues),
            self.config.concurrency,
            self.config.pool,
        )

    def stop(self, force: bool = False) -> None:
        """Ask the worker to shut down (gracefully; at once with ``force``). Returns at once."""
        if force:
            self._force.set()
        self._stopping.set()
        with self._wheel_condition:
            self._wheel_condition.notify_all()
        self._permits.give(0)

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    @property
    def forced(self) -> bool:
        """True when the worker was stopped at once (running handlers were abandoned)."""
        return self._force.is_set()

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait for a stopped worker to finish its shutdown; True when it has."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for thread in self._threads:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(remaining)
        return not any(t.is_alive() for t in self._threads)

    def run(self, duration_s: float | None = None) -> WorkerStats:
        """Run until a signal, ``stop()``, ``duration_s`` elapsing, or (``burst``) idleness."""
        handlers = self._install_signals()
        try:
            self.start()
            deadline = None if duration_s is None else time.monotonic() + duration_s
            while not self._stopping.wait(0.2):
                if deadline is not None and time.monotonic() >= deadline:
                    log.info("duration of %.1f s reached: shutting down", duration_s)
                    self.stop()
            self.join()
        finally:
            for signum, previous in handlers.items():
                signal.signal(signum, previous)
        stats = self.stats
        log.info("worker stopped: %s", stats.as_dict())
        return stats

    # -- signals -------------------------------------------------------------------------

    def _install_signals(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous: dict[int, Any] = {}

        def on_signal(signum: int, _frame: object) -> None:
            if self._stopping.is_set():
                log.warning("second signal: stopping at once")
                self.stop(force=True)
            else:
                log.info("signal %d: shutting down gracefully (again to force)", signum)
                self.stop()

        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, on_signal)
        return previous

    # -- time ----------------------------------------------------------------------------

    def _now_ms(self) -> int:
        """The backend's clock, estimated locally (offset measured at start)."""
        return int(time.time() * 1000) + self._offset_ms

    # -- consumer ------------------------------------------------------------------------

    def _consume(self) -> None:
        idle_s = 0.01
        try:
            while not self._stopping.is_set():
                wanted = self._permits.take(self.config.batch_size, timeout_s=0.2, linger_s=0.01)
                if not wanted:
                    continue
                claimed, next_due = self._claim_round(wanted)
                if claimed:
                    idle_s = 0.01
                    continue
                self._counters.add("empty_polls")
                self._pending_empty_polls += 1
                nothing_due = next_due is None or next_due > self._now_ms()
                if self.config.burst and self._idle() and nothing_due:
                    log.info("burst: nothing due or running; stopping")
                    self.stop()
                    break
                sleep_s = min(idle_s, self.config.poll_interval_s)
                if next_due is not None:
                    until_due = (next_due - self.config.lookahead_ms - self._now_ms()) / 1000
                    sleep_s = max(0.001, min(sleep_s, until_due)) if until_due > 0 else 0.001
                idle_s = min(idle_s * 2, self.config.poll_interval_s)
                self._stopping.wait(sleep_s)
        finally:
            self._consumers_done.set()

    def _claim_round(self, wanted: int) -> tuple[int, int | None]:
        """Claim across the queues with ``wanted`` permits; give back what was not used."""
        claimed = 0
        next_due: int | None = None
        try:
            for queue in self.config.queues:
                if claimed >= wanted:
                    break
                lookahead = self.config.lookahead_ms if self._has_timer_room() else 0
                batch = self.backend.claim(queue, wanted - claimed, lookahead)
                claimed += len(batch.claims)
                if batch.next_due_ms is not None:
                    next_due = (
                        batch.next_due_ms if next_due is None else min(next_due, batch.next_due_ms)
                    )
                for claim in batch.claims:
                    self._accept(claim)
        except BackendError as err:
            self._counters.add("backend_errors")
            log.warning("claim failed: %s", err)
            self._stopping.wait(0.5)
        finally:
            self._permits.give(wanted - claimed)
        self._counters.add("claimed", claimed)
        return claimed, next_due

    def _has_timer_room(self) -> bool:
        with self._wheel_condition:
            return self._wheel.size < self.config.timer_capacity

    def _idle(self) -> bool:
        with self._held_lock:
            return not self._held

    def _accept(self, claim: Claim) -> None:
        """Take ownership of a claim: decode it, then park it or run it."""
        try:
            message = Message.decode(claim.body)
        except DecodeError as err:
            self._poison_now(claim, Failure("undecodable", "DecodeError", str(err)))
            return
        if message.task not in self.app.tasks:
            self._poison_now(
                claim,
                Failure(
                    "unknown_task",
                    "UnknownTask",
                    f"no task named {message.task!r} is registered here",
                ),
            )
            return
        work = _Work(claim, message)
        with self._held_lock:
            self._held[claim.id, claim.token] = work
            self._deadlines[claim.id, claim.token] = claim.deadline_ms
        if claim.due_ms > self._now_ms():
            with self._wheel_condition:
                parked = self._wheel.add(work, claim.due_ms)
                if parked:
                    self._wheel_condition.notify()
            if parked:
                # a parked message waits for its time, not for a worker: its lease counts
                # from its due time, so it gives its permit back until it fires
                work.holds_permit = False
                self._permits.give(1)
                return
        self._submit(work)

    def _poison_now(self, claim: Claim, failure: Failure) -> None:
        log.error("poisoning %s: %s", claim.id, failure.message)
        try:
            done = self.backend.poison(claim, failure)
        except BackendError as err:
            log.warning("poison of %s failed (its lease will expire): %s", claim.id, err)
            done = False
        self._counters.add("poisoned" if done else "stale")
        self._permits.give(1)

    # -- timer ---------------------------------------------------------------------------

    def _time(self) -> None:
        while True:
            with self._wheel_condition:
                if self._stopping.is_set():
                    parked = self._wheel.drain()
                    break
                expiration = self._wheel.next_expiration()
                wait_s = (
                    0.2 if expiration is None else max(0.0, (expiration - self._now_ms()) / 1000)
                )
                if wait_s > 0:
                    self._wheel_condition.wait(min(wait_s, 0.2))
                due = self._wheel.advance(self._now_ms())
            for work in due:
                self._permits.force(1)  # may overdraw: the consumer waits until it is paid back
                work.holds_permit = True
                self._submit(work)
        self._release(parked)

    # -- pool ----------------------------------------------------------------------------

    def _submit(self, work: _Work) -> None:
        pool = self._pool
        assert pool is not None
        if self._stopping.is_set():
            self._release([work])
            return
        message = work.message
        work.started_ms = self._now_ms()
        if log.isEnabledFor(logging.INFO):
            log.info(
                "fire %s id=%s scheduled=%s actual=%s late=%dms attempt=%d",
                message.task,
                message.id,
                message.scheduled_at.isoformat(timespec="milliseconds"),
                to_datetime(work.started_ms).isoformat(timespec="milliseconds"),
                work.started_ms - work.claim.due_ms,
                work.claim.attempt,
            )
        pool.submit(work, message.task, message.args, message.kwargs)

    def _finished(self, work: _Work, result: HandlerResult) -> None:
        self._results.put((work, result))

    def _release(self, works: list[_Work]) -> None:
        """Give back claims that never started."""
        if not works:
            return
        try:
            released = self.backend.release([w.claim for w in works])
        except BackendError as err:
            log.warning("release failed (leases will expire instead): %s", err)
            released = 0
        self._counters.add("released", released)
        self._forget(works)

    def _forget(self, works: list[_Work]) -> None:
        with self._held_lock:
            for work in works:
                self._held.pop((work.claim.id, work.claim.token), None)
                self._deadlines.pop((work.claim.id, work.claim.token), None)
        self._permits.give(sum(work.holds_permit for work in works))

    # -- acker ---------------------------------------------------------------------------

    def _ack_loop(self) -> None:
        last_flush = time.monotonic()
        while True:
            batch = self._drain_results()
            if batch:
                self._settle(batch)
            if time.monotonic() - last_flush > 5:
                self._flush_counters()
                last_flush = time.monotonic()
            if (
                self._consumers_done.is_set()
                and self._stopping.is_set()
                and not batch
                and self._shutdown_step()
            ):
                break
        self._flush_counters()
        self._acker_done.set()

    def _drain_results(self) -> list[tuple[_Work, HandlerResult]]:
        try:
            first = self._results.get(timeout=0.05)
        except queue_module.Empty:
            return []
        batch = [first]
        while len(batch) < 1000:
            try:
                batch.append(self._results.get_nowait())
            except queue_module.Empty:
                break
        return batch

    def _settle(self, batch: list[tuple[_Work, HandlerResult]]) -> None:
        now = self._now_ms()
        acks: list[tuple[Claim, Envelope | None]] = []
        ack_works: list[_Work] = []
        done: list[_Work] = []
        for work, result in batch:
            claim, message = work.claim, work.message
            if result.verdict is Verdict.ACK:
                acks.append((claim, self._next(message, now)))
                ack_works.append(work)
                if log.isEnabledFor(logging.INFO):
                    log.info(
                        "done %s id=%s in %.1fms", message.task, message.id, result.duration_ms
                    )
                continue
            done.append(work)
            if result.verdict is Verdict.REDELIVER:
                log.info(
                    "%s id=%s returned False: due again when its lease ends",
                    message.task,
                    message.id,
                )
                self._counters.add("redelivered")
            elif result.verdict is Verdict.FAIL and claim.attempt < message.max_attempts:
                self._retry(work, result, now)
            else:
                self._poison(work, result, now)
        if acks:
            results = self._with_retries(lambda: self.backend.ack(acks))
            if results is not None:
                held = sum(results)
                self._counters.add("acked", held)
                self._counters.add("stale", len(results) - held)
                for (claim, _), ok in zip(acks, results, strict=True):
                    if not ok:
                        log.warning(
                            "ack of %s refused: its lease was lost (it ran again elsewhere "
                            "or was cancelled); no next occurrence from this run",
                            claim.id,
                        )
        self._forget(ack_works + done)

    def _next(self, message: Message, now: int) -> Envelope | None:
        try:
            return self.app.next_occurrence(message, now)
        except TickworkError as err:
            log.error("cannot schedule the next occurrence of %s: %s", message.id, err)
            return None

    def _retry(self, work: _Work, result: HandlerResult, now: int) -> None:
        claim, message = work.claim, work.message
        policy = self.app.tasks[message.task].options.retry
        delay_s = policy.delay_s(claim.attempt) or policy.base_s
        log.warning(
            "%s id=%s failed (attempt %d of %d): %s: %s; retrying in %.2fs",
            message.task,
            message.id,
            claim.attempt,
            message.max_attempts,
            result.error_type,
            result.error,
            delay_s,
        )
        error = f"{result.error_type}: {result.error}"
        ok = self._with_retries(lambda: self.backend.retry(claim, now + int(delay_s * 1000), error))
        self._counters.add("retried" if ok else "stale")

    def _poison(self, work: _Work, result: HandlerResult, now: int) -> None:
        claim, message = work.claim, work.message
        reason = "exception" if result.verdict is Verdict.FAIL else "invalid"
        log.error(
            "%s id=%s goes to the poison queue after %d attempt(s): %s: %s",
            message.task,
            message.id,
            claim.attempt,
            result.error_type,
            result.error,
        )
        failure = Failure(reason, result.error_type, result.error, result.traceback)
        nxt = self._next(message, now)
        ok = self._with_retries(lambda: self.backend.poison(claim, failure, nxt))
        self._counters.add("poisoned" if ok else "stale")

    def _with_retries(self, operation: Callable[[], Any]) -> Any:
        """Run a backend write, retrying on backend errors until it works or we are forced."""
        delay = 0.05
        while True:
            try:
                return operation()
            except BackendError as err:
                self._counters.add("backend_errors")
                if self._force.is_set():
                    log.error("giving up a backend write on forced stop: %s", err)
                    return None
                log.warning("backend write failed, retrying in %.2fs: %s", delay, err)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _shutdown_step(self) -> bool:
        """During shutdown: release unstarted work, wait for running work; True when done."""
        if self._pool is not None:
            self._release(self._pool.unstarted())
        with self._held_lock:
            running = list(self._held.values())
        if not running:
            return True
        if self._grace_deadline is None:
            self._grace_deadline = time.monotonic() + self.config.grace_s
            log.info(
                "waiting up to %.0fs for %d running handler(s)", self.config.grace_s, len(running)
            )
        if self._force.is_set() or time.monotonic() >= self._grace_deadline:
            log.warning("abandoning %d running handler(s); their leases will expire", len(running))
            return True
        return False

    def _flush_counters(self) -> None:
        pending, self._pending_empty_polls = self._pending_empty_polls, 0
        if pending:
            try:
                self.backend.add_counters(self.config.queues[0], {"empty_polls": pending})
            except BackendError:
                self._pending_empty_polls += pending

    # -- heartbeat -----------------------------------------------------------------------

    def _heartbeat(self) -> None:
        while not self._acker_done.wait(0.25):
            now = self._now_ms()
            with self._held_lock:
                expiring = [
                    w
                    for handle, w in self._held.items()
                    if self._deadlines.get(handle, 0) - now < w.claim.timeout_ms / 2
                ]
            by_timeout: dict[int, list[_Work]] = {}
            for work in expiring:
                by_timeout.setdefault(work.claim.timeout_ms, []).append(work)
            for timeout_ms, works in by_timeout.items():
                try:
                    held = self.backend.extend([w.claim for w in works], timeout_ms)
                except BackendError as err:
                    log.warning("lease heartbeat failed: %s", err)
                    continue
                with self._held_lock:
                    for work, ok in zip(works, held, strict=True):
                        if ok and (work.claim.id, work.claim.token) in self._deadlines:
                            self._deadlines[work.claim.id, work.claim.token] = now + timeout_ms
                        elif not ok:
                            log.warning("lease of %s was lost while it ran", work.claim.id)
        self._shutdown_pool()

    def _shutdown_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=not self._force.is_set())
