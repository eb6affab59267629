"""``tickwork.testing``: an app isolated on a fresh backend and drained in-process, the
assertions on what was enqueued, ``run_task``, and the pytest fixture."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tests.support.backends import backend_url
from tickwork import TaskFailed
from tickwork.scheduler import App, BatchOutcome, InvalidMessage, batch, chain, group
from tickwork.scheduler.clock import ManualClock
from tickwork.testing import IsolateFixture, RunFailedInline, isolated, run_task
from tickwork.triggers import Cron


def _shop() -> tuple[App, dict[str, Any]]:
    """A user's app, as a module would define it: on a URL the tests never touch."""
    app = App("sqlite:////nonexistent-dir/never-opened.db")
    seen: dict[str, Any] = {"steps": [], "called_back": [], "ticks": 0}

    @app.task
    def fetch(n: int) -> int:
        seen["steps"].append("fetch")
        return n * 2

    @app.task
    def add(total: int, extra: int) -> int:
        seen["steps"].append("add")
        return total + extra

    @app.task
    def store(total: int) -> None:
        seen["steps"].append(("store", total))

    @app.task
    def part(n: int) -> int:
        return n

    @app.task
    def summary(outcome: BatchOutcome) -> None:
        seen["called_back"].append(outcome["succeeded"])

    @app.task
    def tick() -> None:
        seen["ticks"] += 1

    @app.task
    def welcome(email: str, plan: str = "free") -> str:
        return f"welcome {email} ({plan})"

    seen["tasks"] = {
        "fetch": fetch,
        "add": add,
        "store": store,
        "part": part,
        "summary": summary,
        "tick": tick,
        "welcome": welcome,
    }
    return app, seen


@pytest.fixture
def shop() -> Iterator[tuple[App, dict[str, Any]]]:
    app, seen = _shop()
    yield app, seen
    app.close()


def test_drain_follows_a_chain_and_a_batch_callback(shop: tuple[App, dict[str, Any]]) -> None:
    app, seen = shop
    tasks = seen["tasks"]
    with isolated(app) as tw:
        app.enqueue(chain(tasks["fetch"].si(4), tasks["add"].s(extra=10), tasks["store"].s()))
        app.enqueue(
            batch(
                group([tasks["part"].call(n) for n in range(3)]), on_complete=tasks["summary"].s()
            )
        )
        done = tw.drain()
        assert seen["steps"] == ["fetch", "add", ("store", 18)], "three steps, in order"
        assert seen["called_back"] == [3], "the callback, once, with the batch's outcome"
        assert done.succeeded == 3 + 3 + 1 and done.of(tasks["store"]) == ["succeeded"]
        assert tw.enqueued() == [], "nothing left"
    assert app.settings.backend == "sqlite:////nonexistent-dir/never-opened.db", "restored"


def test_a_cron_schedule_fires_five_times_as_the_clock_moves(
    shop: tuple[App, dict[str, Any]],
) -> None:
    app, seen = shop
    with isolated(app) as tw:
        seen["tasks"]["tick"].schedule(trigger=Cron("* * * * *"), key="every-minute")
        assert tw.drain().succeeded == 0, "not due yet"
        for _ in range(5):
            tw.drain(advance=timedelta(minutes=1))
        assert seen["ticks"] == 5
        (pending,) = tw.enqueued(seen["tasks"]["tick"])
        assert pending.message.key == "every-minute" and pending.message.occurrence == 5


def test_assertions_name_what_was_enqueued(shop: tuple[App, dict[str, Any]]) -> None:
    app, seen = shop
    welcome = seen["tasks"]["welcome"]
    with isolated(app) as tw:
        welcome.delay("ada@example.com", plan="pro")
        welcome.schedule(args=("bob@example.com",), delay=timedelta(hours=1), key="bob")
        found = tw.assert_enqueued(welcome, args=["ada@example.com"], kwargs={"plan": "pro"})
        assert found.message.kwargs == {"plan": "pro"}
        tw.assert_enqueued(welcome, key="bob")
        tw.refute_enqueued(welcome, args=["eve@example.com"])
        with pytest.raises(AssertionError) as failed:
            tw.assert_enqueued(welcome, args=["eve@example.com"])
        text = str(failed.value)
        assert "expected one message of welcome with args=['eve@example.com']" in text
        assert "found none" in text and "ada@example.com" in text and "key='bob'" in text
        with pytest.raises(AssertionError, match="expected no message of welcome"):
            tw.refute_enqueued(welcome, key="bob")
        tw.drain()  # Ada's runs now; Bob's is due in an hour
        assert [m.message.key for m in tw.enqueued(welcome)] == ["bob"]


