"""Concurrency limits end to end, on every backend: at most N runs per limit key across
workers, waiting is not an attempt, shared named limits, and bad limit keys refused."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, ConcurrencyLimit, InvalidMessage
from tickwork.scheduler.backends import Envelope


class Gauge:
    """Counts runs in progress per limit key and remembers the most seen at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.done: list[tuple[str, int]] = []

    def run(self, key: str, n: int, hold_s: float) -> None:
        with self.lock:
            self.now[key] += 1
            self.most[key] = max(self.most[key], self.now[key])
        time.sleep(hold_s)
        with self.lock:
            self.now[key] -= 1
            self.done.append((key, n))


def test_at_most_n_run_at_once_per_key_across_two_workers(app: App) -> None:
    gauge = Gauge()
    attempts: list[int] = []

    @app.task(concurrency_limit=2, limit_key="customer")
    def sync_customer(customer: str, n: int) -> None:
        from tickwork.scheduler import current_run

        attempts.append(current_run().attempt)
        gauge.run(customer, n, 0.15)

    for n in range(8):
        for customer in ("acme", "globex"):
            sync_customer.delay(customer, n)
    with running(app, concurrency=8) as first, running(app, concurrency=8) as second:
        wait_for(lambda: len(gauge.done) == 16, timeout_s=60)
        waited = first.stats.limited + second.stats.limited
    assert gauge.most == {"acme": 2, "globex": 2}, "two per customer, and no more"
    assert sorted(gauge.done) == sorted((c, n) for n in range(8) for c in ("acme", "globex"))
    assert set(attempts) == {1}, "waiting for a slot is not an attempt"
    assert waited > 0, "work over the limit went back to wait"
    usage = app.backend.limits.usage(["tests.integration.test_limits.sync_customer:acme"])
    assert usage == {"tests.integration.test_limits.sync_customer:acme": (0, 0)}


def test_a_named_limit_is_shared_by_the_tasks_that_use_it(app: App) -> None:
    gauge = Gauge()
    crm = ConcurrencyLimit(name="crm", capacity=1)

    @app.task(concurrency_limit=crm)
    def push(n: int) -> None:
        gauge.run("crm", n, 0.05)

    @app.task(concurrency_limit=crm)
    def pull(n: int) -> None:
        gauge.run("crm", n, 0.05)

    for n in range(4):
        push.delay(n)
        pull.delay(10 + n)
    with running(app, concurrency=8):
        wait_for(lambda: len(gauge.done) == 8, timeout_s=60)
    assert gauge.most == {"crm": 1}


def test_a_claimed_slot_of_a_message_that_cannot_run_is_given_back(app: App) -> None:
    @app.task(concurrency_limit=1, limit_key="customer", queue="slots")
    def report(customer: str) -> None: ...

    limit = f"{report.name}:acme"
    now = app.backend.now_ms()
    garbage = Envelope("garbage", "slots", None, 0, now, 60_000, b"not a message", limit=limit)
    unknown = app.build(report.call("acme"))[1]
    unknown = unknown._replace(body=unknown.body.replace(report.name.encode(), b"nobody.here"))
    app.backend.messages.enqueue([garbage, unknown])
    with running(app, queues=("slots",), unknown_task_grace_s=10.0) as worker:
        # the unknown task waits for a worker that knows it: given back with its slot
        wait_for(lambda: worker.stats.deferred >= 2, timeout_s=30)
        wait_for(lambda: app.backend.limits.usage([limit]) == {limit: (0, 0)}, timeout_s=10)
    with running(app, queues=("slots",), unknown_task_grace_s=0.0):
        wait_for(lambda: len(app.backend.poison.list("slots")) == 2, timeout_s=30)
        # the slots go back after the claim round that poisoned their messages
        wait_for(lambda: app.backend.limits.usage([limit]) == {limit: (0, 0)}, timeout_s=10)


