"""``unique_for``: after a keyed message succeeds, its key stays taken for the window (a
new enqueue is ignored), then frees itself; on every backend."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.support.helpers import wait_for
from tickwork.scheduler import App, Call, InvalidMessage, KeyConflict, Outcome
from tickwork.scheduler.model.message import UNIQUE_UNTIL
from tickwork.workers import Worker, WorkerConfig


def test_a_key_stays_taken_for_the_window_after_success_then_frees_itself(app: App) -> None:
    runs: list[str] = []

    @app.task(unique_for=timedelta(seconds=1.5))
    def sync_account(account: str) -> None:
        runs.append(account)

    def send() -> Outcome:
        report = app.enqueue_many([Call(sync_account.name, ("a1",), key="acct:a1")], "ignore")
        (outcome,) = report.outcomes
        return outcome

    assert send() is Outcome.ENQUEUED
    worker = Worker(app, WorkerConfig(poll_interval_s=0.05))
    worker.start()
    try:
        wait_for(lambda: runs == ["a1"])
        wait_for(lambda: worker.stats.acked == 1)
        held = app.get(key="acct:a1")
        assert held is not None and UNIQUE_UNTIL in held.message.headers
        assert send() is Outcome.IGNORED, "within the window the key is taken"
        with pytest.raises(KeyConflict):
            sync_account.schedule(args=("a1",), key="acct:a1")
        wait_for(lambda: app.get(key="acct:a1") is None)  # the window closed
        assert runs == ["a1"], "the window never runs the task"
        assert send() is Outcome.ENQUEUED
        wait_for(lambda: runs == ["a1", "a1"])
    finally:
        worker.stop()
        assert worker.join(30)


def test_no_window_after_a_failure_or_without_a_key(app: App) -> None:
    @app.task(unique_for=timedelta(hours=1))
    def fragile(n: int) -> None:
        if n < 0:
            raise ValueError("negative")

    fragile.schedule(args=(-1,), key="bad")
    fragile.delay(1)  # unkeyed: nothing to hold
    worker = Worker(app, WorkerConfig(poll_interval_s=0.05))
    worker.start()
    try:
        wait_for(lambda: worker.stats.poisoned == 1 and worker.stats.acked == 1)
    finally:
        worker.stop()
        assert worker.join(30)
    assert app.get(key="bad") is None, "a failed run leaves its key free"
    stats = app.backend.queues.stats("default")[0]
    assert stats.scheduled + stats.ready == 0


def test_unique_for_must_be_positive() -> None:
    app = App("sqlite://:memory:")
    with pytest.raises(InvalidMessage, match=r"option unique_for=0:00:00 .*must be a positive"):

        @app.task(unique_for=timedelta(0))
        def never() -> None:
            pass
