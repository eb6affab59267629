"""``async def`` handlers on an event loop the worker owns, many at a time.

One thread runs the loop. ``submit`` (from the consumer or timer thread) queues the work
and wakes the loop, which starts handlers while fewer than ``size`` run; each is awaited
under its task's timeout (``asyncio.wait_for``: past it, the coroutine is cancelled and
the attempt fails with ``TimeoutError``, then retries or poisons like any failure).
Results go to the settler exactly as a thread pool's do, so heartbeats, retries, the
poison queue and next occurrences behave the same for async and sync tasks.

Shutdown: queued work not yet started is handed back (``unstarted``) and released; a
forced stop cancels running coroutines (they see ``CancelledError``), reports nothing for
them, and their leases expire, so they are delivered again.

Thread-safety: ``submit``, ``unstarted`` and ``shutdown`` may be called from any thread;
the waiting queue is shared under a lock, everything else lives on the loop's thread.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from typing import Any, Generic, TypeVar

from scheduler import App, UnknownTask
from workers.execution import HandlerResult, Verdict, run_async_handler
from workers.pool import Done, HandlerPool

W = TypeVar("W")
Job = tuple[Any, str, list[Any], dict[str, Any]]

log = logging.getLogger("tickwork.worker")

#: how long a forced stop waits for cancelled coroutines to unwind
_CANCEL_WAIT_S = 2.0


class AsyncPool(HandlerPool[W], Generic[W]):
    """Runs ``async def`` handlers on one event loop, at most ``size`` at once."""

    def __init__(self, app: App, size: int, on_done: Done[W]) -> None:
        self._app = app
        self._size = size
        self._on_done = on_done
        self._waiting: collections.deque[Job] = collections.deque()
        self._lock = threading.Lock()
        self._running: set[asyncio.Task[None]] = set()
        self._closing = False
        self._wake_pending = False  # a _fill is already scheduled on the loop
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="tickwork-event-loop", daemon=True
        )
        self._thread.start()

    def submit(self, item: W, task: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        with self._lock:
            self._waiting.append((item, task, args, kwargs))
            if self._wake_pending:
                return  # one wake-up (a write to the loop's self-pipe) serves a whole batch
            self._wake_pending = True
        self._loop.call_soon_threadsafe(self._fill)

    def unstarted(self) -> list[W]:
        with self._lock:
            taken = [job[0] for job in self._waiting]
            self._waiting.clear()
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

    def _fill(self) -> None:
        """Start waiting handlers while there are free slots."""
        while True:
            with self._lock:
                if not self._waiting or len(self._running) >= self._size or self._closing:
                    self._wake_pending = False
                    return
                job = self._waiting.popleft()
            task = self._loop.create_task(self._handle(*job))
            self._running.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._fill()

    async def _handle(self, item: W, task: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        try:
            result = await run_async_handler(self._app, task, args, kwargs)
        except asyncio.CancelledError:
            if self._closing:
                return  # a forced stop: no result; the lease expires and it runs again
            # cancelled from inside the handler's own code: a failed attempt
            result = HandlerResult(Verdict.FAIL, "CancelledError", "the handler was cancelled")
        self._on_done(item, result)

    async def _stop(self, cancel: bool) -> None:
        self._closing = True
        running = list(self._running)
        if not running:
            return
        if cancel:
            for task in running:
                task.cancel()
            await asyncio.wait(running, timeout=_CANCEL_WAIT_S)
        else:
            await asyncio.wait(running)


class RoutingPool(HandlerPool[W], Generic[W]):
    """The pool a worker uses when its app has async tasks: ``async def`` handlers go to
    the event loop, every other handler (and an unknown task, which the sync path
    poisons) to the configured thread or process pool."""

    def __init__(self, app: App, sync: HandlerPool[W], async_pool: HandlerPool[W]) -> None:
        self._app = app
        self._sync = sync
        self._async = async_pool

    def submit(self, item: W, task: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        try:
            is_async = self._app.lookup(task).is_async
        except UnknownTask:
            is_async = False
        (self._async if is_async else self._sync).submit(item, task, args, kwargs)

    def unstarted(self) -> list[W]:
        return self._sync.unstarted() + self._async.unstarted()

    def shutdown(self, wait: bool) -> None:
        self._async.shutdown(wait)
        self._sync.shutdown(wait)
