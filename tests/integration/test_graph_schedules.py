"""Graphs on a trigger, on every backend: each occurrence starts a run of the graph
(named by the occurrence: never started twice), skipped while the run before it still
goes on; the key reads the live run and cancels the schedule with it; bad scheduled
graphs are one clear error and store nothing."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, InvalidMessage, after, graph
from tickwork.scheduler.schedules.ledger import RunOutcome
from tickwork.scheduler.workflows.graph_view import GraphHandle
from tickwork.triggers import Repeating, RunOnce


class Seen:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.names: list[str] = []
        self.now, self.most = 0, 0

    def add(self, name: str) -> None:
        with self.lock:
            self.names.append(name)

    def count(self, name: str) -> int:
        with self.lock:
            return self.names.count(name)


def test_each_occurrence_runs_the_graph_and_cancel_ends_it(app: App) -> None:
    seen = Seen()

    @app.task
    def extract() -> int:
        seen.add("extract")
        return 1

    @app.task
    def load(extracted: int) -> None:
        assert extracted == 1
        seen.add("load")

    @app.task
    def sentinel() -> None:
        seen.add("sentinel")

    every = Repeating(interval=timedelta(milliseconds=400))
    handle = app.enqueue(
        graph(
            {"extract": extract.si(), "load": after("extract", load.s())},
            key="nightly",
            trigger=every,
        )
    )
    assert app.get(key="nightly") is not None
    with running(app, concurrency=4):
        wait_for(lambda: seen.count("load") >= 3, timeout_s=40)
        view = app.batches.workflow(key="nightly")
        assert view.kind == "graph" and [s.name for s in view.steps] == ["extract", "load"]
        assert isinstance(handle, GraphHandle)  # it follows the schedule's live run
        assert handle.status().kind == "graph"
        assert app.cancel(key="nightly")
        assert app.get(key="nightly") is None
        started = seen.count("extract")  # one run claimed before the cancel may still start
        # a sentinel due after five more occurrences would have been: once it ran, they
        # would have too (the queue is claimed in due order)
        sentinel.schedule(delay=timedelta(seconds=2))
        wait_for(lambda: seen.count("sentinel") == 1, timeout_s=60)
    assert seen.count("extract") <= started + 1, "no run starts after the cancel"
    assert seen.count("load") <= seen.count("extract")


def test_an_occurrence_is_skipped_while_the_run_before_goes_on(app: App) -> None:
    seen = Seen()

    @app.task
    def slow() -> None:
        with seen.lock:
            seen.now += 1
            seen.most = max(seen.most, seen.now)
        time.sleep(1.0)
        with seen.lock:
            seen.now -= 1
        seen.add("slow")

    @app.task
    def done() -> None:
        seen.add("done")

    every = Repeating(interval=timedelta(milliseconds=250))
    app.enqueue(
        graph({"slow": slow.si(), "done": after("slow", done.si())}, key="etl", trigger=every)
    )
    with running(app, concurrency=4):
        wait_for(lambda: seen.count("done") >= 2, timeout_s=40)
        app.cancel(key="etl")
    assert seen.most == 1, "one run of the graph at a time"
    skipped = [h for h in app.schedules.history("etl") if h.outcome is RunOutcome.SKIPPED_OVERLAP]
    assert skipped and "still going" in (skipped[0].note or "")


def test_bad_scheduled_graphs_are_one_clear_error(sqlite_app: App) -> None:
    app = sqlite_app

    @app.task
    def step(n: int) -> None:
        return None

    every = Repeating(interval=timedelta(hours=1))
    with pytest.raises(InvalidMessage, match="needs a key"):
        graph({"a": step.si(1)}, trigger=every)
    with pytest.raises(InvalidMessage, match="must repeat"):
        app.enqueue(
            graph(
                {"a": step.si(1)},
                key="once",
                trigger=RunOnce(at=datetime.now(UTC) + timedelta(hours=1)),
            )
        )
    with pytest.raises(InvalidMessage):
        app.enqueue(graph({"a": step.si("x")}, key="bad", trigger=every))  # type: ignore[arg-type]
    assert app.get(key="once") is None and app.get(key="bad") is None
