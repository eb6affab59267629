"""Snooze: a handler that returns ``Snooze(seconds)`` is run again after that delay,
its attempt not counted (a task without retries snoozes as often as it likes), recorded
as ``snoozed`` in the ledger and the worker's counts, on every backend and on both
pools; a snooze that is no positive delay fails the run like any error."""

from __future__ import annotations

import asyncio
import importlib
import itertools
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, RetryPolicy, Snooze
from tickwork.scheduler.schedules.ledger import RunOutcome
from tickwork.workers import Worker, WorkerConfig


def test_a_snoozed_run_comes_back_later_without_using_an_attempt(app: App) -> None:
    starts: list[tuple[float, int]] = []

    @app.task(retries=0, history=True)
    def export(name: str) -> str | Snooze:
        from tickwork.scheduler import current_run

        starts.append((time.monotonic(), current_run().attempt))
        if len(starts) < 3:
            return Snooze(timedelta(milliseconds=300))
        return f"{name} exported"

    handle = export.delay("invoices")
    with running(app) as worker:
        wait_for(lambda: len(starts) == 3)
        wait_for(lambda: worker.stats.acked == 1)
        stats = worker.stats
    assert [attempt for _, attempt in starts] == [1, 1, 1], "a snooze is not an attempt"
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(starts)]
    assert all(gap >= 0.29 for gap in gaps), gaps  # never due before its snooze ends
    assert (stats.snoozed, stats.retried, stats.poisoned) == (2, 0, 0)
    history = app.run_history(handle)
    assert [entry.outcome for entry in history] == [
        RunOutcome.SUCCEEDED,
        RunOutcome.SNOOZED,
        RunOutcome.SNOOZED,
    ]
    assert history[1].error == "snoozed for 0.3 s"
    assert app.get(id=handle) is None


def test_an_async_handler_snoozes_too(sqlite_app: App) -> None:
    app = sqlite_app
    runs: list[int] = []

    @app.task(retries=0)
    async def poll() -> Snooze | None:
        await asyncio.sleep(0)
        runs.append(1)
        return Snooze(0.1) if len(runs) < 2 else None

    poll.delay()
    with running(app) as worker:
        wait_for(lambda: worker.stats.acked == 1)
        assert worker.stats.snoozed == 1
    assert len(runs) == 2


def test_a_snooze_that_is_no_delay_fails_the_run(sqlite_app: App) -> None:
    app = sqlite_app

    @app.task(retry=RetryPolicy(retries=0))
    def broken() -> Snooze:
        return Snooze(-5)

    broken.delay()
    with running(app):
        wait_for(lambda: len(app.backend.poison.list()) == 1)
    (record,) = app.backend.poison.list()
    assert record.failure.error_type == "ValueError"
    assert "positive delay" in record.failure.message
    with pytest.raises(ValueError, match="positive delay"):
        Snooze(float("nan"))


@pytest.fixture
def tasks(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.setenv("TICKWORK_BACKEND", sqlite_url)
    import tests.support.snooze_tasks as module

    module = importlib.reload(module)
    yield module
    module.app.close()


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_snooze_from_either_pool(tasks: ModuleType, tmp_path: Path, pool: str) -> None:
    marker = str(tmp_path / "runs")
    handle = tasks.not_ready.delay(marker, 3)
    config = WorkerConfig(
        pool=pool,
        concurrency=1,
        poll_interval_s=0.05,
        grace_s=5,
        app_reference="tests.support.snooze_tasks",
    )
    worker = Worker(tasks.app, config)
    worker.start()
    try:
        wait_for(lambda: worker.stats.acked == 1, 30)
    finally:
        worker.stop()
        assert worker.join(30)
    assert Path(marker).read_text().split() == ["1", "1", "1"]
    assert worker.stats.snoozed == 2
    assert tasks.app.get(id=handle) is None
