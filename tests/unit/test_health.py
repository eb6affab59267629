"""How ``Health`` judges a worker from what its threads report: the verdicts a stalled
heartbeat, a failed thread and a backend that hangs give (the served probes, with real
workers and servers, are in ``tests/integration/test_health.py``)."""

from __future__ import annotations

import threading
import time

from tickwork.scheduler.errors import BackendUnavailable
from tickwork.workers.reporting.health import Health


class Reports:
    """What a worker's threads would report, set by each test."""

    def __init__(self) -> None:
        self.heartbeat_at = time.monotonic()
        self.failed: str | None = None
        self.draining = False
        self.reads = 0
        self.hang = threading.Event()  # set: reads wait for ``release``
        self.release = threading.Event()
        self.down = False

    def read_clock(self) -> int:
        self.reads += 1
        if self.hang.is_set():
            self.release.wait(30)
        if self.down:
            raise BackendUnavailable("connection refused")
        return 0

    def health(self, recheck_s: float = 0.0) -> Health:
        return Health(
            lambda: self.heartbeat_at,
            lambda: self.failed,
            lambda: self.draining,
            self.read_clock,
            stale_s=10.0,
            recheck_s=recheck_s,
        )


def test_a_stalled_heartbeat_or_a_failed_thread_is_not_alive() -> None:
    reports = Reports()
    health = reports.health()
    assert health.alive().ok
    reports.heartbeat_at -= 11
    verdict = health.alive()
    assert not verdict.ok
    assert verdict.checks["heartbeat"].startswith("the heartbeat thread last turned 11.")
    assert not health.ready().ok  # not alive: not ready either
    reports.heartbeat_at = time.monotonic()
    reports.failed = "consumer"
    assert health.alive().checks == {
        "heartbeat": "ok",
        "threads": "the worker's consumer thread failed",
    }


def test_a_backend_down_or_draining_is_not_ready_but_alive() -> None:
    reports = Reports()
    health = reports.health()
    assert health.ready().ok
    reports.down = True
    verdict = health.ready()
    assert not verdict.ok
    assert verdict.checks["backend"] == "the backend does not answer: connection refused"
    assert health.alive().ok
    reports.down = False
    reports.draining = True
    assert health.ready().checks["draining"] == "stopping: claims nothing more"
    assert health.ready().checks["backend"] == "ok"


def test_probes_read_the_backend_at_most_once_per_recheck() -> None:
    reports = Reports()
    health = reports.health(recheck_s=60.0)
    for _ in range(5):
        assert health.ready().ok
    assert reports.reads == 1


def test_a_read_that_hangs_holds_up_one_probe_and_soon_fails_the_others() -> None:
    reports = Reports()
    health = reports.health(recheck_s=0.2)
    reports.hang.set()
    first = threading.Thread(target=health.ready)
    first.start()
    while reports.reads == 0:  # the first probe is reading
        time.sleep(0.01)
    reading_since = time.monotonic()
    assert not health.ready().ok  # answered at once: no second read waits on the backend
    assert reports.reads == 1
    while time.monotonic() - reading_since < 0.3:
        time.sleep(0.05)
    assert health.ready().checks["backend"].startswith("the backend has not answered for")
    assert reports.reads == 1
    reports.release.set()
    first.join(10)
    assert health.ready().ok
