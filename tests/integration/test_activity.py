"""The activity log on real backends: workers write what they did per queue, a reader
adds it up per minute (``app.queues.activity``), and the dashboard draws it. Two workers write
to the same log; what one of them wrote stays after it stopped."""

from __future__ import annotations

from datetime import timedelta

from starlette.testclient import TestClient

from tests.support.helpers import running, wait_for
from tickwork.dashboard import create_dashboard
from tickwork.scheduler import App, RetryPolicy
from tickwork.scheduler.backends import LedgerEntry
from tickwork.scheduler.views.activity import ACTIVITY_SUBJECT, Minute


def test_workers_log_what_they_did_and_the_overview_draws_it(pair_app: App) -> None:
    app = pair_app

    @app.task
    def work(n: int) -> int:
        return n

    @app.task(queue="slow", retry=RetryPolicy(retries=0))
    def fail(n: int) -> None:
        raise ValueError(n)

    for n in range(30):
        work.delay(n)
    for n in range(4):
        fail.delay(n)
    work.schedule((99,), delay=timedelta(milliseconds=300))  # due later: starts on time
    both = {"activity_interval_s": 0.2, "queues": ["default", "slow"]}
    with running(app, **both), running(app, **both):
        wait_for(lambda: len(app.backend.poison.list()) == 4)
        wait_for(lambda: sum(m.counts["succeeded"] for m in app.queues.activity(5).total) == 31, 10)
    activity = app.queues.activity(5)

    def added(minutes: list[Minute], name: str) -> int:
        return sum(m.counts[name] for m in minutes)

    assert added(activity.total, "succeeded") == 31 and added(activity.total, "poisoned") == 4
    assert added(activity.total, "claimed") == 35
    assert sum(m.finished for m in activity.queues["slow"]) == 4
    assert sum(m.failed for m in activity.queues["default"]) == 0
    assert len(activity.total) == 5 and all(m.finished == 0 for m in activity.total[:-2])
    # every run that started was measured once for lateness, in the minute it was logged
    assert sum(sum(m.lateness) for m in activity.total) == 35
    assert all(m.lateness_quantile(0.5) is not None for m in activity.total if m.finished)
    # the log stays after the workers stopped; an unreadable record is skipped
    app.backend.ledger.append([LedgerEntry("default", ACTIVITY_SUBJECT, (b"garbage",), 99, 60_000)])
    again = app.queues.activity(5, "default")
    assert sum(m.counts["succeeded"] for m in again.total) == 31

    client = TestClient(create_dashboard(app))
    page = client.get("/")
    assert 'id="throughput-chart"' in page.text and 'id="lateness-chart"' in page.text
    assert "35 runs finished, 4 failed" in page.text
    slow = client.get("/", params={"chart": "slow"})
    assert "4 runs finished, 4 failed" in slow.text and 'data-failed="4"' in slow.text


def test_a_worker_with_the_log_off_writes_nothing(sqlite_app: App) -> None:
    app = sqlite_app

    @app.task
    def work() -> None: ...

    work.delay()
    with running(app, activity_interval_s=0):
        wait_for(lambda: app.backend.queues.stats("default")[0].counters.get("acked") == 1)
    assert app.backend.ledger.read("default", ACTIVITY_SUBJECT) == []
    assert all(m.finished == 0 for m in app.queues.activity(5).total)
