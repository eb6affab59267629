"""Handler pools: where handlers run. Threads by default; processes for CPU-bound tasks.

A pool takes work items, runs ``task(args, kwargs)`` and reports ``(item, HandlerResult)``
to a callback. ``unstarted()`` takes back what has not begun, so shutdown can release it.
A new kind of pool (an asyncio event loop, say) subclasses ``HandlerPool`` and registers
a factory in ``POOL_KINDS``; ``WorkerConfig.pool`` names it.
"""

from __future__ import annotations

import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from scheduler import App, ConfigurationError
from workers.execution import HandlerResult, Verdict, init_process, run_handler, run_in_process

W = TypeVar("W")
Done = Callable[[W, HandlerResult], None]


class HandlerPool(ABC, Generic[W]):
    """Runs handlers for a worker. Thread-safe: ``submit`` is called by the consumer and
    timer threads, ``unstarted`` and ``shutdown`` by the settler and the worker."""

    @abstractmethod
    def submit(self, item: W, task: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        """Run ``task`` on stored JSON arguments; report ``(item, result)`` when done.
        Never blocks on the handler."""

    @abstractmethod
    def unstarted(self) -> list[W]:
        """Take back every submitted item whose handler has not started."""

    @abstractmethod
    def shutdown(self, wait: bool) -> None:
        """Stop the pool; with ``wait``, after running handlers return."""


@dataclass(frozen=True)
class PoolSpec:
    """What a pool factory gets: the app (in this process), how to import it elsewhere,
    and how many handlers may run at once."""

    app: App
    app_reference: str | None
    size: int


class ThreadPool(HandlerPool[W]):
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


class ProcessPool(HandlerPool[W]):
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


def _thread_pool(spec: PoolSpec, on_done: Done[Any]) -> HandlerPool[Any]:
    return ThreadPool(spec.app, spec.size, on_done)


def _process_pool(spec: PoolSpec, on_done: Done[Any]) -> HandlerPool[Any]:
    if not spec.app_reference:
        raise ConfigurationError("the process pool needs app_reference ('module' or 'module:app')")
    return ProcessPool(spec.app_reference, spec.size, on_done)


#: pool kind (``WorkerConfig.pool``) -> factory
POOL_KINDS: dict[str, Callable[[PoolSpec, Done[Any]], HandlerPool[Any]]] = {
    "thread": _thread_pool,
    "process": _process_pool,
}


def make_pool(kind: str, spec: PoolSpec, on_done: Done[W]) -> HandlerPool[W]:
    """A pool of the kind named ``kind``."""
    try:
        factory = POOL_KINDS[kind]
    except KeyError:
        known = ", ".join(sorted(POOL_KINDS))
        raise ConfigurationError(f"unknown pool kind {kind!r}; known: {known}") from None
    pool: HandlerPool[W] = factory(spec, on_done)
    return pool
