"""Wake-ups by LISTEN/NOTIFY on PostgreSQL: a committed write that makes messages due
wakes the listeners of their queue (a rolled-back one does not); a listener whose
connection the server drops reconnects and wakes every queue it watches; a worker idle in
a long poll runs a new message at once."""

from __future__ import annotations

import queue as queues
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from tests.support.backends import backend_url
from tests.support.helpers import wait_for
from tickwork.scheduler import App
from tickwork.workers.config import WorkerConfig
from tickwork.workers.worker import Worker


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    application = App(backend_url("postgres", tmp_path))
    yield application
    application.close()


def _listeners(app: App) -> int:
    """The server's sessions whose last statement was a ``LISTEN``."""
    store = app.backend.store  # type: ignore[attr-defined]
    sql = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%%'"
    return int(store.write(lambda db: db.execute(sql).fetchone()[0]))


def _woken(app: App, watched: list[str]) -> tuple[queues.Queue[str], Callable[[], None]]:
    heard: queues.Queue[str] = queues.Queue()
    before = _listeners(app)
    stop = app.backend.listen(watched, heard.put)
    assert stop is not None
    wait_for(lambda: _listeners(app) > before)  # its LISTEN has reached the server
    return heard, stop


def test_a_commit_wakes_the_queue_and_a_rollback_does_not(app: App) -> None:
    @app.task(queue="mail")
    def send(n: int) -> None:
        pass

    heard, stop = _woken(app, ["mail"])
    try:
        with psycopg.connect(app.settings.backend.split("?")[0]) as conn:
            with app.transaction(conn):
                send.delay(1)
            conn.rollback()
            with pytest.raises(queues.Empty):
                heard.get(timeout=1.0)
            send.schedule((2,), delay=timedelta(hours=1), connection=conn)
            conn.commit()
            with pytest.raises(queues.Empty):  # due in an hour: nothing to wake for
                heard.get(timeout=1.0)
        send.delay(3)
        assert heard.get(timeout=5) == "mail"
    finally:
        stop()


def test_a_dropped_listener_reconnects_and_looks_at_every_queue(app: App) -> None:
    heard, stop = _woken(app, ["a", "b"])
    try:
        store = app.backend.store  # type: ignore[attr-defined]
        store.write(
            lambda db: db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE query LIKE 'LISTEN%%' AND pid != pg_backend_pid()"
            )
        )
        assert {heard.get(timeout=10), heard.get(timeout=10)} == {"a", "b"}
    finally:
        stop()


def test_an_idle_worker_runs_a_new_message_before_its_next_poll(app: App) -> None:
    ran = threading.Event()

    @app.task
    def ping() -> None:
        ran.set()

    worker = Worker(app, WorkerConfig(poll_interval_s=30, lookahead_ms=0))
    worker.start()
    try:
        # empty polls back off from 10 ms, doubling: after the 10th the consumer sleeps
        # 5.12 s, well past the wait below (without a notification it would not claim)
        wait_for(lambda: worker.stats.empty_polls >= 10, timeout_s=30)
        ping.delay()
        assert ran.wait(3), "the notification woke the worker"
    finally:
        worker.stop()
        worker.join(10)
