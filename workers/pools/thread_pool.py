"""The default pool: handlers on a fixed set of threads."""

from __future__ import annotations

import itertools
import queue
import threading
from functools import partial
from typing import Any

from tickwork.scheduler.runs.context import RunContext, RunInfo
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.pools.execution import HandlerResult, Verdict, aborted, run_handler
from tickwork.workers.pools.pool import Done, HandlerPool, W
from tickwork.workers.pools.services import RunServices
from tickwork.workers.pools.thread_tuning import ThreadGate
from tickwork.workers.pools.time_limits import ThreadLimits, over_limit_message


class ThreadPool(HandlerPool[W]):
    """A fixed set of threads fed by one queue (lighter than ``ThreadPoolExecutor``: no
    future per message), of which as many take work as the handlers' pace needs
    (``adaptive``; ``workers/pools/thread_tuning.py``), else all of them. Abort sets the run's
    flag (``current_run().aborted``): a thread cannot be stopped from outside, so a
    handler that never looks runs to its end. A run past its time limit gets
    ``TimeLimitExceeded`` raised in it, and is abandoned (its thread replaced) if it does
    not stop (``workers/pools/time_limits.py``)."""

    def __init__(
        self,
        app: WorkerApp,
        size: int,
        on_done: Done[W],
        time_limit_grace_s: float = 5.0,
        adaptive: bool = True,
        services: RunServices | None = None,
    ) -> None:
        self._app = app
        self._services = services or RunServices.of(app)  # one for every run
        self._on_done = on_done
        self._queue: queue.SimpleQueue[
            tuple[W, str, list[Any], dict[str, Any], RunContext] | None
        ] = queue.SimpleQueue()
        self._runs: dict[int, RunContext] = {}  # id(item) -> its run, from submit to done
        self._limits = ThreadLimits(time_limit_grace_s)
        self._gate = ThreadGate(size, lambda: not self._queue.empty(), adaptive)
        self._names = itertools.count()
        self._threads_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        for index in range(size):
            self._add_thread(index)

    @property
    def taking_work(self) -> int:
        """How many of the pool's threads take work now (``workers/pools/thread_tuning.py``)."""
        return self._gate.limit

    def _add_thread(self, index: int) -> None:
        thread = threading.Thread(
            target=self._run, args=(index,), name=f"tickwork-pool-{next(self._names)}", daemon=True
        )
        with self._threads_lock:
            self._threads.append(thread)
        thread.start()

    def submit(
        self, item: W, task: str, args: list[Any], kwargs: dict[str, Any], info: RunInfo
    ) -> None:
        run = self._services.context(info)
        self._runs[id(item)] = run  # single dict operations are atomic: no lock per message
        self._queue.put((item, task, args, kwargs, run))

    def abort(self, item: W, grace_s: float | None = None) -> bool:
        run = self._runs.get(id(item))
        if run is None:
            return False
        run.request_abort()
        return True

    def _run(self, index: int) -> None:
        gate = self._gate
        while True:
            gate.wait_turn(index)
            job = self._queue.get()
            if job is None:
                return
            item, task, args, kwargs, run = job
            guard = None
            gate.started(index)
            if run.aborted:  # aborted while it waited for a thread: it never starts
                result = aborted("aborted before it started")
            elif run.info.time_limit_s is not None or run.info.soft_time_limit_s is not None:
                limit = run.info.time_limit_s
                stuck = partial(
                    self._abandon, item, limit or 0.0, threading.current_thread(), index
                )
                guard = self._limits.guard(limit, stuck, run.info.soft_time_limit_s)
                result = run_handler(self._app, task, args, kwargs, run, guard)
            else:
                result = run_handler(self._app, task, args, kwargs, run)
            if guard is not None and guard.abandoned:
                return  # its run was reported failed and another thread serves in its place
            gate.finished(index)
            self._runs.pop(id(item), None)
            self._on_done(item, result)

    def _abandon(self, item: W, limit_s: float, thread: threading.Thread, index: int) -> None:
        """A handler past its time limit did not stop: report its run failed (its slot
        and its message are settled) and put a new thread in the place of ``thread``
        (with its number), which is left to itself (shutdown does not wait for it)."""
        with self._threads_lock:
            self._threads.remove(thread)
        self._add_thread(index)
        self._runs.pop(id(item), None)
        message = over_limit_message(limit_s) + ", and did not stop: abandoned"
        self._on_done(item, HandlerResult(Verdict.FAIL, "TimeLimitExceeded", message))

    def unstarted(self) -> list[W]:
        taken: list[W] = []
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return taken
            if job is not None:
                taken.append(job[0])
                self._runs.pop(id(job[0]), None)

    def shutdown(self, wait: bool) -> None:
        self._gate.open()  # parked threads too take their stop
        with self._threads_lock:
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
        if wait:
            for thread in threads:
                thread.join()
