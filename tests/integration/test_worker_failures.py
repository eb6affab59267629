"""A worker whose own thread fails stops, rather than looking alive while it claims or
settles nothing: the failure is logged, ``failed`` names the thread, nothing unrun is
acknowledged, and the message is run by the next worker."""

from __future__ import annotations

import threading

import pytest

from tickwork.scheduler import App
from tickwork.workers import Worker, WorkerConfig


def test_a_failed_consumer_thread_stops_the_worker(
    app: App, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[int] = []

    @app.task
    def work(n: int) -> None:
        ran.append(n)

    handle = work.delay(1)

    def broken_claim(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("a bug in the claim path")

    monkeypatch.setattr(app.backend.leases, "claim", broken_claim)
    worker = Worker(app, WorkerConfig(poll_interval_s=0.05, grace_s=5.0))
    runner = threading.Thread(target=worker.run)
    runner.start()
    runner.join(30)
    assert not runner.is_alive(), "the worker went on without its consumer"
    assert worker.failed == "consumer"
    assert "the worker's consumer thread failed" in caplog.text
    assert "a bug in the claim path" in caplog.text
    assert ran == [] and handle.status().value == "ready"

    monkeypatch.undo()  # the next worker's claims work: the message was not lost
    again = Worker(app, WorkerConfig(poll_interval_s=0.05, burst=True))
    again.run()
    assert ran == [1] and again.failed is None and again.stats.acked == 1
    stats = app.backend.queues.stats("default")[0]
    assert (stats.ready, stats.in_flight) == (0, 0)
