"""``async def`` handlers on an event loop the worker owns, many at a time.

One thread runs the loop, and on it ``size`` long-lived worker coroutines, each taking
the next job and awaiting its handler (no task is created per message: on Python 3.11
that alone cost more than a no-op handler). ``submit`` (from the consumer or timer
thread) queues the job and wakes as many idle workers as there are jobs, once per batch.
Results go to the settler exactly as a thread pool's do, so heartbeats, retries, the
poison queue and next occurrences behave the same for async and sync tasks.

Timeouts: a watchdog on the loop looks every 0.1 s for a handler past its task's
``timeout`` and cancels it (the handler sees ``CancelledError``); the attempt fails with
``TimeoutError`` and is retried or poisoned like any failure. One watchdog instead of a
timer per handler keeps the per-message cost low; the price is up to 0.1 s of slack.

Shutdown: queued work not yet started is handed back (``unstarted``) and released; a
graceful stop waits for running handlers; a forced one cancels them, reports nothing for
them, and their leases expire, so they are delivered again.

Thread-safety: ``submit``, ``unstarted`` and ``shutdown`` may be called from any thread;
the job queue is shared under a lock, everything else lives on the loop's thread.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tickwork.scheduler import UnknownTask
from tickwork.scheduler.runs.context import RunContext, RunInfo
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.pools.execution import HandlerResult, Verdict, aborted, run_async_handler
from tickwork.workers.pools.pool import Done, HandlerPool
from tickwork.workers.pools.services import RunServices
from tickwork.workers.pools.time_limits import over_limit_message

W = TypeVar("W")
Job = tuple[Any, str, list[Any], dict[str, Any], RunInfo]

log = logging.getLogger("tickwork.worker")

#: how often the watchdog looks for handlers past their timeout (s)
_WATCH_S = 0.1
#: how long a forced stop waits for cancelled coroutines to unwind (s)
_CANCEL_WAIT_S = 2.0


@dataclass(slots=True)
class _Running:
    """The handler a worker coroutine is awaiting, and when it must be done by."""

    item: Any
    run: RunContext
    deadline: float  # time.monotonic()
    timeout_s: float
    timed_out: bool = False


class AsyncPool(HandlerPool[W], Generic[W]):
    """Runs ``async def`` handlers on one event loop, at most ``size`` at once."""

    def __init__(
        self, app: WorkerApp, size: int, on_done: Done[W], services: RunServices | None = None
    ) -> None:
        self._app = app
        self._services = services or RunServices.of(app)  # one for every run
        self._size = size
        self._on_done = on_done
        self._jobs: collections.deque[Job] = collections.deque()
        self._lock = threading.Lock()
        self._wake_pending = False  # a wake-up is already scheduled on the loop
        self._closing = False
        self._idle: collections.deque[asyncio.Future[None]] = collections.deque()
        self._running: dict[asyncio.Task[None], _Running] = {}
        self._workers: list[asyncio.Task[None]] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="tickwork-event-loop", daemon=True
        )
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result()

    def submit(
        self, item: W, task: str, args: list[Any], kwargs: dict[str, Any], info: RunInfo
    ) -> None:
        with self._lock:
            self._jobs.append((item, task, args, kwargs, info))
            if self._wake_pending:
                return  # one wake-up (a write to the loop's self-pipe) serves a whole batch
            self._wake_pending = True
        self._loop.call_soon_threadsafe(self._wake)

    def abort(self, item: W, grace_s: float | None = None) -> bool:
        with self._lock:
            queued = next((job for job in self._jobs if job[0] is item), None)
            if queued is not None:
                self._jobs.remove(queued)
        if queued is not None:
            self._on_done(item, aborted("aborted before it started"))
            return True
        if self._loop.is_closed():
            return False
        found = asyncio.run_coroutine_threadsafe(self._cancel(item), self._loop)
        try:
            return found.result(_CANCEL_WAIT_S)
        except (TimeoutError, RuntimeError):
            return False

    def unstarted(self) -> list[W]:
        with self._lock:
            taken = [job[0] for job in self._jobs]
            self._jobs.clear()
        return taken

    def shutdown(self, wait: bool) -> None:
        if self._loop.is_closed():
            return
        future = asyncio.run_coroutine_threadsafe(self._stop(cancel=not wait), self._loop)
        try:
            future.result(None if wait else _CANCEL_WAIT_S + 1)
        except TimeoutError:
            log.warning("the event loop did not stop in time; leaving it")
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()

    # -- on the loop's thread --------------------------------------------------------------

    async def _start(self) -> None:
        self._workers = [asyncio.create_task(self._work()) for _ in range(self._size)]
        self._workers.append(asyncio.create_task(self._watch()))

    def _wake(self) -> None:
        """Wake one idle worker per queued job."""
        with self._lock:
            self._wake_pending = False
            jobs = len(self._jobs)
        while jobs and self._idle:
            waiter = self._idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                jobs -= 1

    def _next_job(self) -> Job | None:
        with self._lock:
            return self._jobs.popleft() if self._jobs and not self._closing else None

    async def _work(self) -> None:
        me = asyncio.current_task()
        assert me is not None
        while not self._closing:
            job = self._next_job()
            if job is None:
                waiter = self._loop.create_future()
                self._idle.append(waiter)
                with self._lock:
                    queued = bool(self._jobs)
                if queued:  # checked after joining the idle list: no wake-up is lost
                    waiter.cancel()  # not waiting after all: _wake skips it
                else:
                    await waiter
                continue
            result = await self._run(me, *job)
            if result is not None:
                self._on_done(job[0], result)

    async def _run(
        self,
        me: asyncio.Task[None],
        item: Any,
        task: str,
        args: list[Any],
        kwargs: dict[str, Any],
        info: RunInfo,
    ) -> HandlerResult | None:
        """One handler under the watchdog; None when a forced stop cancelled it."""
        try:
            timeout_s = self._app.registry.lookup(task).options.timeout_s
        except UnknownTask:
            timeout_s = float("inf")  # it is poisoned at once below
        limited = info.time_limit_s is not None and info.time_limit_s < timeout_s
        if limited:
            assert info.time_limit_s is not None
            timeout_s = info.time_limit_s  # stopped at its time limit, sooner
        run = self._services.context(info)
        running = _Running(item, run, time.monotonic() + timeout_s, timeout_s)
        self._running[me] = running
        try:
            return await run_async_handler(self._app, task, args, kwargs, run)
        except asyncio.CancelledError:
            if self._closing and not running.timed_out and not run.aborted:
                raise  # a forced stop: no result; the lease expires and it runs again
            me.uncancel()
            if run.aborted:
                return aborted("the handler was cancelled by an abort")
            if running.timed_out and limited:
                return HandlerResult(
                    Verdict.FAIL, "TimeLimitExceeded", over_limit_message(timeout_s)
                )
            if running.timed_out:
                return HandlerResult(
                    Verdict.FAIL,
                    "TimeoutError",
                    f"the handler ran past its timeout of {timeout_s:g} s",
                )
            # cancelled from inside the handler's own code: a failed attempt
            return HandlerResult(Verdict.FAIL, "CancelledError", "the handler was cancelled")
        finally:
            self._running.pop(me, None)

    async def _cancel(self, item: Any) -> bool:
        """Cancel the handler running ``item`` (on the loop); False if none is."""
        for worker, running in self._running.items():
            if running.item is item:
                if not running.run.aborted:
                    running.run.request_abort()
                    worker.cancel()
                return True
        return False

    async def _watch(self) -> None:
        """Cancel handlers past their timeout."""
        while True:
            await asyncio.sleep(_WATCH_S)
            now = time.monotonic()
            for worker, running in list(self._running.items()):
                if now >= running.deadline and not running.timed_out:
                    running.timed_out = True
                    worker.cancel()

    async def _stop(self, cancel: bool) -> None:
        self._closing = True
        for waiter in self._idle:
            if not waiter.done():
                waiter.set_result(None)
        busy = list(self._running)
        if busy:
            if cancel:
                for worker in busy:
                    worker.cancel()
                await asyncio.wait(busy, timeout=_CANCEL_WAIT_S)
            else:
                await asyncio.wait(busy)
        for worker in self._workers:
            worker.cancel()
        await asyncio.wait(self._workers, timeout=_CANCEL_WAIT_S)


class RoutingPool(HandlerPool[W], Generic[W]):
    """The pool a worker uses when its app has async tasks: ``async def`` handlers go to
    the event loop, every other handler (and an unknown task, which the sync path
    poisons) to the configured thread or process pool."""

    def __init__(self, app: WorkerApp, sync: HandlerPool[W], async_pool: HandlerPool[W]) -> None:
        self._app = app
        self._sync = sync
        self._async = async_pool

    def submit(
        self, item: W, task: str, args: list[Any], kwargs: dict[str, Any], info: RunInfo
    ) -> None:
        try:
            is_async = self._app.registry.lookup(task).is_async
        except UnknownTask:
            is_async = False
        (self._async if is_async else self._sync).submit(item, task, args, kwargs, info)

    def abort(self, item: W, grace_s: float | None = None) -> bool:
        return self._async.abort(item) or self._sync.abort(item, grace_s)

    def unstarted(self) -> list[W]:
        return self._sync.unstarted() + self._async.unstarted()

    def shutdown(self, wait: bool) -> None:
        self._async.shutdown(wait)
        self._sync.shutdown(wait)