def test_a_limited_message_stored_without_its_limit_key_outside_the_body_is_limited(
    app: App,
) -> None:
    """As stored by a tickwork before records carried the limit key (the body has it):
    the worker takes its slot itself."""
    gauge = Gauge()

    @app.task(concurrency_limit=1, limit_key="customer", queue="old")
    def legacy(customer: str, n: int) -> None:
        gauge.run(customer, n, 0.05)

    envelopes = [app.build(legacy.call("acme", n))[1]._replace(limit=None) for n in range(4)]
    app.backend.messages.enqueue(envelopes)
    with running(app, queues=("old",), concurrency=4):
        wait_for(lambda: len(gauge.done) == 4, timeout_s=30)
    assert gauge.most == {"acme": 1}


def test_a_limit_key_function_and_a_recurring_limited_chain(sqlite_app: App) -> None:
    from datetime import timedelta

    from tickwork.triggers import Repeating

    gauge = Gauge()

    @sqlite_app.task(concurrency_limit=1, limit_key=lambda order, **_: order["tenant"])
    def ship(order: dict[str, str]) -> None:
        gauge.run(order["tenant"], 0, 0.02)

    every = Repeating(interval=timedelta(milliseconds=50))
    ship.schedule([{"tenant": "t1"}], trigger=every, key="s")
    for _ in range(3):
        ship.delay({"tenant": "t1"})
    stored = sqlite_app.get(key="s")
    assert stored is not None and stored.message.limit == "tests.integration.test_limits.ship:t1"
    with running(sqlite_app, concurrency=4):
        wait_for(lambda: len(gauge.done) >= 6, timeout_s=30)
    assert gauge.most == {"t1": 1}
    nxt = sqlite_app.get(key="s")
    assert nxt is not None and nxt.message.limit == stored.message.limit, "the chain keeps it"


def test_bad_limit_keys_are_one_clear_error_and_store_nothing(sqlite_app: App) -> None:
    with pytest.raises(InvalidMessage, match="not one of its parameters"):

        @sqlite_app.task(concurrency_limit=2, limit_key="tenant")
        def wrong(customer: str) -> None: ...

    with pytest.raises(InvalidMessage, match="no concurrency_limit"):

        @sqlite_app.task(limit_key="customer")
        def unlimited(customer: str) -> None: ...

    def broken(customer: str) -> str:
        raise KeyError("region")

    @sqlite_app.task(concurrency_limit=2, limit_key=broken)
    def fragile(customer: str) -> None: ...

    with pytest.raises(InvalidMessage, match=r"limit_key function of task .* failed: KeyError"):
        fragile.delay("acme")
    with pytest.raises(InvalidMessage, match="string or a number"):

        @sqlite_app.task(concurrency_limit=2, limit_key=lambda customer: None)
        def nothing(customer: str) -> None: ...

        nothing.delay("acme")
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        ConcurrencyLimit(name="crm", capacity=0)
    assert sqlite_app.backend.queues.stats("default")[0].ready == 0, "nothing was stored"


def test_a_worker_names_only_unambiguous_limits_for_its_claims(sqlite_app: App) -> None:
    """The limits whose slots a claim may take: not one name given two capacities, nor
    names one of which, with a ``:VALUE``, reads as the other's key."""
    from tickwork.workers.admission.limits import claim_capacities

    shared = ConcurrencyLimit(name="crm", capacity=3)
    for name, limit in [
        ("a", shared),
        ("b", shared),
        ("c", ConcurrencyLimit(name="mail", capacity=1)),
        ("d", ConcurrencyLimit(name="mail", capacity=2)),
        ("e", ConcurrencyLimit(name="api", capacity=4)),
        ("f", ConcurrencyLimit(name="api:eu", capacity=5)),
        ("g", ConcurrencyLimit(name="pdf", capacity=2)),
    ]:
        sqlite_app.task(name=name, concurrency_limit=limit)(lambda: None)
    assert claim_capacities(sqlite_app) == {"crm": 3, "pdf": 2}
