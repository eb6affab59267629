"""Fault test: SIGKILL a worker process mid-batch; a second worker completes everything."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from scheduler import App
from tests.helpers import completed, wait_until

N = 1500


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as stderr:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tickwork",
                "worker",
                "-A",
                "tests.crash_tasks",
                "--concurrency",
                "4",
                "--log-level",
                "warning",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )


def test_sigkill_mid_batch_loses_nothing(tmp_path: Path, clean_env: dict[str, str]) -> None:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    done = tmp_path / "done.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_DONE": str(done)}
    os.environ["TICKWORK_BACKEND"] = url
    try:
        import importlib

        import tests.crash_tasks as tasks

        tasks = importlib.reload(tasks)
        report = tasks.app.enqueue_many(tasks.record.call(n) for n in range(N))
        assert report.enqueued == N
        tasks.app.close()
    finally:
        del os.environ["TICKWORK_BACKEND"]

    app = App(url)
    # Kill a worker while it holds leases. Between an ack and the next claim a worker may
    # hold none for a moment; if the kill lands there, start another and kill again.
    in_flight = 0
    for attempt in range(5):
        victim = start_worker(env, tmp_path / f"victim-{attempt}.log")
        target = min(N - 100, sum(completed(done).values()) + N // 5)

        def mid_batch(target: int = target) -> bool:
            return (
                sum(completed(done).values()) >= target
                and app.backend.stats("default")[0].in_flight > 0
            )

        assert wait_until(mid_batch, 60), "the worker stalled"
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        in_flight = app.backend.stats("default")[0].in_flight
        if in_flight > 0:
            break
    assert in_flight > 0, "no kill landed while the worker held leases"
    assert len(completed(done)) < N, "the kill must land mid-run"

    second = start_worker(env, tmp_path / "second.log")
    try:
        assert wait_until(lambda: len(completed(done)) == N, 120), "messages were lost"
        assert wait_until(lambda: app.backend.stats("default")[0].in_flight == 0, 30)
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0
    runs = completed(done)
    assert set(runs) == set(range(N))
    duplicates = sum(runs.values()) - N
    assert duplicates <= in_flight, "only messages in flight at the kill may run twice"
    stats = app.backend.stats("default")[0]
    assert (stats.ready, stats.scheduled, stats.in_flight, stats.poison) == (0, 0, 0, 0)
    app.close()
