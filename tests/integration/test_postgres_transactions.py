"""Transactional enqueue on PostgreSQL: what a producer writes through the caller's own
connection is visible to workers only when that transaction commits, and a rollback
leaves nothing (nor undoes anything: a cancel rolled back leaves the message scheduled).
Every check reads through a second, independent client, as a worker would."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from tests.support.backends import backend_url
from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, Event
from tickwork.scheduler.errors import ConfigurationError, KeyConflict
from tickwork.scheduler.model.shapes import Batch
from tickwork.scheduler.model.tasks import TaskFunction
from tickwork.workers.config import WorkerConfig
from tickwork.workers.worker import Worker


class Boom(Exception):
    pass


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    application = App(backend_url("postgres", tmp_path))
    yield application
    application.close()


@pytest.fixture
def conn(app: App) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """The application's own connection (not autocommit: psycopg's default), with a
    business table of its own (temporary: other tests share the database)."""
    url = app.settings.backend.split("?")[0]
    with psycopg.connect(url) as connection:
        connection.execute("CREATE TEMP TABLE orders (id serial PRIMARY KEY, who text)")
        connection.commit()
        yield connection


def _other_client(app: App) -> App:
    return App(app.settings.backend)


def _register(app: App) -> tuple[TaskFunction[[int], None], list[int]]:
    """The task the tests enqueue, and what its runs saw."""
    seen: list[int] = []

    @app.task
    def confirm(order: int) -> None:
        seen.append(order)

    return confirm, seen


def _run_all(app: App) -> None:
    Worker(app, WorkerConfig(burst=True, poll_interval_s=0.05, lookahead_ms=0)).run()


def test_commit_stores_and_runs_rollback_leaves_nothing(
    app: App, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    confirm, seen = _register(app)
    other = _other_client(app)
    try:
        with app.transaction(conn):
            kept = confirm.delay(1)
        assert other.get(id=kept) is None, "not visible before the commit"
        conn.commit()
        assert other.get(id=kept) is not None
        with app.transaction(conn):
            conn.execute("INSERT INTO orders (who) VALUES ('bob')")
            lost = confirm.delay(2)
        conn.rollback()
        assert other.get(id=lost) is None
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (0,)
        _run_all(app)
        assert seen == [1], "the rolled-back message never runs"
    finally:
        other.close()


def test_an_event_is_emitted_only_if_the_transaction_commits(
    app: App, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    seen: list[object] = []

    @app.task(on_events="order.placed")
    def book(event: Event) -> None:
        seen.append(event.payload)

    conn.execute("INSERT INTO orders (who) VALUES ('ann')")
    app.emit("order.placed", "kept", connection=conn)
    conn.commit()
    conn.execute("INSERT INTO orders (who) VALUES ('bob')")
    app.emit("order.placed", "lost", connection=conn)
    conn.rollback()
    _run_all(app)  # the event's run, then the delivery it wrote
    _run_all(app)
    assert seen == ["kept"]


def test_every_producer_call_takes_the_connection(
    app: App, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    confirm, seen = _register(app)
    app.enqueue_many([confirm.call(n) for n in range(5)], connection=conn)
    confirm.schedule((9,), key="nightly", delay=timedelta(hours=1), connection=conn)
    app.enqueue(Batch((confirm.call(10), confirm.call(11))), connection=conn)
    assert app.backend.queues.stats("default")[0].pending == 0, "nothing outside the transaction"
    conn.rollback()
    assert app.backend.queues.stats("default")[0].pending == 0
    assert app.get(key="nightly") is None
    app.enqueue_many([confirm.call(n) for n in range(5)], connection=conn)
    confirm.schedule((9,), key="nightly", delay=timedelta(hours=1), connection=conn)
    handle = app.batches.enqueue(Batch((confirm.call(10), confirm.call(11))), connection=conn)
    conn.commit()
    assert app.backend.queues.stats("default")[0].pending == 8
    assert app.batches.get(str(handle)).size == 2
    _run_all(app)
    assert sorted(seen) == [0, 1, 2, 3, 4, 10, 11]


def test_a_cancel_rolled_back_leaves_the_message_scheduled(
    app: App, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    confirm, _ = _register(app)
    confirm.schedule((1,), key="reminder", delay=timedelta(hours=1))
    assert app.cancel(key="reminder", connection=conn)
    assert app.get(key="reminder") is not None, "still there until the commit"
    conn.rollback()
    assert app.get(key="reminder") is not None
    assert app.cancel(key="reminder", connection=conn)
    conn.commit()
    assert app.get(key="reminder") is None


def test_an_error_inside_leaves_the_callers_transaction_usable(
    app: App, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    """A refused enqueue (a key taken) rolls back its own savepoint only: the caller's
    earlier work in the transaction stands and can commit."""
    confirm, _ = _register(app)
    confirm.schedule((1,), key="k")
    conn.execute("INSERT INTO orders (who) VALUES ('ada')")
    with pytest.raises(Exception, match="k"):
        confirm.schedule((2,), key="k", connection=conn)
    conn.commit()
    assert conn.execute("SELECT who FROM orders").fetchall() == [("ada",)]


def test_backends_without_transactions_say_so(sqlite_url: str) -> None:
    app = App(sqlite_url)
    try:
        with pytest.raises(ConfigurationError, match=r"caller's transaction.*SQLite"):
            app.transaction(object())
    finally:
        app.close()


def test_only_a_psycopg_connection_is_taken(app: App) -> None:
    with pytest.raises(TypeError, match="psycopg"), app.transaction(object()):
        pass


def test_an_async_connection_carries_adelay_and_aschedule(app: App) -> None:
    """From an asyncio application's own ``AsyncConnection``: written on the loop inside
    its transaction (a key conflict rolls back only its savepoint); a rollback leaves
    nothing; a blocking verb on the loop is one clear error."""
    confirm, seen = _register(app)
    url = app.settings.backend.split("?")[0]

    async def scenario() -> tuple[str, str]:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            with app.transaction(conn):
                lost = await confirm.adelay(1)
            await conn.rollback()
            kept = await confirm.aschedule((2,), key="k", connection=conn)
            with pytest.raises(KeyConflict):
                await confirm.aschedule((3,), key="k", connection=conn)
            assert app.get(id=str(kept)) is None, "not visible before the commit"
            await conn.commit()
            with (
                pytest.raises(ConfigurationError, match="await the asynchronous verbs"),
                app.transaction(conn),
            ):
                app.cancel(key="k")
            return str(lost), str(kept)

    lost, kept = asyncio.run(scenario())
    assert app.get(id=lost) is None
    assert app.get(id=kept) is not None
    _run_all(app)
    assert seen == [2]


def test_an_async_connection_carries_every_producer_verb(app: App) -> None:
    """``aenqueue_many``, a batch and ``acancel`` on an ``AsyncConnection`` run in a thread
    whose statements go to the connection's loop: all of it inside the caller's
    transaction, while the loop goes on serving other coroutines."""
    confirm, seen = _register(app)
    url = app.settings.backend.split("?")[0]
    confirm.schedule((7,), key="reminder", delay=timedelta(hours=1))

    async def ticking(stop: asyncio.Event) -> int:
        ticks = 0
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.001)
        return ticks

    async def verbs(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        await app.aenqueue_many([confirm.call(n) for n in range(5)], connection=conn)
        await app.aenqueue(Batch((confirm.call(10), confirm.call(11))), connection=conn)
        assert await app.acancel(key="reminder", connection=conn)

    async def scenario() -> int:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            await conn.execute("CREATE TEMP TABLE orders (id serial PRIMARY KEY, who text)")
            await conn.execute("INSERT INTO orders (who) VALUES ('ada')")
            stop = asyncio.Event()
            ticker = asyncio.create_task(ticking(stop))
            await verbs(conn)
            stop.set()
            assert app.backend.queues.stats("default")[0].pending == 1, "only the reminder"
            await conn.rollback()
            assert app.get(key="reminder") is not None, "the rolled-back cancel undone"
            await verbs(conn)
            await conn.commit()
            return await ticker

    ticks = asyncio.run(scenario())
    assert ticks > 1, "the loop ran other coroutines while the verbs waited"
    assert app.get(key="reminder") is None
    assert app.backend.queues.stats("default")[0].pending == 7
    _run_all(app)
    assert sorted(seen) == [0, 1, 2, 3, 4, 10, 11]


def test_an_async_connection_is_taken_from_its_loop(app: App) -> None:
    url = app.settings.backend.split("?")[0]

    async def connect() -> psycopg.AsyncConnection[tuple[object, ...]]:
        return await psycopg.AsyncConnection.connect(url)

    conn = asyncio.run(connect())
    try:
        with pytest.raises(ConfigurationError, match="in a coroutine"), app.transaction(conn):
            pass
    finally:
        asyncio.run(conn.close())


def _full_billing_queue(app: App) -> tuple[TaskFunction[[int], None], threading.Event, list[int]]:
    """A queue bounded to 2 holding 2 messages whose runs wait for ``gate``."""
    gate = threading.Event()
    seen: list[int] = []

    @app.task(queue="billing")
    def charge(n: int) -> None:
        gate.wait(30)
        seen.append(n)

    app.queues.configure("billing", max_pending=2)
    charge.delay(0)
    charge.delay(1)
    return charge, gate, seen


def test_a_full_queue_makes_the_transaction_wait_for_room(
    app: App, conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    """A bounded write that finds its queue full inside the caller's transaction writes
    nothing and lets go of the queue's count row, so workers can finish messages and make
    the room it then waits for (holding the row, it would wait out its timeout)."""
    charge, gate, seen = _full_billing_queue(app)
    with running(app, queues=("billing",)):
        threading.Timer(0.5, gate.set).start()
        started = time.monotonic()
        conn.execute("INSERT INTO orders (who) VALUES ('ada')")
        charge.schedule((2,), connection=conn, block_timeout=20)
        assert time.monotonic() - started >= 0.4, "it waited for room"
        conn.commit()
        wait_for(lambda: len(seen) == 3, 20)
    assert sorted(seen) == [0, 1, 2]


def test_an_async_connection_waits_for_room_too(app: App) -> None:
    charge, gate, seen = _full_billing_queue(app)
    url = app.settings.backend.split("?")[0]

    async def scenario() -> float:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            started = time.monotonic()
            asyncio.get_running_loop().call_later(0.5, gate.set)
            await charge.aschedule((2,), connection=conn, block_timeout=20)
            waited = time.monotonic() - started
            await conn.rollback()
            return waited

    with running(app, queues=("billing",)):
        assert asyncio.run(scenario()) >= 0.4, "it waited for room"
        wait_for(lambda: len(seen) == 2, 20)
    assert sorted(seen) == [0, 1], "the rolled-back message never runs"
    assert app.backend.queues.stats("billing")[0].pending == 0
