"""Steering a schedule at run time on every backend: pause and resume (skip, coalesce,
catch up), run one now, and a paused schedule read, replaced and cancelled by its key."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.helpers import running, wait_for
from tickwork.scheduler import (
    App,
    InvalidMessage,
    Message,
    ScheduleNotFound,
    State,
    TaskFunction,
)
from tickwork.scheduler.clock import to_ms
from tickwork.scheduler.ids import identity_chain_id, keyed_chain_id
from tickwork.scheduler.model.message import PAUSED_DUE
from tickwork.scheduler.schedules import control
from tickwork.triggers import Misfire, Repeating
from tickwork.workers import Worker, WorkerConfig

T0 = datetime(2030, 1, 1, tzinfo=UTC)
HOURLY = Repeating(interval=timedelta(hours=1), start=T0)


def hourly_report(app: App) -> TaskFunction[[int], None]:
    @app.task
    def report(customer: int) -> None:
        pass

    report.schedule(args=(7,), trigger=HOURLY, key="report")
    return report


def pause_at(app: App, at: datetime) -> bool:
    return control.pause_schedule(app.backend, app.builder, "default", "report", to_ms(at))


def resume_at(
    app: App, at: datetime, misfire: Misfire, **options: object
) -> control.Resumed | None:
    return control.resume_schedule(
        app.backend,
        app.builder,
        "default",
        "report",
        to_ms(at),
        misfire,
        **options,  # type: ignore[arg-type]
    )


def pending(app: App) -> Message:
    found = app.get(key="report")
    assert found is not None
    return found.message


def test_pause_holds_the_schedule_and_resume_skips_what_fell_in_the_pause(app: App) -> None:
    hourly_report(app)  # first run at T0 (in the future: the grid is anchored there)
    assert pause_at(app, T0 - timedelta(minutes=5))
    assert not pause_at(app, T0), "pausing twice reports it"
    found = app.get(key="report")
    assert found is not None and found.message.paused_at is not None
    assert found.due_at >= PAUSED_DUE, "no worker's clock reaches a paused schedule"
    (info,) = app.schedules.list()
    assert info.paused_at is not None and info.next_run == T0
    resumed = resume_at(app, T0 + timedelta(hours=2, minutes=30), Misfire.SKIP)
    assert resumed == control.Resumed(
        T0 + timedelta(hours=3), 3, 0, first_skipped=T0, last_skipped=T0 + timedelta(hours=2)
    )
    message = pending(app)
    assert message.paused_at is None and message.scheduled_at == T0 + timedelta(hours=3)
    assert message.occurrence == 3 and message.misfires == 3 and message.args == [7]
    got = app.get(key="report")
    assert got is not None and got.due_at == T0 + timedelta(hours=3)
    assert resume_at(app, T0 + timedelta(hours=3), Misfire.SKIP) is None, "not paused"


def test_resume_with_coalesce_runs_once_now(app: App) -> None:
    hourly_report(app)
    pause_at(app, T0 - timedelta(minutes=5))
    now = T0 + timedelta(hours=2, minutes=30)
    resumed = resume_at(app, now, Misfire.COALESCE)
    assert resumed == control.Resumed(now, skipped=0, caught_up=0)
    message = pending(app)
    assert message.scheduled_at == now and message.occurrence == 2 and message.misfires == 2


def test_resume_with_catch_up_enqueues_each_missed_run_once(app: App) -> None:
    hourly_report(app)
    pause_at(app, T0 - timedelta(minutes=5))
    now = T0 + timedelta(hours=4, minutes=30)  # 00:00 .. 04:00: five occurrences missed
    resumed = resume_at(app, now, Misfire.CATCH_UP, limit=3, spacing=timedelta(seconds=10))
    assert resumed == control.Resumed(
        T0 + timedelta(hours=5),
        skipped=2,
        caught_up=3,
        first_skipped=T0 + timedelta(hours=3),
        last_skipped=T0 + timedelta(hours=4),
    )
    stats = app.backend.queues.stats("default")[0]
    assert stats.ready + stats.scheduled == 4  # three one-off runs and the schedule
    chain = keyed_chain_id("default", "report")
    stored = [
        app.backend.messages.get(identity_chain_id("default", f"catch-up\x00{chain}\x00{n}"))
        for n in range(3)
    ]
    runs = [(Message.decode(m.envelope.body), m.envelope.due_ms) for m in stored if m is not None]
    assert [m.scheduled_at for m, _ in runs] == [T0 + timedelta(hours=h) for h in range(3)]
    assert [due - to_ms(now) for _, due in runs] == [0, 10_000, 20_000], "spaced"
    assert all(m.headers["tickwork-origin"] == "catch-up" and m.key is None for m, _ in runs)
    again = resume_at(app, now, Misfire.CATCH_UP, limit=3)
    assert again is None, "resuming twice does nothing: it is no longer paused"
    assert pending(app).misfires == 2


def test_a_paused_schedule_is_read_replaced_and_cancelled_by_its_key(app: App) -> None:
    report = hourly_report(app)
    pause_at(app, T0 - timedelta(minutes=5))
    assert app.preview("report", 2)[0].at == T0, "a paused schedule previews from its place"
    report.schedule(args=(8,), trigger=HOURLY, key="report", on_conflict="replace")
    replaced = pending(app)
    assert replaced.paused_at is None and replaced.args == [8], "replacing unpauses"
    pause_at(app, T0 - timedelta(minutes=5))
    assert app.cancel(key="report")
    assert app.get(key="report") is None


def test_errors_name_the_key(app: App) -> None:
    @app.task
    def once() -> None:
        pass

    with pytest.raises(ScheduleNotFound, match="'missing'"):
        app.schedules.pause("missing")
    with pytest.raises(ScheduleNotFound):
        app.schedules.trigger_now("missing")
    once.schedule(delay=timedelta(hours=1), key="one-off")
    with pytest.raises(InvalidMessage, match="not a recurring schedule"):
        app.schedules.pause("one-off")
    with pytest.raises(ValueError):
        app.schedules.resume("one-off", misfire="sometimes")


def test_trigger_now_runs_once_without_moving_the_grid(app: App) -> None:
    ran: list[tuple[int, str]] = []
    done = threading.Event()

    @app.task
    def report(customer: int) -> None:
        from tickwork.scheduler import current_run

        ran.append((customer, current_run().message_id))
        done.set()

    report.schedule(args=(7,), trigger=HOURLY, key="report")
    app.schedules.pause("report")  # a manual run works while paused, too
    before = pending(app)
    run_id = app.schedules.trigger_now("report")
    worker = Worker(app, WorkerConfig(poll_interval_s=0.05))
    worker.start()
    try:
        assert done.wait(20)
        wait_for(lambda: worker.stats.acked == 1)
    finally:
        worker.stop()
        assert worker.join(30)
    assert ran == [(7, run_id)]
    assert pending(app) == before, "the schedule did not move"


def test_a_paused_schedule_runs_nothing_across_worker_restarts(app: App) -> None:
    """Live: a schedule every 0.2 s, paused; two workers in turn run nothing of it;
    resumed, it runs again, and the occurrences of the pause were skipped, not run."""
    runs: list[int] = []

    @app.task
    def tick() -> None:
        from tickwork.scheduler import current_run

        runs.append(current_run().attempt)

    @app.task
    def sentinel(turn: int) -> None:
        turns.append(turn)

    turns: list[int] = []
    tick.schedule(trigger=Repeating(interval=timedelta(milliseconds=200)), key="tick")
    config = WorkerConfig(poll_interval_s=0.05)
    worker = Worker(app, config)
    worker.start()
    wait_for(lambda: len(runs) >= 2)
    assert app.schedules.pause("tick")
    worker.stop()
    assert worker.join(30)  # a run claimed before the pause has finished
    paused_runs = len(runs)
    for turn in range(2):
        # each worker runs until a sentinel due after three occurrences ran: the queue is
        # claimed in due order, so they would have run before it
        sentinel.schedule(args=(turn,), delay=timedelta(seconds=0.6))
        worker = Worker(app, config)
        worker.start()
        wait_for(lambda: turn in turns)  # noqa: B023 (waited for in the same turn)
        worker.stop()
        assert worker.join(30)
    assert len(runs) == paused_runs, "nothing ran while paused"
    found = app.get(key="tick")
    assert found is not None and found.message.paused_at is not None
    resumed = app.schedules.resume("tick")
    assert resumed is not None and resumed.skipped >= 5
    worker = Worker(app, config)
    worker.start()
    try:
        wait_for(lambda: len(runs) >= paused_runs + 2)
    finally:
        worker.stop()
        assert worker.join(30)
    after = app.get(key="tick")
    assert after is not None and after.message.misfires >= 5
    assert after.state in (State.SCHEDULED, State.READY, State.RUNNING)


# -- last success and the dead man's check ---------------------------------------------------


def test_last_success_is_kept_across_failures_and_checked(app: App) -> None:
    """On every backend: a run that succeeds becomes the chain's last success; a run that
    fails for good (poisoned, the chain goes on) does not replace it."""
    outcomes = {"good": [True, True], "flaky": [True, False, False]}
    lock = threading.Lock()

    @app.task
    def job(name: str) -> None:
        with lock:
            plan = outcomes[name]
            ok = plan.pop(0) if plan else True
        if not ok:
            raise RuntimeError(f"{name} failed")

    every = Repeating(interval=timedelta(milliseconds=300))
    job.schedule(args=("good",), trigger=every, key="good")
    job.schedule(args=("flaky",), trigger=every, key="flaky")
    worker = Worker(app, WorkerConfig(poll_interval_s=0.05))
    worker.start()
    try:
        wait_for(lambda: len(app.backend.poison.list()) >= 2 and worker.stats.acked >= 3)
    finally:
        worker.stop()
        assert worker.join(30)
    infos = {i.key: i for i in app.schedules.list()}
    flaky = infos["flaky"]
    assert flaky.last_success is not None and flaky.last_run is not None
    assert flaky.last_success < flaky.last_run, "the failed runs after it did not replace it"
    failed_at = sorted(r.failed_at_ms for r in app.backend.poison.list())
    assert to_ms(flaky.last_success) < failed_at[0]
    good = infos["good"]
    assert good.last_success is not None and good.last_success == good.last_run


def test_overdue_names_schedules_without_a_recent_success() -> None:
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    hourly = Repeating(interval=timedelta(hours=1), start=t0)

    def info(
        key: str, last_run: datetime | None, last_success: datetime | None
    ) -> control.ScheduleInfo:
        nxt = (last_run or t0) + timedelta(hours=1) if last_run else t0
        return control.ScheduleInfo(
            "q", key, "t", hourly, nxt, last_run, 0, State.SCHEDULED, None, last_success
        )

    infos = [
        info("fine", t0 + timedelta(hours=3), t0 + timedelta(hours=3)),
        info("failing", t0 + timedelta(hours=3), t0 + timedelta(hours=1)),
        info("never-ran", None, None),
        info("never-succeeded", t0 + timedelta(hours=3), None),
    ]
    now = t0 + timedelta(hours=3, minutes=20)
    late = control.overdue(infos, now, timedelta(minutes=10))
    assert {o.schedule.key: o.expected_by for o in late} == {
        "failing": t0 + timedelta(hours=2, minutes=10),
        "never-ran": t0 + timedelta(minutes=10),
        "never-succeeded": t0 + timedelta(hours=3, minutes=10),
    }
    assert control.overdue(infos, now, timedelta(hours=4)) == []
    paused = [control.ScheduleInfo("q", "p", "t", hourly, t0, None, 0, State.SCHEDULED, t0, None)]
    assert control.overdue(paused, now, timedelta(0)) == [], "a paused schedule is not checked"


def test_cancel_by_key_never_misses_a_busy_schedule(app: App) -> None:
    """A schedule acked every few milliseconds (each ack replaces its row by the next
    occurrence's, under the same key) is cancelled by its key each time: a cancel that
    waited on the old row still finds the new one (PostgreSQL's read committed)."""
    runs = [0]

    @app.task
    def tick() -> None:
        runs[0] += 1

    with running(app, concurrency=4):
        for round_ in range(8):
            key = f"busy-{round_}"
            tick.schedule(trigger=Repeating(interval=timedelta(milliseconds=5)), key=key)
            before = runs[0]
            wait_for(
                lambda before=before: runs[0] > before,  # type: ignore[misc]
                timeout_s=60,
                explain=lambda key=key: (  # type: ignore[misc]
                    f"{key}: {runs[0]} runs, the schedule {app.get(key=key)}"
                ),
            )
            assert app.cancel(key=key), f"round {round_}: the cancel missed a live schedule"
            assert app.get(key=key) is None
