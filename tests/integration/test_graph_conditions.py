"""Conditions, ``Skip`` and or-joins in graphs (issue 51, 3): a step whose condition
says no is skipped without running, as is one whose handler raises ``Skip``, and the
steps after it follow their rule; ``rule="one_succeeded"`` runs a step as soon as one
parent succeeded, once, with that parent's result. On every backend, with each graph's
final states."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.support.helpers import running, wait_for
from tickwork.errors import InvalidMessage
from tickwork.scheduler import App, RetryPolicy, Skip, after, graph
from tickwork.scheduler.workflows.graph_schedules import StoredGraph
from tickwork.scheduler.workflows.graph_view import GraphHandle


def is_big(value: int) -> bool:
    """A condition: the parent's value is over 3."""
    return value > 3


def any_big(values: dict[str, int | None]) -> bool:
    """A condition on several parents: one of them is over 3."""
    return any(v is not None and v > 3 for v in values.values())


def broken(value: int) -> bool:
    """A condition with a fault of its own."""
    raise KeyError("threshold")


class Seen:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: dict[str, list[Any]] = {}

    def add(self, name: str, value: Any = None) -> None:
        with self.lock:
            self.runs.setdefault(name, []).append(value)


def _tasks(app: App, seen: Seen) -> dict[str, Any]:
    release = threading.Event()

    @app.task(retry=RetryPolicy(retries=0))
    def number(name: str, value: int) -> int:
        seen.add(name, value)
        if value < 0:
            raise ValueError(f"{name} has no number")
        return value

    @app.task
    def slow(name: str, value: int) -> int:
        release.wait(30)  # until the test lets it finish
        seen.add(name, value)
        return value

    @app.task
    def take(parents: Any, name: str) -> None:
        seen.add(name, parents)

    @app.task
    def mark(name: str) -> None:
        seen.add(name)

    @app.task
    def maybe(name: str, work: bool) -> str:
        if not work:
            raise Skip("nothing new")
        seen.add(name)
        return name

    return {
        "number": number,
        "slow": slow,
        "take": take,
        "mark": mark,
        "maybe": maybe,
        "release": release,
    }


def _started(app: App, steps: dict[str, Any], **options: Any) -> GraphHandle:
    handle = app.enqueue(graph(steps, **options))
    assert isinstance(handle, GraphHandle)
    return handle


def _states(handle: GraphHandle) -> dict[str, str]:
    return {step.name: step.state for step in handle.status().steps}


def test_a_condition_that_says_no_skips_the_step_and_the_default_steps_after_it(
    app: App,
) -> None:
    seen = Seen()
    t = _tasks(app, seen)
    number, take, mark = t["number"], t["take"], t["mark"]
    steps = {
        "a": number.si("a", 1),
        "b": number.si("b", 5),
        "big_a": after("a", take.s("big_a"), condition=is_big),
        "big_b": after("b", take.s("big_b"), condition=is_big),
        "after_big_a": after("big_a", mark.si("after_big_a")),
        "join": after(["big_a", "big_b"], take.s("join"), rule="none_failed"),
        # a condition on a step that does not take the results is given them all the same
        "either": after(["a", "b"], mark.si("either"), condition=any_big),
    }
    handle = _started(app, steps)
    with running(app, concurrency=4):
        handle.results(timeout=30)
    assert seen.runs.keys() == {"a", "b", "big_b", "join", "either"}
    assert seen.runs["big_b"] == [5]
    assert seen.runs["join"] == [{"big_a": None, "big_b": None}]
    assert _states(handle) == {
        "a": "succeeded",
        "b": "succeeded",
        "big_a": "skipped",
        "big_b": "succeeded",
        "after_big_a": "skipped",
        "join": "succeeded",
        "either": "succeeded",
    }
    status = handle.status()
    assert status.state == "succeeded" and "2 skipped" in status.summary


def test_a_handler_that_raises_skip_is_skipped_and_its_finally_runs(app: App) -> None:
    seen = Seen()
    t = _tasks(app, seen)
    maybe, mark, take = t["maybe"], t["mark"], t["take"]
    steps = {
        "work": maybe.si("work", True),
        "idle": maybe.si("idle", False),
        "publish": after("idle", mark.si("publish")),
        "tidy": after(["idle", "work"], take.s("tidy"), rule="all_done"),
    }
    handle = _started(app, steps)
    with running(app, concurrency=4):
        handle.results(timeout=30)
    assert seen.runs.keys() == {"work", "tidy"}
    assert seen.runs["tidy"][0]["results"] == [None, "work"]
    assert _states(handle) == {
        "work": "succeeded",
        "idle": "skipped",
        "publish": "skipped",
        "tidy": "succeeded",
    }


