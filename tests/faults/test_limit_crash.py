"""Fault test: a worker holding a concurrency slot is killed with SIGKILL; the slot comes
back when its lease ends, and the work waiting for it runs (nothing lost, one at a time)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.support.backends import BACKEND_NAMES, backend_url
from tests.support.helpers import start_record_worker, wait_until
from tickwork.scheduler import App

MODULE = "tests.support.limit_tasks"
LIMIT = f"{MODULE}.hold:t1"
N = 6


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_a_dead_workers_slot_comes_back_when_its_lease_ends(
    backend: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    from tests.support.limit_tasks import app, hold

    url = backend_url(backend, tmp_path)
    done = tmp_path / "done.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_DONE": str(done)}
    app.use_backend(url)
    for n in range(N):
        hold.delay("t1", n)
    observer = App(url)
    try:
        victim_env = {**env, "TICKWORK_TEST_HOLD_S": "60"}  # its run never ends by itself
        victim = start_record_worker(
            victim_env, tmp_path / "victim.log", "tests.support.limit_tasks"
        )

        def holding_with_waiters() -> bool:
            held, waiting = observer.backend.limits.usage([LIMIT])[LIMIT]
            return held == 1 and waiting == N - 1

        def started() -> list[str]:
            return [line for line in _lines(done) if line.startswith("start")]

        try:  # the slot is taken before the handler starts: wait for both
            assert wait_until(lambda: holding_with_waiters() and bool(started()), 60), (
                "the victim never held the slot"
            )
            assert len(started()) == 1, "one run at a time"
        finally:
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)

        second = start_record_worker(env, tmp_path / "second.log", MODULE)
        try:
            ended = lambda: sum(line.startswith("end") for line in _lines(done)) == N  # noqa: E731
            assert wait_until(ended, 90), "work waiting for the dead worker's slot was lost"
        finally:
            second.send_signal(signal.SIGTERM)
            assert second.wait(30) == 0
        lines = _lines(done)
        assert sorted(int(line.split()[1]) for line in lines if line.startswith("end")) == list(
            range(N)
        )
        running = 0
        for line in lines[1:]:  # after the victim's start: one run at a time
            running += 1 if line.startswith("start") else -1
            assert running <= 1, "two runs of one tenant overlapped"
        assert observer.backend.limits.usage([LIMIT])[LIMIT] == (0, 0)
        stats = observer.backend.queues.stats("default")[0]
        assert (stats.ready, stats.scheduled, stats.in_flight, stats.poison) == (0, 0, 0, 0)
    finally:
        observer.close()
        app.close()
