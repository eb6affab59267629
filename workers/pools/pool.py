"""Handler pools: where handlers run. Threads by default (``thread_pool.py``);
processes for CPU-bound tasks (``process_pool.py``); ``async def`` handlers on an event
loop (``async_pool.py``).

This module is the interface: a pool takes work items, runs ``task(args, kwargs)`` and
reports ``(item, HandlerResult)`` to a callback. ``unstarted()`` takes back what has not
begun, so shutdown can release it; ``abort(item)`` asks one handler to stop. A new kind of
pool subclasses ``HandlerPool`` and registers a factory in ``pools.POOL_KINDS``;
``WorkerConfig.pool`` names it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tickwork.scheduler.runs.context import RunInfo
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.pools.execution import HandlerResult
from tickwork.workers.pools.services import RunServices

W = TypeVar("W")
Done = Callable[[W, HandlerResult], None]


class HandlerPool(ABC, Generic[W]):
    """Runs handlers for a worker. Thread-safe: ``submit`` is called by the consumer and
    timer threads, ``unstarted`` and ``shutdown`` by the settler and the worker."""

    @abstractmethod
    def submit(
        self, item: W, task: str, args: list[Any], kwargs: dict[str, Any], info: RunInfo
    ) -> None:
        """Run ``task`` on stored JSON arguments, with ``info`` in its ``current_run()``;
        report ``(item, result)`` when done. Never blocks on the handler."""

    @abstractmethod
    def abort(self, item: W, grace_s: float | None = None) -> bool:
        """Ask ``item``'s handler to stop (how depends on the pool); an item not started
        yet is reported aborted without running. False if this pool does not hold it.
        ``grace_s``: how long a process-pool handler has to stop before its process is
        killed (None: the pool's abort grace; 0 kills it at once)."""

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

    app: WorkerApp
    app_reference: str | None
    size: int
    abort_grace_s: float = 10.0  # how long an aborted process-pool handler has to stop
    time_limit_grace_s: float = 5.0  # how long a handler past its time limit has to stop
    adaptive_threads: bool = True  # a thread pool tunes how many threads take work
    #: told of each run whose process died under it (a process pool), for the metrics
    on_crash: Callable[[Any], None] | None = None
    #: a process pool's child is replaced after it ran this many jobs (None: never)
    max_tasks_per_child: int | None = None
    #: ... or once a job leaves it using more than this resident memory (MiB)
    max_memory_per_child_mb: float | None = None
    #: what runs' contexts reach through (None: the app's own, ``RunServices.of``)
    services: RunServices | None = None