def test_run_task_runs_the_way_a_worker_would(shop: tuple[App, dict[str, Any]]) -> None:
    app, seen = shop
    tasks = seen["tasks"]
    assert run_task(tasks["welcome"], "ada@example.com") == "welcome ada@example.com (free)"
    assert run_task(tasks["fetch"], "21") == 42, "coerced as at enqueue"
    with pytest.raises(InvalidMessage):
        run_task(tasks["fetch"], "not a number")

    @app.task
    def broken() -> None:
        raise LookupError("no such customer")

    @app.task
    def unkeepable() -> object:
        return object()

    with pytest.raises(LookupError, match="no such customer"):
        run_task(broken)
    with pytest.raises(TypeError, match="not JSON-encodable"):
        run_task(unkeepable)


def test_the_fixture_isolates_and_restores(
    shop: tuple[App, dict[str, Any]], tickwork_isolated: IsolateFixture
) -> None:
    app, seen = shop
    tw = tickwork_isolated(app)
    seen["tasks"]["welcome"].delay("ada@example.com")
    assert len(tw.enqueued()) == 1
    assert tw.drain().succeeded == 1


def test_the_clock_fixture_is_the_isolated_apps_clock(
    shop: tuple[App, dict[str, Any]],
    tickwork_isolated: IsolateFixture,
    tickwork_clock: ManualClock,
) -> None:
    app, seen = shop
    tw = tickwork_isolated(app)
    assert tw.clock is tickwork_clock and app.clock is tickwork_clock
    seen["tasks"]["tick"].schedule(trigger=Cron("0 * * * *"), key="hourly")
    tickwork_clock.advance(3_600_000)
    assert tw.drain().succeeded == 1 and seen["ticks"] == 1


@pytest.mark.tickwork(mode="inline")
def test_the_marker_chooses_the_mode(
    shop: tuple[App, dict[str, Any]], tickwork_isolated: IsolateFixture
) -> None:
    app, seen = shop
    tw = tickwork_isolated(app)
    assert tw.mode == "inline"
    seen["tasks"]["store"].delay(3)
    assert seen["steps"] == [("store", 3)], "ran at once"
    assert tickwork_isolated(app, mode="manual").mode == "manual", "the call wins"


@pytest.mark.parametrize("server", ["redis", "postgres"])
def test_isolated_on_a_server_backend(
    shop: tuple[App, dict[str, Any]], tmp_path: Any, server: str
) -> None:
    """The same helpers on Redis and on PostgreSQL (their own clock: no ``advance``)."""
    app, seen = shop
    with isolated(app, backend_url(server, tmp_path)) as tw:
        app.enqueue(chain(seen["tasks"]["fetch"].si(1), seen["tasks"]["store"].s()))
        tw.assert_enqueued(seen["tasks"]["fetch"], args=[1])
        assert tw.drain().succeeded == 2 and seen["steps"] == ["fetch", ("store", 2)]
        with pytest.raises(RuntimeError, match="has a clock"):
            tw.advance(timedelta(minutes=1))


def _flaky_app() -> tuple[App, dict[str, Any]]:
    """Tasks whose runs inline mode must treat as a worker would."""
    app = App("sqlite:////nonexistent-dir/never-opened.db")
    seen: dict[str, Any] = {"attempts": 0, "sizes": []}

    @app.task(retries=2, keep_result=True)
    def flaky(fail_times: int) -> str:
        seen["attempts"] += 1
        if seen["attempts"] <= fail_times:
            raise RuntimeError(f"attempt {seen['attempts']} failed")
        return "done"

    @app.task(keep_result=True)
    def returns_an_object() -> Any:
        return object()  # not JSON: a worker cannot keep it

    @app.task
    def size(n: int) -> None:
        seen["sizes"].append(n)

    @app.task
    def fan_out(count: int) -> None:  # a handler that enqueues: run by the same drain
        for n in range(count):
            size.delay(n)

    seen["tasks"] = {"flaky": flaky, "returns_an_object": returns_an_object, "size": size}
    seen["fan_out"] = fan_out
    return app, seen


