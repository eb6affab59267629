"""The default pool: handlers on a fixed set of threads."""

from __future__ import annotations

import queue
import threading
from functools import partial
from typing import Any

from scheduler import App
from scheduler.runs.context import RunContext, RunInfo
from scheduler.runs.results import report_progress
from workers.execution import aborted, run_handler
from workers.pool import Done, HandlerPool, W


class ThreadPool(HandlerPool[W]):
    """A fixed set of threads fed by one queue (lighter than ``ThreadPoolExecutor``: no
    future per message). Abort sets the run's flag (``current_run().aborted``): a thread
    cannot be stopped from outside, so a handler that never looks runs to its end."""

    def __init__(self, app: App, size: int, on_done: Done[W]) -> None:
        self._app = app
        self._on_done = on_done
        self._queue: queue.SimpleQueue[
            tuple[W, str, list[Any], dict[str, Any], RunContext] | None
        ] = queue.SimpleQueue()
        self._runs: dict[int, RunContext] = {}  # id(item) -> its run, from submit to done
        self._threads = [
            threading.Thread(target=self._run, name=f"tickwork-pool-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(
        self, item: W, task: str, args: list[Any], kwargs: dict[str, Any], info: RunInfo
    ) -> None:
        run = RunContext(info, partial(report_progress, self._app))
        self._runs[id(item)] = run  # single dict operations are atomic: no lock per message
        self._queue.put((item, task, args, kwargs, run))

    def abort(self, item: W) -> bool:
        run = self._runs.get(id(item))
        if run is None:
            return False
        run.request_abort()
        return True

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            item, task, args, kwargs, run = job
            if run.aborted:  # aborted while it waited for a thread: it never starts
                result = aborted("aborted before it started")
            else:
                result = run_handler(self._app, task, args, kwargs, run)
            self._runs.pop(id(item), None)
            self._on_done(item, result)

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
        for _ in self._threads:
            self._queue.put(None)
        if wait:
            for thread in self._threads:
                thread.join()
