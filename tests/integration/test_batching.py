"""Batching into one run end to end, on every backend: a task with ``batch_size`` runs
its calls together (up to that many, or what came within ``batch_timeout``, per
``batch_key``); each call is acked, retried or poisoned by what the handler reports for
it, a raise retries every call, results are kept per call, events feed a batch, and an
abort takes a waiting call out."""

from __future__ import annotations

import subprocess
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, InvalidMessage
from tickwork.scheduler.model.batching import BatchedCall
from tickwork.scheduler.model.message import Message

N, SIZE = 500, 50


def test_calls_run_in_batches_and_each_is_acked_retried_or_poisoned_by_its_outcome(
    app: App,
) -> None:
    lock = threading.Lock()
    runs: list[list[int]] = []

    @app.task(batch_size=SIZE, batch_timeout=timedelta(seconds=2), retries=2, keep_result=True)
    def double(calls: list[BatchedCall]) -> None:
        with lock:
            runs.append([call.args[0] for call in calls])
        for call in calls:
            n = call.args[0]
            if n % 100 == 7 and call.attempt == 1:
                call.retry(ConnectionError(f"{n}: try again"), delay=0.1)
            elif n % 100 == 9:
                call.fail(ValueError(f"{n}: never"))
            else:
                call.succeed(2 * n)

    handles = app.enqueue_many([double.call(n) for n in range(N)])
    failing = {n for n in range(N) if n % 100 == 9}
    retried = {n for n in range(N) if n % 100 == 7}
    with running(app, concurrency=4) as worker:
        wait_for(lambda: worker.stats.acked + worker.stats.poisoned == N, timeout_s=120)
        stats = worker.stats
    assert (stats.acked, stats.poisoned, stats.retried) == (
        N - len(failing),
        len(failing),
        len(retried),
    )
    ran = [n for run in runs for n in run]
    assert sorted(ran) == sorted([*range(N), *retried]), "every call once, a retried one twice"
    assert all(len(run) <= SIZE for run in runs)
    assert len(runs) <= N // SIZE + 3, f"{len(runs)} runs for {N} calls in batches of {SIZE}"
    poisoned = app.backend.poison.list(limit=100)
    assert sorted(Message.decode(p.envelope.body).args[0] for p in poisoned) == sorted(failing)
    assert {p.failure.error_type for p in poisoned} == {"ValueError"}
    assert app.result(handles.ids[3]).value == 6
    assert app.result(handles.ids[107]).value == 214, "a retried call's result is its own"


def test_a_batch_key_keeps_values_apart_and_the_timeout_runs_what_came(app: App) -> None:
    lock = threading.Lock()
    runs: list[tuple[str | None, list[int]]] = []

    @app.task(batch_size=10, batch_timeout=timedelta(milliseconds=300), batch_key="tenant")
    def collect(calls: list[BatchedCall]) -> list[int]:
        with lock:
            runs.append((calls[0].key, sorted(call.kwargs["n"] for call in calls)))
        return [call.kwargs["n"] for call in calls]  # one result per call: allowed

    for n in range(3):
        collect.delay(tenant="acme", n=n)
    for n in range(2):
        collect.delay(tenant="globex", n=n)
    with running(app, concurrency=2):
        wait_for(lambda: sum(len(ns) for _, ns in runs) == 5, timeout_s=60)
    assert sorted(runs) == [("acme", [0, 1, 2]), ("globex", [0, 1])]


def test_a_batch_that_raises_retries_every_call(app: App) -> None:
    lock = threading.Lock()
    attempts: list[list[int]] = []

    @app.task(batch_size=5, batch_timeout=timedelta(milliseconds=300), retries=1)
    def flaky(calls: list[BatchedCall]) -> None:
        with lock:
            attempts.append(sorted(call.attempt for call in calls))
        if all(call.attempt == 1 for call in calls):
            raise ConnectionError("the bulk endpoint is down")

    app.enqueue_many([flaky.call(n) for n in range(5)])
    with running(app, concurrency=2) as worker:
        wait_for(lambda: worker.stats.acked == 5, timeout_s=60)
        assert worker.stats.retried == 5
    assert attempts[0] == [1] * 5 and sorted(a for run in attempts[1:] for a in run) == [2] * 5


