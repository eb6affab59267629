"""Chains end to end, on every backend: steps run in order, each taking the previous
result when made with ``.s()``; a step that fails for good stops the chain and replaying
it from the poison queue resumes it; bad chains are one clear error and store nothing."""

from __future__ import annotations

import pytest

from scheduler import App, InvalidMessage, RunStatus, chain
from scheduler.workflows import step_id
from tests.support.helpers import running, wait_for


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
        wait_for(lambda: len(app.backend.poison_list()) == 1)
    assert ran == ["extract"], "the chain stopped at the failed step"
    (record,) = app.backend.poison_list()
    assert record.envelope.id == step_id(first, 1)
    broken["on"] = False
    assert app.backend.poison_replay([record.envelope.id]) == 1
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
        wait_for(lambda: len(sqlite_app.backend.poison_list()) == 1)
    (record,) = sqlite_app.backend.poison_list()
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
    with pytest.raises(InvalidMessage, match="cannot have a key yet"):
        chain(one.si(1).options(key="k"), two.s(2))
    with pytest.raises(InvalidMessage, match="cannot have its own key"):
        chain(one.si(1), two.s(2).options(key="k"))
    with pytest.raises(InvalidMessage, match="do not match its signature"):
        sqlite_app.enqueue(chain(one.si(1), two.s(2, 3)))
    with pytest.raises(InvalidMessage, match="run in one queue"):
        sqlite_app.enqueue(chain(one.si(1), two.s(2).options(queue="elsewhere")))
    with pytest.raises(InvalidMessage, match="invalid arguments for task"):
        sqlite_app.enqueue(chain(one.si(1), two.si("x", 2)))  # type: ignore[arg-type]
    assert sqlite_app.backend.stats("default")[0].ready == 0, "nothing was stored"
