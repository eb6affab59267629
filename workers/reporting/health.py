"""Whether one worker process is alive and ready, for probes: ``/healthz`` and ``/readyz``
on its metrics port (``workers/reporting/endpoint.py``), and systemd's watchdog
(``workers/reporting/systemd.py``).

Alive: the heartbeat thread, which keeps the leases of held work, turned within
``stale_s``, and no thread of the worker failed. A worker that is not alive cannot keep
its leases: restarting it is the cure. A backend that is down does not make a worker
dead (a restart would not bring the backend back).

Ready: alive, not draining (a stop was asked: it claims nothing more), and the backend
answered its last clock read. That read is made by a probe at most once per
``recheck_s``, by one probe at a time (the others get the last answer); a read still
unanswered after ``recheck_s`` counts as a backend that does not answer.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tickwork.scheduler import BackendError


@dataclass(frozen=True)
class Verdict:
    """A probe's answer: ``ok``, and each check's result ("ok" or why not)."""

    ok: bool
    checks: dict[str, str] = field(default_factory=dict)

    def body(self) -> bytes:
        """The JSON a probe's response carries."""
        return json.dumps({"status": "ok" if self.ok else "fail", "checks": self.checks}).encode()


class Health:
    """Judges a worker from what its threads report.

    ``heartbeat_at`` is the ``time.monotonic()`` of the heartbeat thread's last turn,
    ``failed`` the role of a thread that failed (None while none did), ``draining`` true
    once a stop was asked, and ``read_clock`` one round trip to the backend."""

    def __init__(
        self,
        heartbeat_at: Callable[[], float],
        failed: Callable[[], str | None],
        draining: Callable[[], bool],
        read_clock: Callable[[], object],
        stale_s: float,
        recheck_s: float = 1.0,
    ) -> None:
        self._heartbeat_at = heartbeat_at
        self._failed = failed
        self._draining = draining
        self._read_clock = read_clock
        self._stale_s = stale_s
        self._recheck_s = recheck_s
        self._lock = threading.Lock()  # held by the one probe reading the backend
        self._checked_at = float("-inf")  # monotonic time of the last read's answer
        self._reading_since: float | None = None
        self._backend = "not checked yet"

    def alive(self) -> Verdict:
        """Liveness: the heartbeat turns and no thread failed."""
        checks = {"heartbeat": self._heartbeat(), "threads": self._threads()}
        return Verdict(all(v == "ok" for v in checks.values()), checks)

    def ready(self) -> Verdict:
        """Readiness: alive, not draining, and the backend answers."""
        checks = {
            "heartbeat": self._heartbeat(),
            "threads": self._threads(),
            "draining": "stopping: claims nothing more" if self._draining() else "ok",
            "backend": self._backend_check(),
        }
        return Verdict(all(v == "ok" for v in checks.values()), checks)

    def _heartbeat(self) -> str:
        age = time.monotonic() - self._heartbeat_at()
        if age > self._stale_s:
            return f"the heartbeat thread last turned {age:.1f} s ago (over {self._stale_s:g} s)"
        return "ok"

    def _threads(self) -> str:
        role = self._failed()
        return "ok" if role is None else f"the worker's {role} thread failed"

    def _backend_check(self) -> str:
        now = time.monotonic()
        if now - self._checked_at >= self._recheck_s and self._lock.acquire(blocking=False):
            try:
                self._reading_since = now
                self._backend = _read(self._read_clock)
                self._checked_at = time.monotonic()
            finally:
                self._reading_since = None
                self._lock.release()
        since = self._reading_since
        if since is not None and time.monotonic() - since > self._recheck_s:
            return f"the backend has not answered for {time.monotonic() - since:.1f} s"
        return self._backend


def _read(read_clock: Callable[[], object]) -> str:
    try:
        read_clock()
    except BackendError as err:
        return f"the backend does not answer: {err}"
    return "ok"
