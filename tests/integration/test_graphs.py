"""Graphs end to end, on every backend: a step with several parents starts once all of
them succeeded and takes their results by name; chains, groups and batches nest; a
failure stops the graph (or lets independent branches finish) and a replay resumes it;
cancel by key cancels every step not yet run and none comes back; bad graphs are one
clear error and store nothing."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from tests.support.graphs import mesh, mesh_name
from tests.support.helpers import running, wait_for
from tickwork.cli import cli
from tickwork.dashboard import create_dashboard
from tickwork.scheduler import App, InvalidMessage, KeyConflict, after, batch, chain, graph, group
from tickwork.scheduler.workflows.graph_view import GraphFailed, GraphHandle


class Runs:
    """What the tasks of a test did, from any thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, Any]] = []

    def add(self, name: str, value: Any = None) -> None:
        with self.lock:
            self.seen.append((name, value))

    def names(self) -> Counter[str]:
        with self.lock:
            return Counter(name for name, _ in self.seen)

    def value(self, name: str) -> Any:
        with self.lock:
            (found,) = [value for seen, value in self.seen if seen == name]
        return found


def handle_of(found: object) -> GraphHandle:
    assert isinstance(found, GraphHandle)
    return found


def test_a_diamond_runs_each_step_once_and_the_last_gets_both_results(app: App) -> None:
    runs = Runs()

    @app.task
    def fetch(n: int) -> int:
        runs.add("fetch", n)
        return n

    @app.task
    def double(x: int) -> int:  # after "a" alone: a's result itself, as in a chain
        runs.add("double", x)
        return x * 2

    @app.task
    def square(x: dict[str, int]) -> int:
        runs.add("square", x)
        return x["a"] ** 2

    @app.task
    def report(parts: dict[str, int], label: str) -> str:
        runs.add("report", parts)
        return f"{label}: {parts['b']} {parts['c']}"

    handle = handle_of(
        app.enqueue(
            graph(
                {
                    "a": fetch.si(7),
                    "b": after("a", double.s()),
                    "c": after(["a"], square.s()),
                    "d": after(["b", "c"], report.s("sum")),
                }
            )
        )
    )
    before = handle.status()
    assert [s.state for s in before.steps] == ["ready", "waiting", "waiting", "waiting"]
    assert before.steps[3].after == ["b", "c"]
    with running(app, concurrency=4):
        results = handle.results(timeout=30)
    assert results == {"a": 7, "b": 14, "c": 49, "d": "sum: 14 49"}
    assert runs.names() == Counter(fetch=1, double=1, square=1, report=1)
    assert runs.value("report") == {"b": 14, "c": 49}
    assert runs.value("double") == 7
    assert runs.value("square") == {"a": 7}  # after a list of one: a dict by name
    view = handle.status()
    assert view.state == "succeeded" and all(s.attempt == 1 for s in view.steps)


def test_a_chain_of_groups_and_a_group_of_chains(app: App) -> None:
    runs = Runs()

    @app.task
    def start(n: int) -> int:
        return n

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    @app.task
    def total(xs: list[int]) -> int:
        runs.add("total", xs)
        return sum(xs)

    @app.task
    def collect(xs: list[int]) -> None:
        runs.add("collect", xs)

    # start(1) -> [add 10, add 20] -> total -> add 100
    first = handle_of(
        app.enqueue(chain(start.si(1), group([add.s(10), add.s(20)]), total.s(), add.s(100)))
    )
    # two chains side by side, then one step after both
    second = handle_of(
        app.enqueue(
            chain(
                group([chain(start.si(2), add.s(3)), chain(start.si(4), add.s(5), add.s(6))]),
                collect.s(),
            )
        )
    )
    with running(app, concurrency=4):
        assert list(first.results(timeout=30).values()) == [1, 11, 21, 32, 132]
        second.wait(timeout=30)
    assert runs.value("total") == [11, 21]
    assert runs.value("collect") == [5, 15]


def test_a_batch_of_chains_with_a_group_as_its_callback(app: App) -> None:
    runs = Runs()

    @app.task
    def load(name: str) -> str:
        return name

    @app.task
    def shout(text: str) -> str:
        return text.upper()

    @app.task
    def notify(results: list[str], channel: str) -> None:
        runs.add(channel, results)

    @app.task
    def never() -> None:
        runs.add("never")

    handle = app.batches.enqueue(
        batch(
            [chain(load.si("a"), shout.s()), chain(load.si("b"), shout.s()), load.si("c")],
            on_success=group([notify.s("mail"), notify.s("chat")]),
            on_failure=never.si(),
        )
    )
    before = handle.status(members=True)
    assert (before.size, before.settled) == (3, 0)
    assert set(before.callbacks) == {"success", "failure"}
    with running(app, concurrency=4):
        assert handle.results(timeout=30) == ["A", "B", "c"]  # each member's last step
        view = GraphHandle(handle, app.batches).wait(timeout=30)
    assert view.state == "succeeded", view
    assert runs.value("mail") == ["A", "B", "c"] and runs.value("chat") == ["A", "B", "c"]
    assert "never" not in runs.names(), "the failure callback does not run"
    assert app.get(id=before.callbacks["failure"]) is None, "it is dropped"