def test_inline_runs_at_once_through_a_worker_and_follows_retries() -> None:
    app, seen = _flaky_app()
    flaky, size = seen["tasks"]["flaky"], seen["tasks"]["size"]
    with isolated(app, mode="inline") as tw:
        handle = flaky.delay(2)  # fails twice, then succeeds on its last retry
        assert seen["attempts"] == 3 and app.result(str(handle)).value == "done"
        size.delay("7")  # coerced to 7 by the task's signature, as a worker would
        assert seen["sizes"] == [7]
        seen["fan_out"].delay(3)
        assert seen["sizes"] == [7, 0, 1, 2], "what a handler enqueued ran in the same call"
        with tw.manual():
            size.delay(9)
            assert seen["sizes"] == [7, 0, 1, 2], "manual in the block: nothing runs"
            tw.assert_enqueued(size, args=[9])
    app.close()


def test_inline_rejects_what_a_worker_would() -> None:
    app, seen = _flaky_app()
    flaky, returns_an_object = seen["tasks"]["flaky"], seen["tasks"]["returns_an_object"]
    size = seen["tasks"]["size"]
    with isolated(app) as tw, tw.inline():
        with pytest.raises(InvalidMessage):
            size.delay("seven")  # does not validate: nothing is written, nothing runs
        with pytest.raises(RunFailedInline, match="RuntimeError: attempt 3 failed") as failed:
            flaky.delay(5)  # fails three times: retried twice, then poisoned
        assert failed.value.run.attempt == 3 and seen["attempts"] == 3
        assert isinstance(failed.value, TaskFailed), "the one TaskFailed users catch"
        with pytest.raises(RunFailedInline, match="not JSON-encodable"):
            returns_an_object.delay()
        poisoned = {r.envelope.id for r in app.backend.poison.list()}
        assert failed.value.run.message_id in poisoned, "in the poison queue, as on a worker"
    app.close()


def test_inline_from_the_async_producer() -> None:
    app, seen = _flaky_app()
    size = seen["tasks"]["size"]

    async def produce() -> None:
        await size.adelay(4)
        await size.aschedule(("5",))

    with isolated(app, mode="inline"):
        asyncio.run(produce())
    assert seen["sizes"] == [4, 5]
    app.close()


@pytest.mark.asyncio
@pytest.mark.tickwork(mode="inline")
async def test_an_async_test_with_async_tasks(tickwork_isolated: IsolateFixture) -> None:
    """pytest-asyncio: an ``async def`` test enqueues ``async def`` tasks with the async
    producer; inline mode runs them (on the worker's loop) before ``adelay`` returns."""
    app = App("sqlite:////nonexistent-dir/never-opened.db")
    seen: list[int] = []

    @app.task
    async def double(n: int) -> None:
        await asyncio.sleep(0)
        seen.append(2 * n)

    tw = tickwork_isolated(app)
    await double.adelay(21)
    assert seen == [42]
    with tw.manual():
        await double.adelay(1)
        tw.assert_enqueued(double, args=[1])
    assert tw.drain().succeeded == 1 and seen == [42, 2]
    app.close()


def test_a_wait_for_step_times_out_on_the_tests_clock() -> None:
    """A workflow waiting for an event that never comes ends when the test's clock passes
    the wait's timeout (waits, fan-outs and workflow starts read the isolated app's
    clock, not the one the app had when it was made)."""
    from tickwork import App, chain
    from tickwork.events import wait_for

    app = App()
    seen: list[object] = []

    @app.task
    def settle(event: object) -> None:
        seen.append(event)

    with isolated(app) as tw:
        app.enqueue(
            chain(wait_for("payment.settled", timeout=3600, on_timeout="continue"), settle.s())
        )
        tw.drain()
        assert seen == [], "the step waits for its event"
        tw.drain(advance=timedelta(seconds=3700))
        assert seen == [None], "the wait timed out: the next step took None"
