"""Chains end to end, on every backend: steps run in order, each taking the previous
result when made with ``.s()``; a step that fails for good stops the chain and replaying
it from the poison queue resumes it; a keyed chain is read and cancelled by its key; a
recurring chain runs whole occurrences; bad chains are one clear error and store nothing."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

import pytest
from click.testing import CliRunner

from tests.support.helpers import running, wait_for
from tickwork.cli import cli
from tickwork.scheduler import (
    App,
    InvalidMessage,
    KeyConflict,
    Message,
    RetryPolicy,
    RunStatus,
    chain,
)
from tickwork.scheduler.model.calls import Call
from tickwork.scheduler.model.shapes import Sequenced
from tickwork.scheduler.producing.chains import step_id
from tickwork.triggers import Cron, Repeating


def test_steps_run_in_order_each_taking_the_previous_result(app: App) -> None:
    seen: list[str] = []

    @app.task
    def fetch(n: int) -> list[int]:
        seen.append("fetch")
        return list(range(n))

    @app.task
    def total(numbers: list[int], offset: int = 0) -> int:
        seen.append("total")
        return sum(numbers) + offset

    @app.task
    def ping() -> str:
        seen.append("ping")
        return "pong"

    @app.task(keep_result=True)
    def report(value: int, unit: str) -> str:
        seen.append("report")
        return f"{value} {unit}"

    first = app.enqueue(
        chain(fetch.si(4), total.s(offset=10), ping.si(), report.si(16, unit="rows"))
    )
    stored = app.get(id=first)
    assert stored is not None and [s.task for s in stored.message.then] == [
        total.name,
        ping.name,
        report.name,
    ]
    assert app.get(id=step_id(first, 1)) is None, "a later step is not stored before its turn"
    with running(app):
        wait_for(lambda: app.result(step_id(first, 3)).status is RunStatus.SUCCEEDED)
    assert seen == ["fetch", "total", "ping", "report"]
    assert app.result(step_id(first, 3)).value == "16 rows"


def test_a_failed_step_stops_the_chain_and_replaying_it_resumes(sqlite_app: App) -> None:
    app = sqlite_app
    ran: list[str] = []
    broken = {"on": True}

    @app.task
    def extract() -> int:
        ran.append("extract")
        return 3

    @app.task
    def transform(n: int) -> int:
        if broken["on"]:
            raise RuntimeError("upstream down")
        ran.append("transform")
        return n * 2

    @app.task(keep_result=True)
    def load(n: int) -> int:
        ran.append("load")
        return n + 1

    first = app.enqueue(chain(extract.si(), transform.s(), load.s()))
    with running(app):
        wait_for(lambda: len(app.backend.poison.list()) == 1)
    assert ran == ["extract"], "the chain stopped at the failed step"
    (record,) = app.backend.poison.list()
    assert record.envelope.id == step_id(first, 1)
    broken["on"] = False
    assert app.backend.poison.replay([record.envelope.id]) == 1
    with running(app):
        wait_for(lambda: app.result(step_id(first, 2)).status is RunStatus.SUCCEEDED)
    assert ran == ["extract", "transform", "load"]
    assert app.result(step_id(first, 2)).value == 7, "the replayed step kept its argument"


def test_a_result_that_does_not_fit_the_next_step_poisons_it_with_a_clear_error(
    sqlite_app: App,
) -> None:
    @sqlite_app.task
    def word() -> str:
        return "seven"

    @sqlite_app.task
    def square(n: int) -> int:
        return n * n

    first = sqlite_app.enqueue(chain(word.si(), square.s()))
    with running(sqlite_app):
        wait_for(lambda: len(sqlite_app.backend.poison.list()) == 1)
    (record,) = sqlite_app.backend.poison.list()
    assert record.envelope.id == step_id(first, 1)
    assert "invalid arguments for task" in record.failure.message
    assert "n: Input should be a valid integer" in record.failure.message


def test_bad_chains_are_one_clear_error_and_store_nothing(sqlite_app: App) -> None:
    @sqlite_app.task
    def one(n: int) -> int:
        return n

    @sqlite_app.task
    def two(a: int, b: int) -> int:
        return a + b

    with pytest.raises(InvalidMessage, match="at least one step"):
        chain()
    with pytest.raises(InvalidMessage, match="no previous result"):
        sqlite_app.enqueue(chain(one.s(1)))
    with pytest.raises(InvalidMessage, match="cannot have its own key"):
        chain(one.si(1), two.s(2).options(key="k"))
    with pytest.raises(InvalidMessage, match="do not match its signature"):
        sqlite_app.enqueue(chain(one.si(1), two.s(2, 3)))
    made_by_hand = Call(one.name, (1,), then=(two.s(2).options(queue="elsewhere"),))
    with pytest.raises(InvalidMessage, match="one that changes queue runs as a graph"):
        sqlite_app.enqueue(made_by_hand)
    with pytest.raises(InvalidMessage, match="invalid arguments for task"):
        sqlite_app.enqueue(chain(one.si(1), two.si("x", 2)))  # type: ignore[arg-type]
    assert sqlite_app.backend.queues.stats("default")[0].ready == 0, "nothing was stored"


def test_a_chain_that_changes_queue_runs_as_a_graph_across_them(app: App) -> None:
    """A later step in another queue (its own ``queue=`` or its task's) runs as a graph
    does, each step taking the step before's result itself (issue 49, 9)."""
    seen: list[tuple[str, int]] = []

    @app.task
    def fetch(n: int) -> int:
        seen.append(("fetch", n))
        return n

    @app.task(queue="heavy")
    def crunch(n: int) -> int:
        seen.append(("crunch", n))
        return n * 10

    @app.task
    def publish(n: int) -> int:
        seen.append(("publish", n))
        return n + 1

    both = chain(fetch.si(2), crunch.s(), publish.s().options(queue="out"))
    assert isinstance(both, Sequenced)  # it runs as a graph
    handle = both.delay()
    with running(app, queues=("default", "heavy", "out")):
        results = handle.result(timeout=30)
    assert seen == [("fetch", 2), ("crunch", 2), ("publish", 20)]
    assert list(results.values()) == [2, 20, 21]


def test_a_keyed_chain_is_read_and_cancelled_by_its_key(app: App) -> None:
    """Every step of a keyed chain holds the key in turn: the key reads the live step, and
    cancelling it while a step runs ends the chain there (no later step resurrects)."""
    ran: list[str] = []
    inside, release = threading.Event(), threading.Event()

    @app.task
    def start(n: int) -> int:
        ran.append("start")
        return n

    @app.task
    def slow(n: int) -> int:
        ran.append("slow")
        inside.set()
        release.wait(10)
        return n + 1

    @app.task
    def finish(n: int) -> None:
        ran.append("finish")

    @app.task
    def sentinel() -> None:
        ran.append("sentinel")

    app.enqueue(chain(start.si(1), slow.s(), finish.s()).options(key="etl"))
    stored = app.get(key="etl")
    assert stored is not None and stored.message.task == start.name
    with pytest.raises(KeyConflict):
        app.enqueue(chain(start.si(2), finish.s()).options(key="etl"))
    with running(app):
        assert inside.wait(20)
        live = app.get(key="etl")
        assert live is not None and live.message.task == slow.name, "the key moved on"
        assert app.cancel(key="etl")
        release.set()
        # due after the step "finish" would have been written: the queue is claimed in
        # due order, and the worker joined after it finished whatever it had claimed
        sentinel.schedule(delay=timedelta(milliseconds=300))
        wait_for(lambda: "sentinel" in ran)
    assert ran == ["start", "slow", "sentinel"], "the cancelled chain stopped at its step"
    assert app.get(key="etl") is None


def test_a_recurring_chain_runs_whole_occurrences_that_never_overlap(app: App) -> None:
    seen: list[str] = []
    calls = {"n": 0}

    @app.task
    def first(label: str) -> int:
        seen.append("first")
        return 1

    @app.task
    def second(n: int) -> int:
        calls["n"] += 1
        if calls["n"] == 2:
            seen.append("second failed")
            raise RuntimeError("the second occurrence's second step fails")
        seen.append("second")
        return n + 1

    @app.task
    def third(n: int) -> None:
        seen.append("third")
        time.sleep(0.4)  # longer than the interval: the next occurrence waits for it

    @app.task
    def sentinel() -> None:
        sentinels.append(1)

    sentinels: list[int] = []
    trigger = Repeating(interval=timedelta(milliseconds=200))
    app.enqueue(chain(first.si("x"), second.s(), third.s()).options(key="nightly", trigger=trigger))
    with running(app):
        wait_for(lambda: len(seen) >= 8, 90)
        assert app.cancel(key="nightly"), "cancelled while its last step runs"
        # the step running at the cancel finishes; nothing follows it: a sentinel due
        # after four more occurrences would have been runs once they would have run
        sentinel.schedule(delay=timedelta(seconds=0.8))
        wait_for(lambda: sentinels == [1], 30)
    assert app.get(key="nightly") is None
    assert seen == [
        "first",
        "second",
        "third",
        "first",
        "second failed",
        "first",
        "second",
        "third",
    ]
    (poisoned,) = app.backend.poison.list()
    assert Message.decode(poisoned.envelope.body).task == second.name


def test_running_a_recurring_chain_now_runs_it_from_its_first_step(sqlite_app: App) -> None:
    app = sqlite_app
    seen: list[str] = []

    @app.task
    def head() -> int:
        seen.append("head")
        return 5

    @app.task
    def tail(n: int) -> None:
        seen.append(f"tail {n}")

    app.enqueue(chain(head.si(), tail.s()).options(key="hourly", trigger=Cron("0 * * * *")))
    assert [s.task for s in app.schedules.list()] == [head.name]
    app.schedules.trigger_now("hourly")
    with running(app):
        wait_for(lambda: seen == ["head", "tail 5"])
    with pytest.raises(InvalidMessage, match="recurring chain"):
        app.schedules.pause("hourly")


def test_a_keyed_chain_waiting_is_replaced_by_its_key(app: App) -> None:
    @app.task
    def old(n: int) -> int:
        return n

    @app.task
    def new(n: int) -> int:
        return n

    @app.task
    def after(n: int) -> None: ...

    app.enqueue(chain(old.si(1), after.s()).options(key="job", delay=timedelta(hours=1)))
    app.enqueue(chain(new.si(2), after.s()).options(key="job"), on_conflict="replace")
    live = app.get(key="job")
    assert live is not None and live.message.task == new.name
    assert [s.task for s in live.message.then] == [after.name]
    assert app.cancel(key="job") and app.get(key="job") is None


def test_a_step_retried_after_a_failure_passes_its_result_on(app: App) -> None:
    attempts = {"flaky": 0}
    seen: list[int] = []

    @app.task
    def start() -> int:
        return 20

    @app.task(retry=RetryPolicy(retries=2, base_s=0.05, jitter=False))
    def flaky(n: int) -> int:
        attempts["flaky"] += 1
        if attempts["flaky"] < 3:
            raise ConnectionError("the upstream blinked")
        return n + 1

    @app.task
    def finish(n: int) -> None:
        seen.append(n)

    app.enqueue(chain(start.si(), flaky.s(), finish.s()))
    with running(app):
        wait_for(lambda: seen == [21])
    assert attempts["flaky"] == 3 and app.backend.poison.list() == []


def test_workflow_show_by_key_shows_a_recurring_chain_occurrence(
    sqlite_app: App, sqlite_url: str
) -> None:
    app = sqlite_app
    inside, release = threading.Event(), threading.Event()

    @app.task
    def load() -> int:
        return 1

    @app.task
    def crunch(n: int) -> int:
        inside.set()
        release.wait(10)
        return n

    @app.task
    def ship(n: int) -> None: ...

    trigger = Repeating(interval=timedelta(hours=1))
    app.enqueue(chain(load.si(), crunch.s(), ship.s()).options(key="hourly", trigger=trigger))
    with running(app):
        assert inside.wait(20)
        view = app.batches.workflow(key="hourly")
        release.set()
    assert [(s.task, s.state) for s in view.steps] == [
        (load.name, "succeeded"),
        (crunch.name, "running"),
        (ship.name, "not started"),
    ]
    assert "occurrence 0 of a recurring chain" in view.summary
    shown = CliRunner().invoke(
        cli, ["--backend", sqlite_url, "workflow", "show", "--key", "hourly", "--json"]
    )
    assert shown.exit_code == 0 and json.loads(shown.stdout)["steps"][0]["task"] == load.name


def test_a_later_step_keeps_its_tasks_limits_and_fair_key(sqlite_app: App) -> None:
    """A step after the first carries its task's concurrency limit, rate limit and
    fair-share keys like a first step does (they were dropped: a limit promised across
    every worker did not hold for a task used as a later step). A step that takes the
    previous result gets the keys that come from it when it is written."""
    app = sqlite_app

    @app.task
    def start() -> str:
        return "globex"

    @app.task(concurrency_limit=1, rate_limit="10/m", limit_key="customer", fair_key="customer")
    def bill(customer: str) -> str:
        return customer

    @app.task(concurrency_limit=2, limit_key="customer")
    def notify(customer: str) -> None: ...

    first_id = app.enqueue(chain(start.si(), bill.si("acme"), bill.si("initech"), notify.s()))
    stored = app.get(id=first_id)
    assert stored is not None
    now = app.backend.now_ms()
    second = app.builder.next_step(stored.message, now, b'"globex"')
    billed = Message.decode(second.body)
    assert billed.limit is not None and billed.limit.endswith(":acme")
    assert billed.rate is not None and billed.rate.endswith(":acme")
    assert billed.fair == "acme" and second.fair == "acme" and second.limit == billed.limit
    third = Message.decode(app.builder.next_step(billed, now, b'"acme"').body)
    assert third.limit is not None and third.limit.endswith(":initech")
    last = Message.decode(app.builder.next_step(third, now, b'"globex"').body)
    assert last.task == notify.name
    assert last.limit is not None and last.limit.endswith(":globex"), "from the result"


def test_a_limit_holds_for_a_task_run_as_a_later_step(pair_app: App) -> None:
    app = pair_app
    lock = threading.Lock()
    running_now = [0]
    most = [0]
    done: list[int] = []

    @app.task
    def prepare(n: int) -> None: ...

    @app.task(concurrency_limit=1, limit_key="customer")
    def charge(customer: str, n: int) -> None:
        with lock:
            running_now[0] += 1
            most[0] = max(most[0], running_now[0])
        time.sleep(0.1)
        with lock:
            running_now[0] -= 1
            done.append(n)

    for n in range(4):
        app.enqueue(chain(prepare.si(n), charge.si("acme", n)))
    with running(app, concurrency=8):
        wait_for(lambda: len(done) == 4, timeout_s=60)
    assert most[0] == 1, "one charge of a customer at a time, across the chains"
