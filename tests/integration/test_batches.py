"""Groups and batches end to end, on every backend: the callback that applies fires once
when the last member settles, with the members' results or failures; a redelivered
member is not counted twice; bad batches are one clear error and store nothing."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.helpers import running, wait_for
from tickwork.cli import cli
from tickwork.scheduler import (
    App,
    Batch,
    BatchFailed,
    BatchOutcome,
    Group,
    InvalidMessage,
    RetryPolicy,
    batch,
    chain,
    group,
)
from tickwork.scheduler.backends import MemberOutcome
from tickwork.scheduler.runs.results import succeeded_record
from tickwork.scheduler.workflows.batches import member_id


def test_on_success_takes_the_results_in_order_and_fires_once(app: App) -> None:
    calls: list[Any] = []
    lock = threading.Lock()

    @app.task
    def square(n: int) -> int:
        return n * n

    @app.task
    def report(results: list[int], label: str) -> None:
        with lock:
            calls.append(("success", label, results))

    @app.task
    def finished(outcome: BatchOutcome) -> None:
        with lock:
            calls.append(("complete", outcome["succeeded"], outcome["failed"]))

    @app.task
    def alarm() -> None:
        with lock:
            calls.append("failure")

    handle = app.batches.enqueue(
        batch(
            group(square.call(n) for n in range(20)),
            on_success=report.s("squares"),
            on_complete=finished.s(),
            on_failure=alarm.si(),
        )
    )
    before = handle.status()
    assert (before.size, before.settled, before.complete) == (20, 0, False)
    assert set(before.callbacks) == {"success", "complete", "failure"}
    with running(app, concurrency=4):
        wait_for(lambda: len(calls) == 2)
        assert handle.results(timeout=10) == [n * n for n in range(20)]
    assert sorted(calls, key=str) == sorted(
        [("success", "squares", [n * n for n in range(20)]), ("complete", 20, 0)], key=str
    )
    assert app.get(id=before.callbacks["failure"]) is None, "the failure callback is dropped"
    done = app.batches.get(handle, members=True)
    assert done.complete and [m.status for m in done.members] == ["succeeded"] * 20
    assert done.members[3].id == member_id(handle, 3) and done.members[3].value == 9


def test_a_member_that_fails_for_good_fires_on_failure_with_why(app: App) -> None:
    outcomes: list[BatchOutcome] = []

    @app.task(retry=RetryPolicy(retries=1, base_s=0.01, jitter=False))
    def parse(text: str) -> int:
        return int(text)

    @app.task
    def success(results: list[int]) -> None:
        raise AssertionError("no member may fail for on_success to fire")

    @app.task
    def failure(outcome: BatchOutcome) -> None:
        outcomes.append(outcome)

    handle = app.batches.enqueue(
        batch(
            [parse.call("1"), parse.call("x"), parse.call("3")],
            on_success=success.s(),
            on_failure=failure.s(),
        )
    )
    with running(app):
        wait_for(lambda: len(outcomes) == 1)
        with pytest.raises(BatchFailed, match="invalid literal"):
            handle.results(timeout=10)
    (outcome,) = outcomes
    assert (outcome["size"], outcome["succeeded"], outcome["failed"]) == (3, 2, 1)
    assert outcome["results"] == [1, None, 3]
    (failed,) = outcome["failures"]
    assert failed["index"] == 1 and failed["id"] == member_id(handle, 1)
    assert failed["error_type"] == "ValueError"
    assert len(app.backend.poison.list()) == 1, "the failed member is in the poison queue"
    status = app.batches.get(handle, members=True)
    assert status.members[1].attempt == 2


def test_a_redelivered_member_is_counted_once(sqlite_app: App) -> None:
    """A member whose outcome was counted but whose ack was lost (a crash between the two)
    runs again: the count stays, and the callback, woken again, is still one message."""
    app = sqlite_app
    runs: list[str] = []

    @app.task
    def work(n: int) -> int:
        return n

    @app.task
    def done(results: list[int]) -> None:
        runs.append("callback")

    handle = app.enqueue(batch(group([work.call(1), work.call(2)]), on_success=done.s()))
    # as if a worker counted member 0 and crashed before its ack
    expires = app.backend.now_ms() + 60_000
    record = succeeded_record(b"1", 1, app.backend.now_ms())
    app.backend.batches.settle([MemberOutcome(handle, 0, False, record, expires)])
    with running(app):
        wait_for(lambda: runs == ["callback"])
    status = app.batches.get(handle)
    assert (status.settled, status.failed) == (2, 0)


def test_a_group_alone_can_be_waited_for(app: App) -> None:
    @app.task
    def double(n: int) -> int:
        return 2 * n

    handle = app.batches.enqueue(group(double.call(n) for n in range(5)))
    assert handle.status().callbacks == {}
    with running(app):
        assert handle.results(timeout=20) == [0, 2, 4, 6, 8]


def test_cancelling_a_batch_cancels_pending_members_and_every_callback(app: App) -> None:
    fired: list[str] = []

    @app.task
    def slow(n: int) -> int:
        return n

    @app.task
    def after() -> None:
        fired.append("after")

    handle = app.batches.enqueue(batch([slow.call(n) for n in range(4)], on_complete=after.si()))
    assert app.batches.cancel(handle) == 4
    assert app.get(id=member_id(handle, 0)) is None
    assert app.get(id=app.batches.get(handle).callbacks["complete"]) is None
    assert app.backend.queues.stats()[0].ready + app.backend.queues.stats()[0].scheduled == 0


def test_bad_batches_are_one_clear_error_and_store_nothing(sqlite_app: App) -> None:
    app = sqlite_app

    @app.task
    def step(n: int) -> int:
        return n

    @app.task
    def callback(outcome: BatchOutcome, extra: int) -> None: ...

    cases: list[tuple[Callable[[], Batch | Group], str]] = [
        (lambda: group([]), "at least one call"),
        (lambda: batch([step.call("nope")]), "step"),  # type: ignore[arg-type]
        (lambda: batch([step.s()]), "no previous result"),
        (lambda: batch([step.call(1).options(key="k")]), "cannot have a key"),
        (  # a batch of chains runs as a graph, whose steps are checked as well
            lambda: batch(
                [chain(step.si(1), step.s())], on_success=group([step.si(1).options(key="k")])
            ),
            "cannot have its own key",
        ),
        (lambda: batch([step.call(1)], on_success=callback.s()), "do not match"),
        (lambda: batch([step.call(1)], on_complete=callback.s(1).options(key="k")), "key"),
    ]
    for make, error in cases:
        with pytest.raises(InvalidMessage, match=error):
            app.enqueue(make())
    assert app.backend.queues.stats() == [] or all(
        s.ready + s.scheduled == 0 for s in app.backend.queues.stats()
    )


def test_workflow_show_prints_a_batch_and_a_chain(sqlite_app: App, sqlite_url: str) -> None:
    app = sqlite_app

    @app.task
    def part(n: int) -> int:
        if n == 2:
            raise ValueError("two is bad")
        return n

    @app.task(keep_result=True)
    def step(n: int) -> int:
        return n + 1

    @app.task
    def stuck(n: int) -> int:
        raise RuntimeError("stuck here")

    @app.task
    def wrap_up() -> None: ...

    handle = app.batches.enqueue(
        batch([part.call(n) for n in range(3)], on_success=wrap_up.si(), on_failure=wrap_up.si())
    )
    first = app.enqueue(chain(step.si(1), step.s(), stuck.s(), step.s()))
    runner = CliRunner()
    shown = runner.invoke(cli, ["--backend", sqlite_url, "workflow", "show", handle])
    assert shown.exit_code == 0, shown.output
    assert "0 succeeded, 0 failed, 3 pending" in shown.stdout
    assert "waiting for the batch" in shown.stdout
    with running(app):
        wait_for(lambda: app.batches.workflow(handle).state == "settled")
        wait_for(lambda: app.batches.workflow(first).state == "stopped")
    view = app.batches.workflow(handle)
    states = {s.name: s.state for s in view.steps}
    assert states == {
        "member 0": "succeeded",
        "member 1": "succeeded",
        "member 2": "failed",
        "on_success": "dropped",
        "on_failure": "fired",
    }
    chained = app.batches.workflow(first)
    assert [(s.name, s.state) for s in chained.steps] == [
        ("step 0", "succeeded"),
        ("step 1", "succeeded"),
        ("step 2", "failed"),
        ("step 3", "not started"),
    ]
    assert chained.steps[1].value == 3 and "stuck here" in (chained.steps[2].error or "")
    out = runner.invoke(cli, ["--backend", sqlite_url, "workflow", "show", first, "--json"])
    assert out.exit_code == 0 and json.loads(out.stdout)["state"] == "stopped"
    missing = runner.invoke(cli, ["--backend", sqlite_url, "workflow", "show", "nope"])
    assert missing.exit_code == 1 and "no batch or chain" in missing.stderr
