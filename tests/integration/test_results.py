"""Results and progress end to end, on every backend: a handle waits for what a task
returned, a failure is raised as one clear error, progress is readable while it runs, a
task that keeps no results says so, and a value that cannot be kept fails the run."""

from __future__ import annotations

import asyncio
import itertools
import threading
from datetime import timedelta

import pytest

from tests.support.helpers import running, wait_for
from tickwork.scheduler import (
    App,
    ResultTimeout,
    RunStatus,
    TaskFailed,
    TaskHandle,
    TaskInfo,
    TickworkError,
    current_run,
)


def test_a_handle_waits_for_the_value_and_raises_a_failure(app: App) -> None:
    @app.task(keep_result=True)
    def add(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    @app.task(keep_result=timedelta(minutes=5))
    def broken() -> None:
        raise ValueError("no such account")

    handle = add.delay(2, 3)
    assert isinstance(handle, TaskHandle) and isinstance(handle, str)
    assert handle.status() is RunStatus.READY
    with pytest.raises(ResultTimeout):
        handle.result(timeout=0.05)
    failing = broken.delay()
    with running(app):
        assert handle.result(timeout=30) == {"sum": 5}
        with pytest.raises(TaskFailed, match="ValueError: no such account") as raised:
            failing.result(timeout=30)
    assert raised.value.error_type == "ValueError"
    info = app.result(handle)
    assert info.status is RunStatus.SUCCEEDED and info.attempt == 1
    assert info.updated_at is not None
    assert app.result(failing).status is RunStatus.FAILED
    assert asyncio.run(handle.aresult(timeout=5)) == {"sum": 5}


def test_progress_is_readable_while_the_task_runs(app: App) -> None:
    halfway = threading.Event()
    go_on = threading.Event()

    @app.task(keep_result=True)
    def crunch() -> str:
        current_run().progress(0.5, "half the rows")
        halfway.set()
        go_on.wait(30)
        return "done"

    handle = crunch.delay()
    with running(app):
        assert halfway.wait(30)
        info = handle.info()
        assert info.status is RunStatus.RUNNING
        assert (info.progress, info.note) == (0.5, "half the rows")
        go_on.set()
        assert handle.result(timeout=30) == "done"


def test_watch_yields_each_change_of_a_run_until_it_ends(app: App) -> None:
    """``watch`` hands on each state it reads that differs from the one before: ready,
    running, each progress note, then the end with the value; ``awatch`` the same in an
    event loop, ending with a failure; each stage is waited for before the next."""
    stages = [threading.Event() for _ in range(2)]

    @app.task(keep_result=True)
    def crunch() -> str:
        current_run().progress(0.25, "reading")
        stages[0].wait(30)
        current_run().progress(0.75, "writing")
        stages[1].wait(30)
        return "done"

    @app.task(keep_result=True, retries=0)
    def broken() -> None:
        raise ValueError("no such account")

    handle = crunch.delay()
    seen: list[tuple[RunStatus, float | None, str | None]] = []
    infos: list[TaskInfo] = []

    def watcher() -> None:
        for info in handle.watch(every=0.02, timeout=60):
            seen.append((info.status, info.progress, info.note))
            infos.append(info)

    watching = threading.Thread(target=watcher)
    watching.start()
    with running(app):
        wait_for(lambda: (RunStatus.RUNNING, 0.25, "reading") in seen, 30)
        stages[0].set()
        wait_for(lambda: (RunStatus.RUNNING, 0.75, "writing") in seen, 30)
        stages[1].set()
        watching.join(30)
        assert not watching.is_alive(), "the watch ends with the run"

        async def watch_failure() -> list[RunStatus]:
            return [info.status async for info in broken.delay().awatch(every=0.02, timeout=60)]

        failed = asyncio.run(watch_failure())
    assert seen[0][0] is RunStatus.READY and seen[-1][0] is RunStatus.SUCCEEDED
    assert infos[-1].value == "done"
    order = [(RunStatus.RUNNING, 0.25, "reading"), (RunStatus.RUNNING, 0.75, "writing")]
    assert [s for s in seen if s in order] == order, seen
    assert all(a != b for a, b in itertools.pairwise(infos)), "only changes"
    assert failed[-1] is RunStatus.FAILED and RunStatus.SUCCEEDED not in failed
    with pytest.raises(ResultTimeout):
        list(crunch.delay().watch(every=0.02, timeout=0.1))  # no worker: never ends


def test_what_cannot_be_kept_is_one_clear_error(sqlite_app: App) -> None:
    @sqlite_app.task
    def quiet() -> int:
        return 1

    @sqlite_app.task(keep_result=True)
    def odd() -> object:
        return object()

    @sqlite_app.task(keep_result=True)
    def bad_progress() -> None:
        current_run().progress(2.0)

    with pytest.raises(TickworkError, match="does not keep its results"):
        quiet.delay().result(timeout=1)
    unkept = quiet.delay()
    not_encodable = odd.delay()
    out_of_range = bad_progress.delay()
    with running(sqlite_app):
        wait_for(lambda: sqlite_app.result(unkept).status is RunStatus.UNKNOWN, timeout_s=30)
        with pytest.raises(TaskFailed, match="not JSON-encodable"):
            not_encodable.result(timeout=30)
        with pytest.raises(TaskFailed, match="progress must be a fraction"):
            out_of_range.result(timeout=30)
    assert sqlite_app.result("no-such-id").status is RunStatus.UNKNOWN
    assert unkept.cancel() is False, "it ran: nothing left to cancel"


def test_a_task_class_keeps_its_results_when_it_says_so(sqlite_app: App) -> None:
    class Square(sqlite_app.Task):  # type: ignore[name-defined,misc]
        keep_result = True

        def run(self, n: int) -> int:
            return n * n

    handle = Square.delay(7)
    with running(sqlite_app):
        assert handle.result(timeout=30) == 49
    import pickle

    assert pickle.loads(pickle.dumps(handle)) == handle, "a handle pickles as its id"
