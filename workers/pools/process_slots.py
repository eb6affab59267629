"""The process pool's parts (``process_pool.py``): a submitted job, a slot (one child
process and the parent's end of its pipe), and how the pool treats its children (the
graces before it kills one, when it recycles one)."""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Generic

from tickwork.workers.pools.child import Call
from tickwork.workers.pools.pool import W


class Job(Generic[W]):
    """One submitted run: waiting for a slot, or running in one."""

    __slots__ = ("aborted", "call", "item", "number", "over_limit", "slot")

    def __init__(self, number: int, item: W, call: Call) -> None:
        self.number = number
        self.item = item
        self.call = call
        self.slot: Slot | None = None  # the slot running it; None while it waits
        self.aborted = False  # its abort was asked
        self.over_limit = False  # told it ran past its time limit


@dataclass(frozen=True, slots=True)
class Children:
    """How the pool treats its children: how long an aborted handler (``abort_grace_s``)
    and one past its time limit (``time_limit_grace_s``) have to stop before their
    process is killed, and when a child is replaced between jobs (recycled: after
    ``max_tasks`` jobs, or once a job leaves it over ``max_memory_mb`` of resident
    memory), as Celery's ``--max-tasks-per-child`` and ``--max-memory-per-child``."""

    abort_grace_s: float = 10.0
    time_limit_grace_s: float = 5.0
    max_tasks: int | None = None
    max_memory_mb: float | None = None

    def spent(self, jobs: int, rss_kb: int) -> str | None:
        """Why a child that ran ``jobs`` jobs and uses ``rss_kb`` is replaced (None: it
        is not)."""
        if self.max_tasks is not None and jobs >= self.max_tasks:
            return f"after {jobs} jobs"
        if self.max_memory_mb is not None and rss_kb > self.max_memory_mb * 1024:
            return f"using {rss_kb // 1024} MiB, over {self.max_memory_mb:g} MiB"
        return None


class Slot:
    """One child process and the parent's end of its pipe."""

    def __init__(self, index: int, start: Callable[[Connection], BaseProcess]) -> None:
        self.index = index
        self.pipe, child_end = multiprocessing.Pipe()
        self.process = start(child_end)
        child_end.close()
        self.job: Job[Any] | None = None
        self.ready = False  # the child imported the app
        self.dead = False
        self.jobs = 0  # how many jobs its child ran
        self.retired: str | None = None  # why its child was told to exit (recycled)

    def how_it_died(self) -> str:
        self.process.join(timeout=5)
        code = self.process.exitcode
        if code is not None and code < 0:
            with contextlib.suppress(ValueError):
                return f"signal {signal.Signals(-code).name}"
            return f"signal {-code}"
        return f"exit code {code}"
