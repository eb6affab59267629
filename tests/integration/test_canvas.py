"""Workflows called as Celery users write them (issue 59): ``.delay()``,
``.apply_async(...)`` and ``(...)()`` on a call, a chain, a group, a batch and a graph,
each returning a handle whose ``result()`` / ``aresult()`` is the workflow's value: the
last step's for a chain, the list for a group or a batch, the results by name for a
graph. On SQLite and Redis."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.backends import backend_url
from tests.support.helpers import running
from tickwork import App, after, batch, chain, graph, group
from tickwork.errors import InvalidMessage, ResultTimeout, TaskFailed, TickworkError
from tickwork.scheduler.model.handles import ChainHandle, RunStatus
from tickwork.scheduler.model.tasks import Call
from tickwork.scheduler.runs.results import succeeded_record


@pytest.fixture(params=["sqlite", "redis"])
def canvas(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[App]:
    application = App(backend_url(request.param, tmp_path))
    yield application
    application.close()


def _tasks(app: App) -> SimpleNamespace:
    @app.task(keep_result=True)
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(keep_result=True)
    def double(x: int) -> int:
        return x * 2

    @app.task(keep_result=True)
    def total(numbers: list[int]) -> int:
        return sum(numbers)

    @app.task(keep_result=True)
    def merge(parts: dict[str, int]) -> int:
        return sum(parts.values())

    @app.task(retries=0)
    def broken(x: int) -> int:
        raise RuntimeError(f"no {x}")

    return SimpleNamespace(add=add, double=double, total=total, merge=merge, broken=broken)


def test_a_chain_delayed_gives_its_last_steps_value(canvas: App) -> None:
    t = _tasks(canvas)
    with running(canvas):
        handle = chain(t.add.si(1, 2), t.double.s(), t.double.s()).delay()
        assert isinstance(handle, ChainHandle)
        assert handle.result(timeout=30) == 12
        assert handle.step(1).id.endswith(".1")
        called = chain(t.add.si(2, 2), t.double.s())()  # Celery's chain(...)()
        assert called.result(timeout=30) == 8
        later = chain(t.add.si(1, 1), t.double.s()).apply_async(countdown=0.2, queue="default")
        assert later.result(timeout=30) == 4
        keyed = chain(t.add.si(5, 5), t.double.s()).apply_async(key="nightly")
        assert keyed.result(timeout=30) == 20
        assert asyncio.run(chain(t.add.si(3, 3), t.double.s()).delay().aresult(timeout=30)) == 12
        stopped = chain(t.add.si(1, 1), t.broken.s(), t.double.s()).delay()
        with pytest.raises(TickworkError, match="stopped before its last step"):
            stopped.result(timeout=30)


def test_a_chain_between_a_steps_result_and_its_ack_is_still_at_that_step(canvas: App) -> None:
    """The settler writes a kept result just before the ack that writes the next step: a
    handle read between the two sees the chain running at the step, not stopped."""
    t = _tasks(canvas)
    handle = chain(t.add.si(1, 2), t.double.s()).delay()
    first = handle.step(0).id
    canvas.backend.results.put([(first, succeeded_record(b"3", 1, 1), 60_000)])
    assert canvas.get(id=first) is not None  # not acked: the next step is not written yet
    assert handle.info().status is RunStatus.RUNNING
    with pytest.raises(ResultTimeout):  # not "stopped before its last step"
        handle.result(timeout=0.3)
    with running(canvas):
        assert handle.result(timeout=30) == 6


def test_a_single_call_delayed_and_applied(canvas: App) -> None:
    t = _tasks(canvas)
    when = datetime.now(UTC) + timedelta(milliseconds=200)
    with running(canvas):
        assert t.add.s(2).delay(5).result(timeout=30) == 7  # partial arguments go first
        assert t.add.si(1, 2).apply_async(eta=when, key="sum").result(timeout=30) == 3
        assert t.double.s().apply_async((21,)).result(timeout=30) == 42
    with pytest.raises(TypeError, match=r"enqueued with \.delay\(\)"):
        t.add.si(1, 2)()


def test_a_group_and_a_batch_give_their_results_in_order(canvas: App) -> None:
    t = _tasks(canvas)
    with running(canvas):
        assert group([t.add.si(i, i) for i in range(4)]).delay().result(timeout=30) == [0, 2, 4, 6]
        assert group([t.double.si(5), t.double.si(6)])().result(timeout=30) == [10, 12]
        done = batch([t.add.si(1, 1), t.add.si(2, 2)], on_success=t.total.s()).apply_async()
        assert done.result(timeout=30) == [2, 4]
        failing = group([t.add.si(1, 1), t.broken.si(3)]).delay()
        with pytest.raises(TickworkError, match="no 3"):
            failing.result(timeout=30)
        assert asyncio.run(group([t.double.si(2)]).delay().aresult(timeout=30)) == [4]


def test_a_graph_gives_its_results_by_name(canvas: App) -> None:
    t = _tasks(canvas)
    with running(canvas):
        handle = graph(
            {
                "a": t.add.si(1, 2),
                "b": t.add.si(3, 4),
                "sum": after(["a", "b"], t.merge.s()),
            }
        ).delay()
        assert handle.result(timeout=30) == {"a": 3, "b": 7, "sum": 10}
        nested = chain(group([t.double.si(1), t.double.si(2)]), t.total.s()).delay()
        results = nested.result(timeout=30)
        assert isinstance(results, dict) and 6 in results.values()


def test_a_call_not_made_by_a_task_says_how_to_enqueue_it(canvas: App) -> None:
    t = _tasks(canvas)
    with pytest.raises(InvalidMessage, match=r"app\.enqueue"):
        Call(t.add.name, (1, 2)).delay()
    with pytest.raises(InvalidMessage, match=r"app\.enqueue"):
        group([Call(t.add.name, (1, 2))]).delay()
    # a call still pickles (a Spark executor gets it) without its app
    copy = pickle.loads(pickle.dumps(t.add.si(1, 2)))
    assert copy == t.add.si(1, 2) and copy.producer is None


def test_failing_results_name_the_step(canvas: App) -> None:
    t = _tasks(canvas)
    keeping = canvas.task(name="keeper", keep_result=True, retries=0)(_raise)
    with running(canvas):
        handle = chain(t.add.si(1, 1), keeping.s()).delay()
        with pytest.raises(TaskFailed, match="RuntimeError: kept 2") as failed:
            handle.result(timeout=30)
        assert failed.value.message_id == handle.step(1).id


def _raise(x: int) -> int:
    raise RuntimeError(f"kept {x}")
