"""The worker's memory bound (``--max-memory``): a process whose resident memory passes
it (a handler that leaks, a library that caches without end) stops claiming, drains what
it holds as a graceful shutdown does, and exits with status 1 for its supervisor
(systemd, Kubernetes, ``tickwork worker --processes``) to start a fresh one."""

from __future__ import annotations

import logging
import os
import resource
import threading
from collections.abc import Callable

log = logging.getLogger("tickwork.worker")


def resident_kb() -> int:
    """This process's resident memory now (KiB): from ``/proc`` on Linux, else its peak
    (``getrusage``)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class MemoryBound:
    """Reads this process's resident memory every ``interval_s`` and, the first time it
    is over ``limit_mb``, calls ``over(why)`` (the worker stops, and says why)."""

    def __init__(
        self, limit_mb: float, over: Callable[[str], None], interval_s: float = 1.0
    ) -> None:
        self._limit_kb = limit_mb * 1024
        self._limit_mb = limit_mb
        self._over = over
        self._interval_s = interval_s

    def run(self, until: threading.Event) -> None:
        while not until.wait(self._interval_s):
            used = resident_kb()
            if used > self._limit_kb:
                why = f"{used // 1024} MiB resident, over --max-memory {self._limit_mb:g} MiB"
                log.warning("the worker uses %s: draining and exiting to be restarted", why)
                self._over(why)
                return
