"""Fault test: SIGKILL a worker process mid-batch; a second worker completes everything.
On every backend."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.faults.sizes import sized
from tests.support.backends import BACKEND_NAMES, backend_url
from tests.support.helpers import (
    completed,
    enqueue_records,
    start_record_worker,
    stop_workers,
    wait_until,
)
from tickwork.scheduler import App

N = sized(1500, 600)


@pytest.mark.parametrize("backend_name", BACKEND_NAMES)
def test_sigkill_mid_batch_loses_nothing(
    backend_name: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    url = backend_url(backend_name, tmp_path)
    done = tmp_path / "done.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_DONE": str(done)}
    enqueue_records(url, range(N))

    app = App(url)
    # Kill a worker while it holds leases. Between an ack and the next claim a worker may
    # hold none for a moment; if the kill lands there, start another and kill again.
    in_flight, victims = 0, []
    try:
        for attempt in range(5):
            victim = start_record_worker(env, tmp_path / f"victim-{attempt}.log")
            victims.append(victim)
            target = min(N - 100, sum(completed(done).values()) + N // 5)

            def mid_batch(target: int = target) -> bool:
                return (
                    sum(completed(done).values()) >= target
                    and app.backend.queues.stats("default")[0].in_flight > 0
                )

            stalled = f"the worker stalled short of {target}: {app.backend.queues.stats()}"
            assert wait_until(mid_batch, 60), stalled
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            in_flight = app.backend.queues.stats("default")[0].in_flight
            if in_flight > 0:
                break
    finally:
        stop_workers([victim for victim in victims if victim.poll() is None])
    assert in_flight > 0, "no kill landed while the worker held leases"
    assert len(completed(done)) < N, "the kill must land mid-run"

    second = start_record_worker(env, tmp_path / "second.log")
    try:
        assert wait_until(lambda: len(completed(done)) == N, 120), "messages were lost"
        assert wait_until(lambda: app.backend.queues.stats("default")[0].in_flight == 0, 30)
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0
    runs = completed(done)
    assert set(runs) == set(range(N))
    duplicates = sum(runs.values()) - N
    assert duplicates <= in_flight, "only messages in flight at the kill may run twice"
    stats = app.backend.queues.stats("default")[0]
    assert (stats.ready, stats.scheduled, stats.in_flight, stats.poison) == (0, 0, 0, 0)
    app.close()
