"""The occurrence ledger written by real workers (on every backend for the runs and the
occurrences a late run steps over; the rest, above the contract, on SQLite and a Redis
Cluster): a schedule's runs
(succeeded, retried, poisoned), the occurrences it did not run (skipped by overlap, missed,
in a pause, cancelled), manual runs, one-off messages that asked for history, retention,
and a worker that keeps no history when told so."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, Settings
from tickwork.scheduler.schedules.ledger import NOT_RUN, RunOutcome
from tickwork.triggers import Misfire, Repeating


def outcomes(app: App, key: str) -> list[RunOutcome]:
    return [h.outcome for h in app.schedules.history(key)]


def succeeded(app: App, key: str) -> int:
    return outcomes(app, key).count(RunOutcome.SUCCEEDED)


def test_each_run_of_a_schedule_is_recorded_newest_first(app: App) -> None:
    calls: list[int] = []

    @app.task(retries=1)
    def tick(n: int) -> None:
        calls.append(n)
        if len(calls) == 2:
            raise ValueError("second call fails\nwith a second line")

    start = datetime.now(UTC)
    tick.schedule(args=(1,), trigger=Repeating(interval=timedelta(milliseconds=300)), key="tick")
    with running(app):
        wait_for(lambda: len(calls) >= 5, timeout_s=20)
    app.cancel(key="tick")
    history = app.schedules.history("tick")
    outcomes = [h.outcome for h in reversed(history) if h.outcome not in NOT_RUN]
    assert outcomes[:4] == [
        RunOutcome.SUCCEEDED,
        RunOutcome.RETRIED,
        RunOutcome.SUCCEEDED,
        RunOutcome.SUCCEEDED,
    ], outcomes
    assert history[0].outcome is RunOutcome.CANCELLED
    # the retry's backoff (about a second) makes the next occurrences late: coalesced
    assert {h.outcome for h in history} <= {*outcomes, RunOutcome.COALESCED, RunOutcome.CANCELLED}
    first, retried, after_retry = [h for h in reversed(history) if h.outcome not in NOT_RUN][:3]
    assert first.scheduled_at >= start - timedelta(seconds=1)
    assert first.started_at is not None and first.finished_at is not None
    assert first.lateness is not None and first.lateness >= timedelta(0)
    assert first.attempts == 1 and first.worker is not None and first.origin == "scheduled"
    assert retried.error == "ValueError: second call fails" and retried.attempts == 1
    assert after_retry.attempts == 2 and after_retry.scheduled_at == retried.scheduled_at
    runs = [h for h in history if h.outcome is RunOutcome.SUCCEEDED]
    times = [h.scheduled_at for h in reversed(runs)]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert app.schedules.history("tick", limit=2) == history[:2]
    assert app.schedules.history("other") == []


def test_a_long_run_skips_the_occurrences_that_fall_while_it_runs(app: App) -> None:
    release = threading.Event()
    runs: list[float] = []

    @app.task
    def slow() -> None:
        runs.append(time.monotonic())
        if len(runs) == 1:
            release.wait(10)

    every = Repeating(interval=timedelta(milliseconds=200), misfire=Misfire.COALESCE)
    slow.schedule(trigger=every, key="slow")
    with running(app):
        wait_for(lambda: len(runs) == 1, timeout_s=10)
        time.sleep(1.1)  # five or so occurrences fall while the first run runs
        release.set()
        wait_for(lambda: succeeded(app, "slow") >= 2, timeout_s=10)
    app.cancel(key="slow")
    history = list(reversed(app.schedules.history("slow")))
    first = history[0]
    assert first.outcome is RunOutcome.SUCCEEDED and first.started_at is not None
    # written with the first run's ack: what fell before it started (a slow start) was
    # coalesced, what fell while it ran was skipped by overlap
    after = history[1:3] if history[1].outcome is RunOutcome.COALESCED else history[1:2]
    skipped = after[-1]
    assert skipped.outcome is RunOutcome.SKIPPED_OVERLAP, history
    assert skipped.count >= 3 and skipped.last_at is not None
    assert skipped.scheduled_at >= first.started_at
    if len(after) == 2:
        assert after[0].last_at or after[0].scheduled_at < first.started_at
    assert history[len(after) + 1].outcome is RunOutcome.SUCCEEDED  # the coalesced run


def test_a_failing_schedule_records_each_poisoned_occurrence(pair_app: App) -> None:
    app = pair_app

    @app.task
    def broken() -> None:
        raise RuntimeError("no database")

    broken.schedule(trigger=Repeating(interval=timedelta(milliseconds=250)), key="broken")
    with running(app):
        wait_for(lambda: outcomes(app, "broken").count(RunOutcome.POISONED) >= 2, timeout_s=20)
    app.cancel(key="broken")
    poisoned = [h for h in app.schedules.history("broken") if h.outcome is RunOutcome.POISONED]
    assert len(poisoned) >= 2
    assert all(h.error == "RuntimeError: no database" for h in poisoned)


def test_manual_runs_and_pause_skips_are_recorded(pair_app: App) -> None:
    app = pair_app
    ran = threading.Event()

    @app.task
    def report() -> None:
        ran.set()

    hourly = Repeating(interval=timedelta(hours=1), start=datetime.now(UTC) + timedelta(hours=1))
    report.schedule(trigger=hourly, key="report")
    run_id = app.schedules.trigger_now("report")
    with running(app):
        wait_for(lambda: len(app.schedules.history("report")) == 1, timeout_s=10)
    (manual,) = app.schedules.history("report")
    assert manual.outcome is RunOutcome.SUCCEEDED and manual.origin == "manual"
    assert manual.message_id == run_id
    assert app.schedules.pause("report")
    resumed = app.schedules.resume("report")
    assert resumed is not None and resumed.skipped == 0
    assert len(app.schedules.history("report")) == 1, "nothing fell in the pause: nothing recorded"


def test_a_one_off_task_with_history_records_its_attempts(pair_app: App) -> None:
    app = pair_app
    attempts: list[int] = []

    @app.task(history=True, retries=2)
    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("reset by peer")
        return "ok"

    @app.task
    def plain() -> None:
        pass

    handle = flaky.delay()
    other = plain.delay()
    with running(app):
        wait_for(lambda: len(app.run_history(handle.id)) == 3, timeout_s=30)
        wait_for(lambda: app.get(id=other.id) is None, timeout_s=10)
    history = list(reversed(app.run_history(handle.id)))
    assert [h.outcome for h in history] == [
        RunOutcome.RETRIED,
        RunOutcome.RETRIED,
        RunOutcome.SUCCEEDED,
    ]
    assert [h.attempts for h in history] == [1, 2, 3]
    assert history[0].error == "ConnectionError: reset by peer"
    assert all(h.origin == "one-off" for h in history)
    assert app.run_history(other.id) == [], "a task without history records nothing"


def test_history_keep_bounds_a_ledger_and_zero_turns_it_off(pair_app: App) -> None:
    app = pair_app
    url = app.settings.backend
    bounded = App(settings=Settings.load(backend=url, history_keep=3))
    off = App(settings=Settings.load(backend=url, history_keep=0))
    ran: list[int] = []
    try:
        for each, key in ((bounded, "kept"), (off, "off")):
            ran.clear()

            @each.task(name="tests.history.noop")
            def noop() -> None:
                ran.append(1)

            noop.schedule(trigger=Repeating(interval=timedelta(milliseconds=100)), key=key)
            with running(each):
                wait_for(lambda: len(ran) >= 6)
            each.cancel(key=key)
        assert len(bounded.schedules.history("kept")) == 3, "read: the newest history_keep"
        assert app.schedules.history("kept", limit=3) == bounded.schedules.history("kept")
        if not url.startswith("cassandra"):  # Cassandra drops older rows with their TTL
            assert (
                len(bounded.schedules.history("kept", limit=100)) <= 3 + 1
            )  # Redis: an eighth more
        assert off.schedules.history("off") == [] and app.schedules.history("off") == []
    finally:
        bounded.close()
        off.close()


def test_the_history_of_a_schedule_on_another_queue_is_found_by_its_key(app: App) -> None:
    """``history(key)`` and ``actions(key)`` without ``queue=`` find the queue holding the
    key (they read the default queue only, and answered ``[]``)."""
    ran: list[int] = []

    @app.task(queue="reports")
    def report() -> None:
        ran.append(1)

    report.schedule(trigger=Repeating(interval=timedelta(hours=1)), key="hourly")
    with running(app, queues=("reports",)):
        wait_for(lambda: outcomes(app, "hourly") == [RunOutcome.SUCCEEDED])
    assert app.schedules.pause("hourly", queue="reports", note="quiet hours")
    assert [action.action for action in app.schedules.actions("hourly")] == ["pause"]
    assert app.schedules.history("hourly", queue="default") == [], "the queue, when given"