def test_an_or_join_runs_once_on_the_first_success_with_its_result(app: App) -> None:
    """``one_succeeded``: the join runs while its slow parent still runs, with the fast
    parent's value; the slow parent's success later does not run it again; a failed
    parent does not hold it."""
    seen = Seen()
    t = _tasks(app, seen)
    number, slow, take = t["number"], t["slow"], t["take"]
    steps = {
        "fast": number.si("fast", 7),
        "late": slow.si("late", 9),
        "bad": number.si("bad", -1),
        "first": after(["late", "fast", "bad"], take.s("first"), rule="one_succeeded"),
    }
    handle = _started(app, steps, failure="continue")
    try:
        with running(app, concurrency=4):
            wait_for(lambda: "first" in seen.runs, timeout_s=30)
            assert "late" not in seen.runs  # the join did not wait for it
            t["release"].set()
            wait_for(lambda: _states(handle)["late"] == "succeeded", timeout_s=30)
            wait_for(lambda: any(p.task == number.name for p in app.poison.list()), 30)
    finally:
        t["release"].set()
    assert seen.runs["first"] == [7]
    assert _states(handle) == {
        "fast": "succeeded",
        "late": "succeeded",
        "bad": "failed",
        "first": "succeeded",
    }


def test_an_or_join_whose_parents_were_all_skipped_is_skipped(app: App) -> None:
    seen = Seen()
    t = _tasks(app, seen)
    number, take, maybe = t["number"], t["take"], t["maybe"]
    steps = {
        "a": number.si("a", 1),
        "big": after("a", take.s("big"), condition=is_big),
        "idle": maybe.si("idle", False),
        "first": after(["big", "idle"], take.s("first"), rule="one_succeeded"),
        "after_first": after("first", t["mark"].si("after_first")),
    }
    handle = _started(app, steps)
    with running(app, concurrency=4):
        handle.results(timeout=30)
    assert seen.runs.keys() == {"a"}
    assert _states(handle) == {
        "a": "succeeded",
        "big": "skipped",
        "idle": "skipped",
        "first": "skipped",
        "after_first": "skipped",
    }


def test_a_condition_that_raises_poisons_its_step_naming_it(sqlite_app: App) -> None:
    seen = Seen()
    t = _tasks(sqlite_app, seen)
    steps = {
        "a": t["number"].si("a", 1),
        "check": after("a", t["mark"].si("check"), condition=broken),
    }
    handle = _started(sqlite_app, steps)
    with running(sqlite_app, concurrency=2):
        wait_for(lambda: bool(sqlite_app.poison.list()), timeout_s=30)
    (poisoned,) = sqlite_app.poison.list()
    assert poisoned.error_type == "ConditionFailed"
    assert "test_graph_conditions:broken raised KeyError" in poisoned.error
    assert "check" not in seen.runs
    assert _states(handle)["check"] == "failed"


def test_a_condition_the_worker_cannot_import_is_refused_where_it_is_written(
    sqlite_app: App,
) -> None:
    @sqlite_app.task
    def step() -> None: ...

    def local(value: Any) -> bool:
        return True

    with pytest.raises(InvalidMessage, match="a condition must be a function defined at"):
        after("a", step.si(), condition=lambda value: True)
    with pytest.raises(InvalidMessage, match="a condition must be a function defined at"):
        after("a", step.si(), condition=local)
    with pytest.raises(InvalidMessage, match=r"rule must be one of .*one_succeeded"):
        after("a", step.si(), rule="first")  # type: ignore[arg-type]


def test_a_scheduled_graph_keeps_its_conditions_and_rules(sqlite_app: App) -> None:
    @sqlite_app.task
    def step() -> None: ...

    spec = graph(
        {
            "a": step.si(),
            "b": after("a", step.si(), condition=is_big),
            "c": after(["a", "b"], step.si(), rule="one_succeeded"),
        }
    )
    again = StoredGraph.model_validate_json(StoredGraph.of(spec).model_dump_json()).graph()
    assert [(n.name, n.when, n.condition) for n in again.nodes] == [
        (n.name, n.when, n.condition) for n in spec.nodes
    ]
    condition = again.nodes[1].condition
    assert condition is not None
    assert condition.function == f"{__name__}:is_big" and condition.takes == "value"
