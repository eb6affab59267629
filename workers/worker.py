"""The worker daemon: its lifecycle, the shutdown order and the signals.

Threads of a worker process, one module each::

    consumer.py ──claim batch──> timer.py (timing wheel: claims due within the lookahead)
        │                            │
        └──────── due now ───────────┴──> pool.py (threads or processes) runs handlers;
                                          async_pool.py (an event loop) runs async ones
                                               │
    heartbeat.py: extends leases of held work  └──results──> settler.py: ack + next
    aborts.py: stops handlers of aborted runs                occurrence, retry, poison;
    limits.py: concurrency slots, taken before               gives permits (and slots)
        a run starts (its caller's thread)                   back
    rates.py: rate-limited starts, reserved before those slots
    presence.py: this worker's record in the worker registry
    health.py: alive and ready, served by endpoint.py (``/metrics``, ``/healthz``,
        ``/readyz``) and told to systemd (systemd.py)
    reports.py: what it reports beside its work, each reporter registered there: the
        activity log (the charts), live changes (the streams), OpenTelemetry's metrics

``holdings.py`` is the work owned by this process (shared, with its lock); ``flow.py``
the permits and counters; ``lifecycle.py`` the signals and a failed thread's stop;
``launch.py`` starts admitted work on the pool; ``gathering.py`` holds batched tasks'
calls until their batch runs. This module wires them together, each
given the one ``WorkerContext`` (``context.py``) and its peers, and runs them; it is the
one worker module that sees ``App``.

Shutdown, in this order (SIGTERM/SIGINT, ``--duration``, ``--burst`` or ``stop()``):
1. the consumer stops claiming;
2. claims not started (parked in the wheel or queued for the pool) are released at once;
3. running handlers get ``grace_s`` to finish while heartbeats keep their leases;
4. the settler commits every result; heartbeats stop; the pool and backend are closed.
A second signal skips step 3: running handlers are abandoned and their leases expire; so
does the end of the grace period (the stop is then ``forced``, and the CLI exits with 1
without waiting for the abandoned handlers' threads). A thread of the worker that raises
(a bug, not a backend error: those are retried where they happen) is logged and stops the
worker in the same order; ``failed`` names it and the CLI exits with 1. So does a worker
past its memory bound (``max_memory_mb``: ``reporting/memory_bound.py``).

Time: every component reads the worker's ``now_ms``, the injected ``Clock`` (tests drive
time with a ``ManualClock``) corrected to the backend's clock: its offset is measured
before the timer builds its wheel, again once a minute, and at once after a step of the
local clock (``CorrectedClock``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from tickwork.scheduler import App, BackendError
from tickwork.scheduler.clock import Clock, CorrectedClock, SystemClock
from tickwork.scheduler.limits.view import declared_limits
from tickwork.scheduler.runs.tracing import look_for_provider
from tickwork.workers.admission.admission import Admission
from tickwork.workers.admission.limits import LimitGate
from tickwork.workers.admission.live_limits import LiveCapacities
from tickwork.workers.admission.rates import RateGate
from tickwork.workers.boot import BOOT_STEPS
from tickwork.workers.config import WorkerConfig
from tickwork.workers.context import WorkerContext
from tickwork.workers.intake.aborts import AbortWatcher
from tickwork.workers.intake.consumer import Consumer
from tickwork.workers.intake.flow import Counters, Pace, Permits, WorkerStats
from tickwork.workers.intake.heartbeat import Heartbeat
from tickwork.workers.intake.holdings import Holdings, Work
from tickwork.workers.intake.parked import ParkedCheck
from tickwork.workers.intake.timer import Timer
from tickwork.workers.lifecycle import guarded, stop_signals
from tickwork.workers.pools.async_pool import AsyncPool, RoutingPool
from tickwork.workers.pools.execution import HandlerResult
from tickwork.workers.pools.gathering import Gathering
from tickwork.workers.pools.kinds import make_pool
from tickwork.workers.pools.launch import Launcher
from tickwork.workers.pools.pool import HandlerPool, PoolSpec
from tickwork.workers.reporting.endpoint import WorkerEndpoint
from tickwork.workers.reporting.health import Health
from tickwork.workers.reporting.memory_bound import MemoryBound
from tickwork.workers.reporting.metrics import NoMetrics, WorkerMetrics
from tickwork.workers.reporting.presence import Presence
from tickwork.workers.reporting.reports import Reports, counted
from tickwork.workers.reporting.systemd import SystemdNotifier
from tickwork.workers.settling.settler import Settler

log = logging.getLogger("tickwork.worker")


class Worker:
    """One worker process's dispatcher. ``run()`` blocks; ``start()``/``stop()``/``join()``
    let tests and embedders drive it."""

    def __init__(
        self, app: App, config: WorkerConfig | None = None, *, clock: Clock | None = None
    ) -> None:
        self.app = app
        self.config = config or WorkerConfig()
        self.backend = app.backend
        self._boot_steps = tuple(BOOT_STEPS)
        for step in self._boot_steps:  # what the worker cannot do fails here, at once
            step.check(app, self.config)
        self.clock: Clock = clock or SystemClock()
        # the backend's clock, read locally: every component (the timer's wheel first of
        # all, built below) must agree with what the backend compares due times against
        self._time = CorrectedClock(self.backend.now_ms, self.clock, errors=(BackendError,))
        self._grace_deadline_ms: int | None = None
        #: the first of the worker's threads that raised; the worker then stops (the CLI
        #: exits with 1): without its consumer, settler or timer it would only look alive
        self.failed: str | None = None
        self._has_async = app.registry.has_async
        async_slots = self.config.async_concurrency if self._has_async else 0
        permits = Permits(self.config.permits + async_slots)
        self._pace = (  # no prefetch given: it follows the handlers' pace
            Pace(permits, self.config.concurrency, self.config.concurrency + async_slots)
            if self.config.prefetch is None
            else None
        )
        holdings = Holdings()
        self._context = context = WorkerContext(
            app=app,
            config=self.config,
            backend=self.backend,
            now_ms=self._now_ms,
            holdings=holdings,
            permits=permits,
            counters=Counters(),
            metrics=WorkerMetrics(holdings) if counted(self.config) else NoMetrics(),
            stopping=threading.Event(),
            forced=threading.Event(),
            wake=threading.Event(),
            pace=self._pace,
        )
        self._settled = threading.Event()
        #: where ``/metrics`` is served once started (``metrics_port`` 0 picks a free port)
        self.metrics_port: int | None = None
        self._endpoint: WorkerEndpoint | None = None
        self._limits = LimitGate(context)
        self._rates = RateGate(context, self._limits.live)
        self._settler = Settler(context, self._limits)
        self._timer = Timer(
            self._now_ms,
            permits,
            ParkedCheck(self.backend, self._submit, self._settler.forget),  # cancelled?
            self._settler.release,
            context.stopping,
            self.config.timer_capacity,
        )
        self._aborts = AbortWatcher(self.backend, holdings, self.config.abort_check_s)
        self._admission = Admission(context, self._aborts, self._rates, self._limits, self._settler)
        self._consumer = Consumer(
            context, self._timer, self._settler, self._admission, self._submit, self.stop
        )
        self._launcher = Launcher(context, self._settler)
        self._heartbeat = Heartbeat(self.backend, holdings, self._now_ms)
        self._presence = Presence(context)
        self._reports = Reports(context, self._presence.worker_id)
        self.health = Health(
            lambda: self._heartbeat.turned_at,
            lambda: self.failed,
            context.stopping.is_set,
            self.backend.now_ms,
            self.config.health_stale_s,
        )
        self._pool: HandlerPool[Work] | None = None
        self._threads: list[threading.Thread] = []
        if self.config.pool == "process" and not self.config.app_reference:
            # fail at construction, before any thread starts
            make_pool(self.config.pool, PoolSpec(app, None, 0), self._settler.finished)

    # -- public --------------------------------------------------------------------------

    @property
    def stats(self) -> WorkerStats:
        return self._context.counters.snapshot()

    def start(self) -> None:
        """Install periodic schedules and event subscriptions, and start the threads."""
        self._time.measure()  # an unreachable backend fails the start
        look_for_provider()  # a tracer provider the application set before it starts
        metrics = self._context.metrics
        if isinstance(metrics, WorkerMetrics) and self.config.metrics_port is not None:
            self._endpoint = WorkerEndpoint(metrics.registry, self.health)
            self.metrics_port = self._endpoint.start(
                self.config.metrics_port, self.config.metrics_host
            )
            log.info(
                "metrics on http://%s:%d/metrics (probes: /healthz, /readyz)",
                self.config.metrics_host,
                self.metrics_port,
            )
        for step in self._boot_steps:
            step.boot(self.app, self.config)
        services = self._reports.services(self.app)
        spec = PoolSpec(
            self.app,
            self.config.app_reference,
            self.config.concurrency,
            self.config.abort_grace_s,
            self.config.time_limit_grace_s,
            self.config.adaptive_threads,
            on_crash=metrics.crashed,
            max_tasks_per_child=self.config.max_tasks_per_child,
            max_memory_per_child_mb=self.config.max_memory_per_child_mb,
            services=services,
        )
        # batched tasks' calls wait to run together (None: the app has none)
        gathering = Gathering.of(self._context, self._finished)
        finished = self._finished if gathering is None else gathering.finished
        pool: HandlerPool[Work] = make_pool(self.config.pool, spec, finished)
        metrics.watch_pool(pool)
        if self._has_async:
            loop = AsyncPool[Work](self.app, self.config.async_concurrency, finished, services)
            pool = RoutingPool(self.app, pool, loop)
        if gathering is not None:
            gathering.inner, pool = pool, gathering
        self._pool = self._launcher.pool = pool
        roles: list[tuple[str, Callable[[], None]]] = [
            ("consumer", self._consumer.run),
            ("timer", self._timer.run),
            ("settler", self._settle),
            ("heartbeat", self._beat),
            ("aborts", self._watch_aborts),
            ("presence", lambda: self._presence.run(until=self._settled)),
        ]
        if gathering is not None:
            roles.append(("gathering", lambda: gathering.run(until=self._settled)))
        roles += self._reports.roles(until=self._settled)
        if declared_limits(self.app.registry):  # capacities an operator may change live
            live = self._limits.live
            roles.append(("limits", lambda: live.run(until=self._context.stopping)))
        if (notifier := SystemdNotifier.from_environment(self.health)) is not None:
            stopping = self._context.stopping
            roles.append(("systemd", lambda: notifier.run(stopping, until=self._settled)))
        if (limit_mb := self.config.max_memory_mb) is not None:
            bound = MemoryBound(limit_mb, self._over_memory)
            roles.append(("memory", lambda: bound.run(until=self._context.stopping)))
        for name, target in roles:
            thread = threading.Thread(
                target=guarded(name, target, self._thread_failed),
                name=f"tickwork-{name}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)
        log.info(
            "worker started: queues=%s concurrency=%d pool=%s",
            ",".join(self.config.queues),
            self.config.concurrency,
            self.config.pool,
        )

    def _thread_failed(self, role: str) -> None:
        self.failed = self.failed or role
        self.stop()

    def _over_memory(self, why: str) -> None:
        self.failed = self.failed or f"memory ({why})"
        self.stop()

    def stop(self, force: bool = False) -> None:
        """Ask the worker to shut down (gracefully; at once with ``force``). Returns at once."""
        if force:
            self._context.forced.set()
        self._context.stopping.set()
        self._consumer.nudge()
        self._timer.wake()
        self._context.permits.give(0)

    @property
    def limits(self) -> LiveCapacities:
        """The limits' capacities this worker enforces now (``concurrency(name,
        declared)``, ``rate(name, declared)``): set at run time, or declared."""
        return self._limits.live

    @property
    def active_queues(self) -> tuple[str, ...]:
        """The queues this worker claims from now: its queues minus the paused ones."""
        return self._consumer.active

    @property
    def stopping(self) -> bool:
        return self._context.stopping.is_set()

    @property
    def forced(self) -> bool:
        """True when the worker was stopped at once (running handlers were abandoned)."""
        return self._context.forced.is_set()

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait for a stopped worker to finish its shutdown; True when it has."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for thread in self._threads:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(remaining)
        return not any(t.is_alive() for t in self._threads)

    def run(self, duration_s: float | None = None) -> WorkerStats:
        """Run until a signal, ``stop()``, ``duration_s`` elapsing, or (``burst``) idleness."""
        with stop_signals(self.stop, self._context.stopping.is_set):
            self.start()
            deadline = None if duration_s is None else time.monotonic() + duration_s
            while not self._context.stopping.wait(0.2):
                if deadline is not None and time.monotonic() >= deadline:
                    log.info("duration of %.1f s reached: shutting down", duration_s)
                    self.stop()
            self.join()
        stats = self.stats
        log.info("worker stopped: %s", stats.as_dict())
        return stats

    # -- wiring --------------------------------------------------------------------------

    def _now_ms(self) -> int:
        """The backend's clock, estimated locally (its offset measured once a minute, and
        after a step of the local clock)."""
        return self._time.now_ms()

    def _finished(self, work: Work, result: HandlerResult) -> None:
        """A pool's callback: a handler is done (any thread)."""
        if self._pace is not None:
            self._pace.ran(result.duration_ms)
        self._settler.finished(work, result)

    def _submit(self, works: list[Work]) -> None:
        """Hand claimed work that is due to the pool (from the consumer or the timer),
        through admission (``admission/admission.py``): aborts, rates, concurrency limits."""
        if self._context.stopping.is_set():
            self._settler.release(works)
            return
        for work in self._admission.admit(works):
            self._launcher.start(work)

    def _settle(self) -> None:
        try:
            self._settler.run(self._shutdown_step)
        finally:
            self._settled.set()

    def _beat(self) -> None:
        self._heartbeat.run(until=self._settled)
        if self._pool is not None:  # step 4: after the last result was settled
            self._pool.shutdown(wait=not self._context.forced.is_set())
        if self._endpoint is not None:
            self._endpoint.stop()

    def _watch_aborts(self) -> None:
        assert self._pool is not None
        self._aborts.run(self._pool, until=self._settled)

    def _shutdown_step(self) -> bool:
        """Steps 2 and 3 of shutdown, polled by the settler when it has nothing to do:
        release unstarted work, wait for running work; True when the settler may stop."""
        if not (self._context.stopping.is_set() and self._consumer.done.is_set()):
            return False
        if self._pool is not None:
            self._settler.release(self._pool.unstarted())
        running = self._context.holdings.all()
        if not running:
            return True
        now = self.clock.now_ms()
        if self._grace_deadline_ms is None:
            self._grace_deadline_ms = now + int(self.config.grace_s * 1000)
            log.info(
                "waiting up to %.0fs for %d running handler(s)", self.config.grace_s, len(running)
            )
        if self._context.forced.is_set() or now >= self._grace_deadline_ms:
            log.warning("abandoning %d running handler(s); their leases will expire", len(running))
            # past the grace the stop is forced: do not wait for their threads
            self._context.forced.set()
            return True
        return False