def test_a_failed_step_stops_the_graph_and_its_replay_resumes_it(app: App) -> None:
    """a -> b (fails once) -> c, and a -> x -> y: once b failed for good, y does not start
    though x (running then) succeeded; replaying b resumes the graph and every step runs
    once."""
    runs = Runs()
    broken = threading.Event()
    broken.set()

    @app.task
    def step(name: str) -> str:
        runs.add(name)
        return name

    x_started = threading.Event()

    @app.task
    def flaky() -> str:
        runs.add("b")
        if broken.is_set():
            assert x_started.wait(20)  # x is running when b fails: it finishes
            raise RuntimeError("b is broken")
        return "b"

    @app.task
    def slow() -> str:
        x_started.set()
        wait_for(lambda: len(app.backend.poison.list()) == 1)  # b failed for good first
        runs.add("x")
        return "x"

    handle = handle_of(
        app.enqueue(
            graph(
                {
                    "a": step.si("a"),
                    "b": after("a", flaky.si()),
                    "c": after("b", step.si("c")),
                    "x": after("a", slow.si()),
                    "y": after("x", step.si("y")),
                }
            )
        )
    )
    with running(app, concurrency=4):
        stopped = handle.wait(timeout=30)
        assert stopped.state == "stopped"
        states = {s.name: s.state for s in stopped.steps}
        assert states == {
            "a": "succeeded",
            "b": "failed",
            "c": "waiting",
            "x": "succeeded",
            "y": "waiting",
        }
        with pytest.raises(GraphFailed, match="step b failed"):
            handle.results(timeout=5)
        broken.clear()
        assert app.backend.poison.replay(None) == 1
        results = handle.results(timeout=30)
    assert results == {"a": "a", "b": "b", "c": "c", "x": "x", "y": "y"}
    assert runs.names() == Counter(a=1, b=2, c=1, x=1, y=1)
    assert handle.status().steps[1].state == "succeeded"


def test_with_failure_continue_independent_branches_finish(app: App) -> None:
    runs = Runs()
    broken = threading.Event()
    broken.set()

    @app.task
    def step(name: str) -> str:
        runs.add(name)
        return name

    @app.task
    def flaky() -> str:
        if broken.is_set():
            raise RuntimeError("broken")
        runs.add("b")
        return "b"

    handle = handle_of(
        app.enqueue(
            graph(
                {
                    "a": step.si("a"),
                    "b": after("a", flaky.si()),
                    "c": after("b", step.si("c")),
                    "x": after("a", step.si("x")),
                    "y": after("x", step.si("y")),
                },
                failure="continue",
            )
        )
    )
    with running(app, concurrency=2):
        view = handle.wait(timeout=30)
        states = {s.name: s.state for s in view.steps}
        assert states == {
            "a": "succeeded",
            "b": "failed",
            "c": "waiting",
            "x": "succeeded",
            "y": "succeeded",
        }
        broken.clear()
        app.backend.poison.replay(None)
        assert handle.results(timeout=30)["c"] == "c"
    assert runs.names() == Counter(a=1, b=1, c=1, x=1, y=1)


def test_cancel_by_key_cancels_every_step_not_run_and_none_comes_back(app: App) -> None:
    runs = Runs()
    release = threading.Event()
    started = threading.Event()

    @app.task
    def first() -> int:
        started.set()
        assert release.wait(20)
        runs.add("first")
        return 1

    @app.task
    def later(name: str) -> None:
        runs.add(name)

    spec = graph(
        {
            "a": first.si(),
            "b": after("a", later.si("b")),
            "c": after("a", later.si("c")),
            "d": after(["b", "c"], later.si("d")),
        },
        key="nightly-etl",
    )
    handle = handle_of(app.enqueue(spec))
    with pytest.raises(KeyConflict):
        app.enqueue(spec)  # the key is held while the graph runs
    with running(app, concurrency=2):
        assert started.wait(20)
        assert app.cancel(key="nightly-etl")
        release.set()
        wait_for(lambda: "first" in runs.names())
        wait_for(lambda: handle.status().state == "cancelled")
        view = handle.status()
        assert [s.state for s in view.steps[1:]] == ["cancelled"] * 3
        assert app.get(key="nightly-etl") is None, "the key is free again"
        again = handle_of(app.enqueue(graph({"z": later.si("z")}, key="nightly-etl")))
        again.wait(timeout=30)
    assert runs.names() == Counter(first=1, z=1), "no step after a cancel runs"
    assert app.get(key="nightly-etl") is None, "a graph that completes lets go of its key"


