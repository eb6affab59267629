"""Fair share end to end: a task's ``fair_key`` lets other keys' messages run while one
key floods the queue, through the app and a worker; bad fair keys are refused at
registration or at enqueue with one clear error; Cassandra refuses fair messages."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support.backends import backend_url
from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, ConfigurationError, InvalidMessage
from tickwork.workers import Worker


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis", "redis-cluster"])
def test_a_flooding_customer_does_not_hold_back_the_others(backend: str, tmp_path: Path) -> None:
    app = App(backend_url(backend, tmp_path))
    ran: list[str] = []
    lock = threading.Lock()

    @app.task(fair_key="customer")
    def sync_report(customer: str, n: int) -> None:
        with lock:
            ran.append(customer)

    try:
        app.enqueue_many([sync_report.call("acme", n) for n in range(300)])
        for customer in ("globex", "initech"):
            for n in range(3):
                sync_report.delay(customer, n)
        with running(app, concurrency=1, batch_size=10, prefetch=10):
            wait_for(lambda: len(ran) == 306, timeout_s=60)
    finally:
        app.close()
    others = [i for i, customer in enumerate(ran) if customer != "acme"]
    assert len(others) == 6
    # in arrival order they would run last (300 to 305); each shard takes turns itself
    assert max(others) < (60 if backend == "redis-cluster" else 30), others


def test_fair_keys_that_cannot_work_are_refused(sqlite_url: str) -> None:
    app = App(sqlite_url)
    with pytest.raises(InvalidMessage, match=r"fair_key 'tenant' of task .* not one of its"):

        @app.task(fair_key="tenant")
        def no_such_parameter(customer: str) -> None: ...

    @app.task(fair_key=lambda customer, n: customer.upper())
    def by_function(customer: str, n: int) -> None: ...

    @app.task(fair_key="customer")
    def by_name(customer: object) -> None: ...

    stored = app.get(id=by_function.delay("acme", 1))
    assert stored is not None and stored.message.fair == "ACME"
    with pytest.raises(InvalidMessage, match=r"fair_key of task .* must give a string or a number"):
        by_name.delay(None)
    assert app.backend.queues.stats()[0].ready == 1, "the refused call wrote nothing"
    app.close()


def test_cassandra_refuses_a_fair_task_at_enqueue(tmp_path: Path) -> None:
    app = App(backend_url("cassandra", tmp_path))

    @app.task(fair_key="customer")
    def report(customer: str) -> None: ...

    try:
        with pytest.raises(InvalidMessage, match="fair share is not offered on Cassandra"):
            report.delay("acme")
        with pytest.raises(ConfigurationError, match=r"task .*report.* needs fair share"):
            Worker(app)  # one clear error as the worker is set up, before it claims
    finally:
        app.close()
