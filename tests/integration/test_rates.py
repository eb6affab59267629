"""Rate limits end to end, on every backend: at most N starts per period per limit key
across workers, on the backend's clock; waiting is not an attempt; a rate and a
concurrency limit together; bad rates refused."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, InvalidMessage, RateLimit


def _most_in_any_window(starts: list[int], period_ms: int) -> int:
    """The most starts that fall in one window of ``period_ms`` (sliding)."""
    starts = sorted(starts)
    return max(
        (sum(1 for t in starts[i:] if t < start + period_ms) for i, start in enumerate(starts)),
        default=0,
    )


def test_at_most_n_starts_per_period_per_key_across_two_workers(app: App) -> None:
    lock = threading.Lock()
    starts: dict[str, list[int]] = {"acme": [], "globex": []}
    attempts: list[int] = []

    @app.task(rate_limit="3/2s", limit_key="customer")
    def call_api(customer: str, n: int) -> None:
        from tickwork.scheduler import current_run

        with lock:
            starts[customer].append(app.backend.now_ms())
            attempts.append(current_run().attempt)

    for n in range(7):
        for customer in ("acme", "globex"):
            call_api.delay(customer, n)
    with running(app, concurrency=4) as first, running(app, concurrency=4) as second:
        wait_for(lambda: sum(map(len, starts.values())) == 14, timeout_s=60)
        deferred = first.stats.rate_limited + second.stats.rate_limited
    for customer, times in starts.items():
        # a start is read on the backend's clock after its grant reached the worker (a
        # round trip later: a Paxos round trip on Cassandra), so the window allows for it
        assert _most_in_any_window(times, 1500) <= 3, (customer, times)
        assert max(times) - min(times) >= 3500, "seven starts at three per 2 s take 4 s"
    assert set(attempts) == {1}, "waiting for a start is not an attempt"
    assert deferred >= 8, "work over the rate went back to wait for its start"
    name = "tests.integration.test_rates.call_api:acme"
    started, ahead = app.backend.rates.usage([name], 2000)[name]
    assert ahead == 0 and started <= 3


def test_a_named_rate_is_shared_and_works_with_a_concurrency_limit(sqlite_app: App) -> None:
    starts: list[int] = []
    api = RateLimit(name="api", count=2, period=timedelta(milliseconds=500))

    @sqlite_app.task(rate_limit=api, concurrency_limit=1)
    def push(n: int) -> None:
        starts.append(sqlite_app.backend.now_ms())

    @sqlite_app.task(rate_limit=api)
    def pull(n: int) -> None:
        starts.append(sqlite_app.backend.now_ms())

    for n in range(4):
        push.delay(n)
        pull.delay(n)
    stored = sqlite_app.get(id=push.delay(9))
    assert stored is not None and stored.message.rate == "api"
    assert stored.message.limit == "tests.integration.test_rates.push"
    with running(sqlite_app, concurrency=4):
        wait_for(lambda: len(starts) == 9, timeout_s=30)
    assert _most_in_any_window(starts, 400) <= 2, starts


def test_bad_rates_are_one_clear_error_and_store_nothing(sqlite_app: App) -> None:
    for text in ("100", "0/m", "5/fortnight", "x/s", "3/0s", "100001/s"):
        with pytest.raises(InvalidMessage, match="rate_limit"):

            @sqlite_app.task(rate_limit=text, name=f"bad-{text}")
            def bad() -> None: ...

    with pytest.raises(InvalidMessage, match="no concurrency_limit or rate_limit"):

        @sqlite_app.task(limit_key="customer")
        def unlimited(customer: str) -> None: ...

    @sqlite_app.task(rate_limit="10/30s", limit_key="customer")
    def spaced(customer: str) -> None: ...

    assert spaced.options.rate_limit == RateLimit(
        name="tests.integration.test_rates.spaced", count=10, period=timedelta(seconds=30)
    )
    with pytest.raises(InvalidMessage, match="customer: Field required"):
        spaced.delay()  # type: ignore[call-arg]
    assert sqlite_app.backend.queues.stats("default")[0].ready == 0, "nothing was stored"


def test_a_burst_worker_waits_for_the_starts_it_sent_work_back_to_wait_for(
    sqlite_app: App,
) -> None:
    from tickwork.workers import Worker, WorkerConfig

    ran: list[int] = []

    @sqlite_app.task(rate_limit="2/s")
    def ping(n: int) -> None:
        ran.append(n)

    for n in range(5):
        ping.delay(n)
    worker = Worker(sqlite_app, WorkerConfig(burst=True, poll_interval_s=0.05))
    stats = worker.run(duration_s=30)
    assert sorted(ran) == [0, 1, 2, 3, 4], "burst stopped before the work it deferred ran"
    assert stats.rate_limited == 3