def test_a_graph_with_a_key_lets_it_go_when_it_completes(app: App) -> None:
    @app.task
    def step() -> None:
        return None

    handle = handle_of(app.enqueue(graph({"a": step.si(), "b": after("a", step.si())}, key="k")))
    assert app.get(key="k") is not None
    with running(app):
        handle.wait(timeout=30)
        wait_for(lambda: app.get(key="k") is None)


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ({"a": "after:b", "b": "after:a"}, "cycle"),
        ({"a": "after:zz"}, "which is no step"),
        ({"a": "s"}, "no parents whose results"),
        ({"a b": "si"}, "step name"),
        ({}, "at least one step"),
    ],
)
def test_a_bad_graph_is_one_clear_error_and_stores_nothing(
    sqlite_app: App, steps: dict[str, str], message: str
) -> None:
    app = sqlite_app

    @app.task
    def step(x: Any = None) -> None:
        return None

    with pytest.raises(InvalidMessage, match=message):
        made = {
            name: (
                after(how.split(":")[1], step.si())
                if how.startswith("after")
                else step.s()
                if how == "s"
                else step.si()
            )
            for name, how in steps.items()
        }
        app.enqueue(graph(made))
    assert app.backend.queues.stats() == [] or all(
        s.ready + s.scheduled == 0 for s in app.backend.queues.stats()
    )


def test_a_step_with_bad_arguments_fails_the_enqueue_and_stores_nothing(sqlite_app: App) -> None:
    app = sqlite_app

    @app.task
    def step(n: int) -> None:
        return None

    with pytest.raises(InvalidMessage, match="step"):
        app.enqueue(graph({"a": step.si(1), "b": after("a", step.si("not a number"))}))  # type: ignore[arg-type]
    assert all(s.ready + s.scheduled == 0 for s in app.backend.queues.stats())


def test_a_step_made_ready_before_the_failure_is_held_until_the_replay(app: App) -> None:
    """a -> b (fails) and a -> x, x in a queue no worker serves yet: x, due when b
    fails, is held when a worker claims it instead of started, and starts once b,
    replayed, succeeded."""
    runs = Runs()
    broken = threading.Event()
    broken.set()

    @app.task
    def step(name: str) -> str:
        runs.add(name)
        return name

    @app.task
    def flaky() -> str:
        if broken.is_set():
            raise RuntimeError("broken")
        runs.add("b")
        return "b"

    handle = handle_of(
        app.enqueue(
            graph(
                {
                    "a": step.si("a"),
                    "b": after("a", flaky.si()),
                    "x": after("a", step.si("x").options(queue="later")),
                }
            )
        )
    )

    def states() -> dict[str, str]:
        return {s.name: s.state for s in handle.status().steps}

    with running(app):
        wait_for(lambda: handle.status().state == "stopped")
    assert states()["x"] == "ready", "woken by a before b failed"
    with running(app, queues=("later",)):
        wait_for(lambda: states()["x"] == "waiting")
    assert "x" not in runs.names(), "a step of a stopped graph does not start"
    broken.clear()
    app.backend.poison.replay(None)
    with running(app, queues=("default", "later")):
        assert handle.results(timeout=30) == {"a": "a", "b": "b", "x": "x"}
    assert runs.names() == Counter(a=1, b=1, x=1)


def test_a_graph_of_200_steps_is_drawn_by_the_cli_and_the_dashboard(
    sqlite_app: App, sqlite_url: str
) -> None:
    app = sqlite_app

    @app.task
    def step(level: int, place: int) -> int:
        return level * 10 + place

    handle = handle_of(app.enqueue(graph(mesh(10, 20, lambda lv, p: step.si(lv, p)))))
    with running(app, concurrency=8):
        handle.wait(timeout=60)
    shown = CliRunner().invoke(cli, ["--backend", sqlite_url, "workflow", "show", handle])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0].startswith(f"graph {handle}: succeeded; 200 steps: 200 succeeded")
    assert sum(line.strip().startswith("level ") for line in lines) == 20
    assert any(
        line.strip().startswith(f"{mesh_name(19, 9)} <- {mesh_name(18, 0)}, {mesh_name(18, 9)}")
        for line in lines
    )
    page = TestClient(create_dashboard(app)).get("/workflow", params={"id": handle})
    assert page.status_code == 200
    assert page.text.count('<g class="step succeeded"') == 200
    assert page.text.count('class="edge"') == 19 * 10 * 2
