"""Time limits (``@app.task(time_limit=...)``, the worker's ``time_limit_s``): a sync
handler in ``while True: pass`` is stopped on both pools and the worker goes on serving
others; one that swallows the exception is abandoned (thread pool) or killed (process
pool); the run fails and is retried or poisoned by its policy."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.helpers import wait_for
from tickwork.scheduler import App, ConfigurationError
from tickwork.workers import Worker, WorkerConfig

pytestmark = pytest.mark.slow


@pytest.fixture
def tasks(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.setenv("TICKWORK_BACKEND", sqlite_url)
    import tests.support.time_limit_tasks as module

    module = importlib.reload(module)
    yield module
    module.app.close()


def _worker(app: App, pool: str, **config: object) -> Worker:
    settings: dict[str, object] = {
        "pool": pool,
        "concurrency": 1,
        "poll_interval_s": 0.05,
        "grace_s": 5,
        "time_limit_grace_s": 1.0,
        "app_reference": "tests.support.time_limit_tasks",
    }
    return Worker(app, WorkerConfig(**{**settings, **config}))  # type: ignore[arg-type]


def _runs(marker: str) -> int:
    path = Path(marker + ".runs")
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_spinning_handler_is_stopped_and_the_worker_serves_others(
    tasks: ModuleType, tmp_path: Path, pool: str
) -> None:
    spinner, other = str(tmp_path / "spins"), str(tmp_path / "quick")
    tasks.spins.delay(spinner)
    worker = _worker(tasks.app, pool)
    worker.start()
    try:
        wait_for(lambda: Path(spinner + ".started").exists(), 30)
        tasks.quick.delay(other)  # one slot: it runs once the spinner is stopped
        wait_for(lambda: _runs(other) == 1, 30)
        wait_for(lambda: len(tasks.app.backend.poison.list()) == 1, 30)
    finally:
        worker.stop()
        assert worker.join(30)
    (record,) = tasks.app.backend.poison.list()
    assert record.failure.error_type == "TimeLimitExceeded"
    assert "time limit of 1 s" in record.failure.message


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_handler_that_swallows_the_exception_is_given_up_on(
    tasks: ModuleType, tmp_path: Path, pool: str
) -> None:
    """Thread pool: its run is reported failed and its thread replaced; process pool: its
    process is killed. Either way the slot is free again for the next message."""
    stubborn, other = str(tmp_path / "swallows"), str(tmp_path / "quick")
    tasks.swallows.delay(stubborn)
    worker = _worker(tasks.app, pool)
    worker.start()
    try:
        wait_for(lambda: Path(stubborn + ".swallowed").exists(), 30)
        wait_for(lambda: len(tasks.app.backend.poison.list()) == 1, 30)
        # after a kill, a message already handed to the broken pool fails with it (as
        # after an abort's kill): the next one runs in a fresh pool
        tasks.quick.delay(other)
        wait_for(lambda: _runs(other) == 1, 30)
    finally:
        worker.stop()
        assert worker.join(30)
    (record,) = tasks.app.backend.poison.list()
    assert record.failure.error_type == "TimeLimitExceeded"
    assert "did not stop" in record.failure.message


def test_a_stopped_run_is_retried_by_its_policy(tasks: ModuleType, tmp_path: Path) -> None:
    marker = str(tmp_path / "twice")
    tasks.spins_twice.delay(marker)
    worker = _worker(tasks.app, "thread")
    worker.start()
    try:
        wait_for(lambda: len(tasks.app.backend.poison.list()) == 1, 60)
    finally:
        worker.stop()
        assert worker.join(30)
    assert _runs(marker) == 2, "the first attempt and its one retry"
    assert tasks.app.backend.poison.list()[0].attempts == 2


def test_time_left_and_the_workers_default(tasks: ModuleType, tmp_path: Path) -> None:
    measured, free = str(tmp_path / "measures"), str(tmp_path / "unlimited")
    tasks.measures.delay(measured)
    tasks.unlimited.delay(free)
    worker = _worker(tasks.app, "thread", concurrency=2, time_limit_s=1.5)
    worker.start()
    try:
        wait_for(lambda: Path(measured + ".left").exists() and Path(free + ".left").exists())
        wait_for(lambda: len(tasks.app.backend.poison.list()) == 1, 30)
    finally:
        worker.stop()
        assert worker.join(30)
    assert 1.5 < float(Path(measured + ".left").read_text()) <= 30, "its own limit"
    assert 0 < float(Path(free + ".left").read_text()) <= 1.5, "the worker's default"
    (record,) = tasks.app.backend.poison.list()
    assert record.envelope.id and record.failure.error_type == "TimeLimitExceeded"


def test_an_async_handler_is_cancelled_at_its_time_limit(sqlite_app: App) -> None:
    @sqlite_app.task(time_limit=0.5, timeout=60)
    async def waits() -> None:
        await asyncio.sleep(60)

    waits.delay()
    worker = Worker(sqlite_app, WorkerConfig(poll_interval_s=0.05))
    worker.start()
    try:
        wait_for(lambda: len(sqlite_app.backend.poison.list()) == 1, 30)
    finally:
        worker.stop()
        assert worker.join(30)
    (record,) = sqlite_app.backend.poison.list()
    assert record.failure.error_type == "TimeLimitExceeded"


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_soft_limit_warns_the_handler_which_may_stop_cleanly(
    tasks: ModuleType, tmp_path: Path, pool: str
) -> None:
    """At its soft limit a sync handler gets ``SoftTimeLimitExceeded`` once: caught, the
    run ends as the handler says (here it succeeds); not caught, the run fails with it."""
    polite, deaf = str(tmp_path / "polite"), str(tmp_path / "deaf")
    handle = tasks.cleans_up.delay(polite)
    tasks.ignores_the_warning.delay(deaf)
    worker = _worker(tasks.app, pool, concurrency=2)
    worker.start()
    try:
        wait_for(lambda: worker.stats.acked == 1, 30)
        wait_for(lambda: len(tasks.app.backend.poison.list()) == 1, 30)
    finally:
        worker.stop()
        assert worker.join(30)
    assert Path(polite + ".warned").exists()
    assert tasks.app.get(id=handle) is None, "the warned run succeeded"
    (record,) = tasks.app.backend.poison.list()
    assert record.failure.error_type == "SoftTimeLimitExceeded"


def test_a_soft_limit_must_come_before_the_time_limit(sqlite_app: App) -> None:
    with pytest.raises(ConfigurationError, match="must be shorter than time_limit"):

        @sqlite_app.task(soft_time_limit=5, time_limit=5)
        def late() -> None: ...
