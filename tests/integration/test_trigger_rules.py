"""Trigger rules in graphs (issue 51, 3): a step after ``rule="all_done"`` runs once its
parents settled whatever they did, one after ``rule="any_failed"`` only when one failed
for good (otherwise it is skipped, and so are the steps after it but an ``all_done``
one, and the graph completes); both take the parents' outcome; the default step after a
failed parent never runs. On every backend, with each graph's final states."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.support.helpers import running, wait_for
from tickwork.errors import InvalidMessage
from tickwork.scheduler import App, RetryPolicy, after, graph
from tickwork.scheduler.workflows.graph_view import GraphFailed, GraphHandle


class Seen:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: dict[str, Any] = {}

    def add(self, name: str, value: Any = None) -> None:
        with self.lock:
            self.runs[name] = value


def _tasks(app: App, seen: Seen) -> dict[str, Any]:
    @app.task(retry=RetryPolicy(retries=0))
    def load(part: str, ok: bool) -> str:
        seen.add(f"load {part}")
        if not ok:
            raise ConnectionError(f"part {part} is unreachable")
        return part

    @app.task
    def cleanup(outcome: dict[str, Any]) -> None:
        seen.add("cleanup", (outcome["succeeded"], outcome["failed"]))

    @app.task
    def alert(outcome: dict[str, Any]) -> None:
        seen.add("alert", [f["error"] for f in outcome["failures"]])

    @app.task
    def report(parts: dict[str, str]) -> None:
        seen.add("report", parts)

    @app.task
    def archive() -> None:
        seen.add("archive")

    @app.task
    def page() -> None:
        seen.add("page")

    @app.task
    def tidy(outcome: dict[str, Any]) -> None:
        seen.add("tidy", outcome["results"])

    @app.task
    def gather(parts: dict[str, Any]) -> None:
        seen.add(f"gather {','.join(sorted(parts))}", parts)

    return {
        "load": load,
        "cleanup": cleanup,
        "alert": alert,
        "report": report,
        "archive": archive,
        "page": page,
        "tidy": tidy,
        "gather": gather,
    }


def _started(app: App, steps: dict[str, Any], **options: Any) -> GraphHandle:
    """The graph of ``steps`` enqueued (``options``: ``failure=`` and the like)."""
    handle = app.enqueue(graph(steps, **options))
    assert isinstance(handle, GraphHandle)
    return handle


def _steps(tasks: dict[str, Any], b_ok: bool) -> dict[str, Any]:
    load, both = tasks["load"], ["a", "b"]
    return {
        "a": load.si("a", True),
        "b": load.si("b", b_ok),
        "cleanup": after(both, tasks["cleanup"].s(), rule="all_done"),
        "alert": after(both, tasks["alert"].s(), rule="any_failed"),
        "report": after(both, tasks["report"].s()),
        "archive": after("cleanup", tasks["archive"].si()),
        "page": after("alert", tasks["page"].si()),  # after the failure handler
    }


def _states(handle: GraphHandle) -> dict[str, str]:
    return {step.name: step.state for step in handle.status().steps}


def test_a_failure_runs_the_finally_and_the_failure_handler_not_the_rest(app: App) -> None:
    seen = Seen()
    tasks = _tasks(app, seen)
    # "continue": a step after the handler runs too (a stopped graph holds the default
    # steps, not the rules' own)
    handle = _started(app, _steps(tasks, b_ok=False), failure="continue")
    with running(app, concurrency=4):
        wait_for(lambda: {"cleanup", "archive", "page"} <= seen.runs.keys(), timeout_s=30)
        wait_for(lambda: _states(handle)["archive"] == _states(handle)["page"], timeout_s=30)
    assert seen.runs["cleanup"] == (1, 1)  # one parent succeeded, one failed
    assert seen.runs["alert"] == ["part b is unreachable"]
    assert "report" not in seen.runs
    assert _states(handle) == {
        "a": "succeeded",
        "b": "failed",
        "cleanup": "succeeded",
        "alert": "succeeded",
        "report": "waiting",
        "archive": "succeeded",
        "page": "succeeded",
    }
    assert handle.status().state == "running"  # report waits for b's replay


def test_without_a_failure_the_handler_is_passed_and_the_graph_completes(app: App) -> None:
    seen = Seen()
    tasks = _tasks(app, seen)
    handle = _started(app, _steps(tasks, b_ok=True))
    with running(app, concurrency=4):
        results = handle.results(timeout=30)
    assert seen.runs["cleanup"] == (2, 0)
    assert seen.runs["report"] == {"a": "a", "b": "b"}
    assert "alert" not in seen.runs and "page" not in seen.runs and "archive" in seen.runs
    assert results["report"] is None and results["alert"] is None
    states = _states(handle)
    assert states["alert"] == states["page"] == "skipped", states
    status = handle.status()
    assert status.state == "succeeded" and "2 skipped" in status.summary


def test_after_a_skipped_handler_a_step_is_skipped_unless_its_rule_is_all_done(app: App) -> None:
    """A step after a skipped handler and a parent still to run is skipped at once (its
    other parent's success later wakes nothing); an ``all_done`` step after the handler
    runs, the handler's result None in its outcome."""
    seen = Seen()
    tasks = _tasks(app, seen)
    load = tasks["load"]
    steps = {
        "a": load.si("a", True),
        "alert": after(["a"], tasks["alert"].s(), rule="any_failed"),
        "slow": after("a", load.si("slow", True)),
        "late": after(["alert", "slow"], tasks["page"].si()),
        "tidy": after(["alert", "a"], tasks["tidy"].s(), rule="all_done"),
    }
    handle = _started(app, steps)
    with running(app, concurrency=4):
        handle.results(timeout=30)
    assert seen.runs.keys() == {"load a", "load slow", "tidy"}
    assert seen.runs["tidy"] == [None, "a"]
    assert _states(handle) == {
        "a": "succeeded",
        "alert": "skipped",
        "slow": "succeeded",
        "late": "skipped",
        "tidy": "succeeded",
    }
    assert handle.status().state == "succeeded"


def test_an_unknown_rule_is_one_clear_error(sqlite_app: App) -> None:
    @sqlite_app.task
    def step() -> None: ...

    with pytest.raises(InvalidMessage, match="rule must be one of all_succeeded, all_done"):
        after("a", step.si(), rule="sometimes")  # type: ignore[arg-type]


def test_none_failed_joins_after_a_skipped_step_and_waits_for_a_failed_ones_replay(
    app: App,
) -> None:
    """``rule="none_failed"``: runs once each parent succeeded or was skipped (taking
    their results by name, None for the skipped); after a parent that failed for good it
    waits, as a default step does, for that parent's replay."""
    seen = Seen()
    tasks = _tasks(app, seen)
    load, gather = tasks["load"], tasks["gather"]
    steps = {
        "a": load.si("a", True),
        "alert": after(["a"], tasks["alert"].s(), rule="any_failed"),  # skipped
        "join": after(["alert", "a"], gather.s(), rule="none_failed"),
        "bad": load.si("bad", False),
        "after_bad": after(["bad", "a"], gather.s(), rule="none_failed"),
    }
    handle = _started(app, steps, failure="continue")
    with running(app, concurrency=4):
        wait_for(lambda: "gather a,alert" in seen.runs, timeout_s=30)
        # the poison record is written after the failure's fan-in and any wake it makes
        wait_for(lambda: any(p.task == load.name for p in app.poison.list()), timeout_s=30)
    assert seen.runs["gather a,alert"] == {"a": "a", "alert": None}
    assert "gather a,bad" not in seen.runs
    assert _states(handle) == {
        "a": "succeeded",
        "alert": "skipped",
        "join": "succeeded",
        "bad": "failed",
        "after_bad": "waiting",
    }


def test_a_stopped_graph_with_a_skipped_step_is_seen_settled(app: App) -> None:
    """A skipped step is done: a graph stopped by a failure beside it settles (its
    ``wait`` returns, ``results`` raises), rather than waiting as if it still moved."""
    seen = Seen()
    tasks = _tasks(app, seen)
    load = tasks["load"]
    steps = {
        "a": load.si("a", True),
        "alert": after(["a"], tasks["alert"].s(), rule="any_failed"),  # skipped
        "bad": after("a", load.si("bad", False)),
    }
    handle = _started(app, steps)
    with running(app, concurrency=4):
        view = handle.wait(timeout=30)
    assert view.state == "stopped"
    assert _states(handle) == {"a": "succeeded", "alert": "skipped", "bad": "failed"}
    with pytest.raises(GraphFailed, match="step bad failed"):
        handle.results(timeout=5)