def test_an_async_batched_handler_runs_its_calls_together(app: App) -> None:
    seen: list[int] = []

    @app.task(batch_size=4, batch_timeout=timedelta(milliseconds=300))
    async def gather(calls: list[BatchedCall]) -> None:
        seen.append(len(calls))
        calls[-1].fail("the last of each batch fails")

    app.enqueue_many([gather.call(n) for n in range(8)])
    with running(app, concurrency=2) as worker:
        wait_for(lambda: worker.stats.acked + worker.stats.poisoned == 8, timeout_s=60)
        assert worker.stats.poisoned == len(seen)
    assert sum(seen) == 8


def test_events_feed_a_batch(app: App) -> None:
    got: list[list[str]] = []

    @app.task(on_events="order.paid", batch_size=20, batch_timeout=timedelta(milliseconds=500))
    def invoice(calls: list[BatchedCall]) -> None:
        got.append(sorted(str(call.event.key) for call in calls))

    for n in range(12):
        app.emit("order.paid", {"total": n}, key=f"o-{n:02}")
    with running(app, concurrency=2):
        wait_for(lambda: sum(len(keys) for keys in got) == 12, timeout_s=60)
    assert sorted(k for keys in got for k in keys) == [f"o-{n:02}" for n in range(12)]
    assert len(got) <= 3, got


def test_an_abort_takes_a_waiting_call_out_of_its_batch(sqlite_app: App) -> None:
    app = sqlite_app
    ran: list[list[int]] = []

    @app.task(batch_size=10, batch_timeout=timedelta(seconds=3))
    def slow(calls: list[BatchedCall]) -> None:
        ran.append(sorted(call.args[0] for call in calls))

    handles = app.enqueue_many([slow.call(n) for n in range(3)])
    with running(app, concurrency=2) as worker:
        wait_for(lambda: worker.stats.claimed == 3, timeout_s=30)
        app.abort(id=handles.ids[1])
        wait_for(lambda: worker.stats.aborted == 1 and len(ran) == 1, timeout_s=30)
    assert ran == [[0, 2]]


def test_bad_batching_is_one_clear_error_and_stores_nothing(sqlite_app: App) -> None:
    app = sqlite_app
    with pytest.raises(InvalidMessage, match="batch_size of task 'zero'"):
        app.task(name="zero", batch_size=0)(lambda calls: None)
    with pytest.raises(InvalidMessage, match="batch_timeout but no batch_size"):
        app.task(name="lone", batch_timeout=timedelta(seconds=1))(lambda calls: None)  # type: ignore[call-overload]
    with pytest.raises(InvalidMessage, match="takes the list of calls as its one argument"):
        app.task(name="two", batch_size=5)(lambda a, b: None)  # type: ignore[arg-type, misc]
    with pytest.raises(InvalidMessage, match="a batch_size and a concurrency_limit"):
        app.task(name="limited", batch_size=5, concurrency_limit=2)(lambda calls: None)

    @app.task(batch_size=5, batch_key="tenant")
    def keyed(calls: list[BatchedCall]) -> None: ...

    with pytest.raises(InvalidMessage, match="without the keyword argument 'tenant'"):
        keyed.delay("acme")
    with pytest.raises(InvalidMessage, match="must give a string or a number"):
        keyed.delay(tenant=None)
    assert all(s.ready + s.scheduled == 0 for s in app.backend.queues.stats()), "none stored"


def test_a_batched_task_runs_in_the_process_pool(
    sqlite_app: App, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """``tickwork worker --pool process``: the child runs the handler on the calls and
    sends the report back; run the user's way, from another directory."""
    from tests.support import batched_tasks as tasks
    from tests.support.served import console_script

    url, count = sqlite_app.settings.backend, 250
    done, calls = tmp_path / "done.txt", tmp_path / "calls.txt"
    tasks.app.use_backend(url)
    tasks.app.enqueue_many([tasks.batched.call(n) for n in range(count)])
    tasks.app.close()
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_DONE": str(done)}
    env["TICKWORK_TEST_CALLS"] = str(calls)
    module = "tests.support.batched_tasks"
    command = [console_script(), "worker", "-A", module, "--pool", "process", "-c", "2"]
    finished = subprocess.run(
        [*command, "--burst"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    retried = [n for n in range(count) if n % 89 == 0 and n % 97 != 0]
    assert sorted(int(n) for n in done.read_text().split()) == sorted([*range(count), *retried])
    sizes = [int(size) for size in calls.read_text().split()]
    assert sum(sizes) == count + len(retried) and len(sizes) <= 5, sizes
    poisoned = sqlite_app.backend.poison.list()
    failing = [n for n in range(count) if n % 97 == 0]
    assert sorted(Message.decode(p.envelope.body).args[0] for p in poisoned) == failing
