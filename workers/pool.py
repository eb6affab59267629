"""Worker pools: where handlers run. Threads by default; processes for CPU-bound tasks.

Both take work items, run ``task(args, kwargs)`` and report ``(item, HandlerResult)`` to a
callback. ``unstarted()`` takes back what has not begun, so shutdown can release it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Generic, TypeVar

from scheduler import App
from workers.execution import HandlerResult, Verdict, init_process, run_handler, run_in_process

W = TypeVar("W")
Done = Callable[[W, HandlerResult], None]


class ThreadPool(Generic[W]):
    """A fixed set of threads fed by one queue (lighter than ``ThreadPoolExecutor``: no
    future per message)."""

    def __init__(self, app: App, size: int, on_done: Done[W]) -> None:
        self._app = app
        self._on_done = on_done
        self._queue: queue.SimpleQueue[tuple[W, str, list[Any], dict[str, Any]] | None] = (
            queue.SimpleQueue()
        )
        self._threads = [
            threading.Thread(target=self._run, name=f"tickwork-pool-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, item: W, task: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        self._queue.put((item, task, args, kwargs))

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            item, task, args, kwargs = job
            self._on_done(item, run_handler(self._app, task, args, kwargs))

    def unstarted(self) -> list[W]:
        taken: list[W] = []
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return taken
            if job is not None:
                taken.append(job[0])

    def shutdown(self, wait: bool) -> None:
        for _ in self._threads:
            self._queue.put(None)
        if wait:
            for thread in self._threads:
                thread.join()


class ProcessPool(Generic[W]):
    """Handlers in child processes, each of which imports the app once."""

    def __init__(self, app_reference: str, size: int, on_done: Done[W]) -> None:
        self._executor = ProcessPoolExecutor(
            size, initializer=init_process, initargs=(app_reference,)
        )
        self._on_done = on_done
        self._pending: dict[int, tuple[W, Future[HandlerResult]]] = {}
        self._lock = threading.Lock()

    def submit(self, item: W, task: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        future = self._executor.submit(run_in_process, task, args, kwargs)
        with self._lock:
            self._pending[id(future)] = (item, future)
        future.add_done_callback(self._finished)

    def _finished(self, future: Future[HandlerResult]) -> None:
        with self._lock:
            entry = self._pending.pop(id(future), None)
        if entry is None or future.cancelled():
            return
        error = future.exception()
        if error is not None:  # e.g. a pool process died
            result = HandlerResult(Verdict.FAIL, type(error).__name__, str(error))
        else:
            result = future.result()
        self._on_done(entry[0], result)

    def unstarted(self) -> list[W]:
        with self._lock:
            entries = list(self._pending.values())
        return [item for item, future in entries if future.cancel()]

    def shutdown(self, wait: bool) -> None:
        self._executor.shutdown(wait=wait, cancel_futures=True)
