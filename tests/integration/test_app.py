"""The producer API: tasks, validation, keys, bulk enqueue, periodic install, settings."""

from __future__ import annotations

import contextlib
import itertools
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tickwork.scheduler import (
    App,
    Call,
    ConfigurationError,
    InvalidMessage,
    KeyConflict,
    Message,
    Outcome,
    RetryPolicy,
    ScheduleNotFound,
    Settings,
    State,
    UnknownTask,
)
from tickwork.scheduler.clock import ManualClock, to_datetime
from tickwork.triggers import Cron, Misfire, Repeating


@pytest.fixture
def app(sqlite_url: str) -> App:
    application = App(sqlite_url)

    @application.task(queue="default", retries=3, timeout=30)
    def send_report(customer_id: int, fmt: str = "pdf") -> None: ...

    @application.task(name="stamp")
    def stamp(when: datetime, *tags: str, **extra: int) -> None: ...

    return application


def test_task_name_defaults_to_module_and_function(app: App) -> None:
    assert "tests.integration.test_app.send_report" in app.tasks
    assert "stamp" in app.tasks


def test_delay_returns_an_id_and_stores_a_ready_message(app: App) -> None:
    task = app.tasks["tests.integration.test_app.send_report"]
    message_id = task.delay(42)
    found = app.get(id=message_id)
    assert found is not None and found.state is State.READY
    assert found.message.args == [42] and found.message.max_attempts == 4
    assert found.message.timeout_s == 30


def test_bad_arguments_fail_at_once_and_write_nothing(app: App) -> None:
    task = app.tasks["tests.integration.test_app.send_report"]
    with pytest.raises(InvalidMessage, match="customer_id"):
        task.delay("x")
    with pytest.raises(InvalidMessage, match="signature"):
        task.delay(1, 2, 3)
    with pytest.raises(InvalidMessage, match="signature"):
        task.delay(1, colour="red")
    assert app.backend.queues.stats() == []


def test_arguments_are_coerced_and_rebuilt_with_their_types(app: App) -> None:
    task = app.tasks["stamp"]
    when = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    message_id = task.delay(when, "a", "b", weight=3)
    found = app.get(id=message_id)
    assert found is not None
    assert found.message.args == [when.isoformat().replace("+00:00", "Z"), "a", "b"]
    args, kwargs = task.arguments.rebuild(found.message.args, found.message.kwargs)
    assert args == (when, "a", "b") and kwargs == {"weight": 3}


def test_unknown_task_is_refused(app: App) -> None:
    with pytest.raises(UnknownTask):
        app.enqueue(Call("no.such.task"))


def test_non_json_arguments_are_refused(sqlite_url: str) -> None:
    app = App(sqlite_url)

    @app.task
    def anything(value: object) -> None: ...

    with pytest.raises(InvalidMessage, match="JSON"):
        anything.delay(object())


def test_payload_limit(sqlite_url: str) -> None:
    app = App(sqlite_url, settings=Settings(backend=sqlite_url, max_payload_bytes=400))

    @app.task
    def big(text: str) -> None: ...

    big.delay("small")
    with pytest.raises(InvalidMessage, match="limit"):
        big.delay("x" * 1000)


def test_naive_at_is_refused(app: App) -> None:
    task = app.tasks["tests.integration.test_app.send_report"]
    with pytest.raises(InvalidMessage, match="timezone-aware"):
        task.schedule(args=(1,), at=datetime(2030, 1, 1))


def test_schedule_with_key_and_conflicts(app: App) -> None:
    task = app.tasks["tests.integration.test_app.send_report"]
    hourly = Repeating(interval=timedelta(hours=1), repeat_count=5)
    first = task.schedule(args=(42,), trigger=hourly, key="report:42")
    with pytest.raises(KeyConflict):
        task.schedule(args=(43,), trigger=hourly, key="report:42")
    assert task.schedule(args=(44,), key="report:42", on_conflict="ignore") == first
    found = app.get(key="report:42")
    assert found is not None and found.message.args == [42]
    cron = Cron("0 9 * * MON-FRI", tz="Europe/Paris")
    task.schedule(args=(42,), trigger=cron, key="report:42", on_conflict="replace")
    found = app.get(key="report:42")
    assert found is not None and isinstance(found.message.trigger, Cron)
    assert found.state is State.SCHEDULED
    assert app.cancel(key="report:42") and app.get(key="report:42") is None
    assert not app.cancel(key="report:42")
    with pytest.raises(InvalidMessage, match="on_conflict"):
        task.schedule(args=(1,), key="x", on_conflict="overwrite")


def test_get_and_cancel_need_exactly_one_handle(app: App) -> None:
    with pytest.raises(InvalidMessage):
        app.get()
    with pytest.raises(InvalidMessage):
        app.cancel(id="a", key="b")


def test_keyed_ids_are_deterministic(app: App) -> None:
    task = app.tasks["tests.integration.test_app.send_report"]
    a = task.schedule(args=(1,), key="k", delay=timedelta(hours=1))
    app.cancel(key="k")
    b = task.schedule(args=(1,), key="k", delay=timedelta(hours=1))
    assert a == b
    assert task.schedule(args=(1,), key="k", queue="other") != a


def test_enqueue_many_counts_outcomes(app: App) -> None:
    task = app.tasks["tests.integration.test_app.send_report"]
    calls = [task.call(i).options(key=f"k{i}") for i in range(2500)]
    report = app.enqueue_many(calls, on_conflict="ignore", batch_size=1000)
    assert report.enqueued == 2500 and len(report.ids) == 2500
    again = app.enqueue_many(calls, on_conflict="ignore")
    assert again.enqueued == 0 and again.skipped == 2500


def test_enqueue_many_validates_each_batch_before_writing(app: App) -> None:
    task = app.tasks["tests.integration.test_app.send_report"]
    calls = [task.call(1), task.call("bad")]
    with pytest.raises(InvalidMessage):
        app.enqueue_many(calls)
    assert app.backend.queues.stats() == []


def test_task_classes(sqlite_url: str) -> None:
    app = App(sqlite_url)

    class Reindex(app.Task):  # type: ignore[name-defined,misc]
        queue = "indexing"
        retries = 2

        def run(self, index: str) -> str:
            return f"reindexed {index}"

    name = "tests.integration.test_app.Reindex"
    assert name in app.tasks
    message_id = Reindex.delay("users")
    found = app.get(id=message_id, queue="indexing")
    assert found is not None and found.message.max_attempts == 3
    assert app.tasks[name].run(["users"], {}) == "reindexed users"
    with pytest.raises(InvalidMessage):
        Reindex.delay(index=3.5)


def test_task_classes_take_every_option_functions_take(sqlite_url: str) -> None:
    """A task class sets, as class attributes, the options ``@app.task`` takes (issue 49,
    8): a retry policy with backoff, unique_for, concurrency and rate limits with their
    keys, a fair key and subscriptions to events; each is checked as for a function."""
    app = App(sqlite_url)

    class Export(app.Task):  # type: ignore[name-defined,misc]
        retry = RetryPolicy(retries=4, base_s=2.0, jitter=False)
        unique_for = timedelta(minutes=5)
        concurrency_limit = 2
        rate_limit = "10/m"
        limit_key = "tenant"
        fair_key = "tenant"
        on_events = "invoice.*"

        def run(self, tenant: str, event: object = None) -> None: ...

    options = Export.task.options
    assert options.retry.max_attempts == 5 and options.retry.delay_s(1) == 2.0
    assert options.unique_for == timedelta(minutes=5)
    assert options.concurrency_limit is not None and options.concurrency_limit.capacity == 2
    assert options.rate_limit is not None and options.limit_key == "tenant"
    assert options.fair_key == "tenant"
    assert app.registry.subscriptions[Export.task.name] == ("invoice.*",)
    message = app.get(id=Export.delay("acme"))
    assert message is not None and message.message.limit is not None
    assert message.message.limit.endswith(":acme"), message.message.limit

    with pytest.raises(InvalidMessage, match="limit_key"):

        class Wrong(app.Task):  # type: ignore[name-defined,misc]
            concurrency_limit = 1
            limit_key = "nope"

            def run(self, tenant: str) -> None: ...


def test_periodic_is_installed_once_by_many_workers(sqlite_url: str) -> None:
    apps = []
    for _ in range(10):
        app = App(sqlite_url)

        @app.periodic(Cron("*/5 * * * * ?"), name="beat")
        def beat() -> None: ...

        apps.append(app)
    barrier = threading.Barrier(10)
    outcomes: list[list[Outcome]] = []

    def install(app: App) -> None:
        barrier.wait()
        outcomes.append(app.schedules.install(app.periodics))

    threads = [threading.Thread(target=install, args=(a,)) for a in apps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    flat = [o for result in outcomes for o in result]
    assert flat.count(Outcome.ENQUEUED) == 1, flat
    schedules = apps[0].schedules.list()
    assert len(schedules) == 1 and schedules[0].key == "periodic:beat"
    assert (
        apps[0].backend.queues.stats()[0].scheduled + apps[0].backend.queues.stats()[0].ready == 1
    )


def test_periodic_with_a_changed_trigger_is_replaced(sqlite_url: str) -> None:
    first = App(sqlite_url)
    first.periodic(Cron("0 * * * *"), name="beat")(lambda: None)
    first.schedules.install(first.periodics)
    second = App(sqlite_url)
    second.periodic(Cron("30 * * * *"), name="beat")(lambda: None)
    assert second.schedules.install(second.periodics) == [Outcome.REPLACED]
    (info,) = second.schedules.list()
    assert isinstance(info.trigger, Cron) and info.trigger.expr == "30 * * * *"
    (replaced,) = second.schedules.actions(info.key)  # who replaced it, and why
    assert (replaced.action, replaced.actor) == ("replace", "tickwork")
    assert replaced.detail == "cron 30 * * * * UTC" and "another trigger" in (replaced.note or "")


def test_next_occurrence_is_deterministic(sqlite_url: str) -> None:
    clock = ManualClock(1_800_000_000_000)
    app = App(sqlite_url, clock=clock)

    @app.task
    def tick() -> None: ...

    message_id = tick.schedule(trigger=Repeating(interval=timedelta(minutes=1)), key="t")
    found = app.get(id=message_id)
    assert found is not None
    a = app.builder.next_occurrence(found.message, clock.now_ms())
    b = app.builder.next_occurrence(found.message, clock.now_ms() + 5)
    assert a is not None and b is not None and a.id == b.id == f"{message_id}.1"
    assert Message.decode(a.body).last_run_at == found.message.scheduled_at


def test_settings_from_environment_and_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "tickwork.toml"
    config.write_text('[tickwork]\nbackend = "sqlite:///from-file.db"\ndefault_queue = "files"\n')
    monkeypatch.setenv("TICKWORK_CONFIG", str(config))
    assert Settings.load().backend == "sqlite:///from-file.db"
    monkeypatch.setenv("TICKWORK_BACKEND", "sqlite:///from-env.db")
    settings = Settings.load()
    assert settings.backend == "sqlite:///from-env.db" and settings.default_queue == "files"
    assert Settings.load(backend="sqlite:///arg.db").backend == "sqlite:///arg.db"
    monkeypatch.setenv("TICKWORK_MAX_PAYLOAD_BYTES", "-5")
    with pytest.raises(ConfigurationError):
        Settings.load()


def test_bad_backend_urls_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="unknown backend URL scheme"):
        App("mysql://x").backend  # noqa: B018
    with pytest.raises(ConfigurationError, match="does not exist"):
        App(f"sqlite:///{tmp_path}/missing/dir/x.db").backend  # noqa: B018
    with pytest.raises(ConfigurationError, match="option"):
        App(f"sqlite:///{tmp_path}/x.db?colour=red").backend  # noqa: B018


def test_message_decode_rejects_garbage() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tickwork.scheduler import DecodeError

    @settings(max_examples=300, deadline=None)
    @given(st.binary(max_size=300))
    def check(data: bytes) -> None:
        with contextlib.suppress(DecodeError):
            Message.decode(data)

    check()


def test_retry_policy_backoff() -> None:
    policy = RetryPolicy(retries=5, jitter=False)
    assert [policy.delay_s(a) for a in range(1, 7)] == [1, 2, 4, 8, 16, None]
    capped = RetryPolicy(retries=20, jitter=False)
    assert capped.delay_s(15) == 300
    jittered = RetryPolicy(retries=3)
    for _ in range(100):
        delay = jittered.delay_s(2)
        assert delay is not None and 1 <= delay <= 2


def test_fast_encoding_matches_the_model(app: App) -> None:
    """Enqueue encodes fields directly, without a model (times as epoch ms, a one-off's
    chain and enqueue time left out): the model writes the same bytes."""
    task = app.tasks["tests.integration.test_app.send_report"]
    cases = [
        task.call(1),
        task.call(2, fmt="csv").options(key="k2", priority=3, headers={"h": "v"}),
        task.call(3).options(
            trigger=Cron("*/5 * * * * ?", tz="Europe/Paris", jitter=timedelta(seconds=1))
        ),
        task.call(4).options(trigger=Repeating(interval=timedelta(hours=1), repeat_count=2)),
        task.call(5).options(at=datetime(2031, 1, 1, tzinfo=UTC)),
    ]
    for call in cases:
        _, envelope = app.build(call)
        message = Message.decode(envelope.body)
        assert Message.decode(message.encode()) == message
        assert envelope.body == message.encode(), "one form"
        assert Message.model_validate(message.model_dump()) == message
    _, one_off = app.build(cases[0])
    assert b'"chain"' not in one_off.body and b'"enqueued_at"' not in one_off.body
    assert Message.decode(one_off.body).chain == Message.decode(one_off.body).id


def test_priority_is_bounded(app: App) -> None:
    task = app.tasks["tests.integration.test_app.send_report"]
    task.schedule(args=(1,), priority=1000)
    for bad in (1001, -1001, "high", True):
        with pytest.raises(InvalidMessage, match="priority"):
            task.schedule(args=(1,), priority=bad)  # type: ignore[arg-type]


def test_preview_of_a_trigger_and_of_a_stored_schedule(app: App) -> None:
    task = app.tasks["tests.integration.test_app.send_report"]
    cron = Cron("0 9 * * MON-FRI", tz="Europe/Paris")
    fires = app.preview(cron, 5)
    assert len(fires) == 5 and all(o.wall.hour == 9 and o.wall.weekday() < 5 for o in fires)
    task.schedule(args=(1,), trigger=cron, key="daily")
    stored = app.get(key="daily")
    assert stored is not None
    upcoming = app.preview("daily", 3)
    assert upcoming[0].at == stored.message.scheduled_at, "starts with the pending occurrence"
    assert [o.occurrence for o in upcoming] == [0, 1, 2]
    assert [o.at for o in upcoming] == [o.at for o in app.preview(cron, 3)]
    with pytest.raises(ScheduleNotFound, match="no schedule holds the key"):
        app.preview("nope")


@pytest.mark.parametrize(("count_missed", "runs"), [(True, 4), (False, 6)])
def test_a_chain_carries_its_misfires_into_repeat_count(
    sqlite_url: str, count_missed: bool, runs: int
) -> None:
    """The chain as workers build it (each next occurrence from the last message): the
    first run 2.8 s late, the rest on time."""
    start = datetime(2030, 1, 1, tzinfo=UTC)
    clock = ManualClock(int(start.timestamp() * 1000))
    app = App(sqlite_url, clock=clock)

    @app.task
    def tick() -> None:
        pass

    trigger = Repeating(
        interval=timedelta(seconds=1), repeat_count=6, start=start, count_missed=count_missed
    )
    clock.advance(2800)
    _, envelope = app.build(Call(tick.name, trigger=trigger))
    message = Message.decode(envelope.body)
    seen = []
    while True:
        seen.append(message.occurrence)
        nxt = app.builder.next_occurrence(message, int(message.scheduled_at.timestamp() * 1000))
        if nxt is None:
            break
        message = Message.decode(nxt.body)
    assert len(seen) == runs
    app.close()


def test_catch_up_runs_are_spaced_and_return_to_the_grid(sqlite_url: str) -> None:
    """Ten minutely occurrences missed, caught up no faster than one per 20 s: each run is
    due 20 s after the previous one finished until the chain is back on its grid (each
    late run gains 39 s on it: about 16 runs)."""
    start = datetime(2030, 1, 1, tzinfo=UTC)
    clock = ManualClock(int(start.timestamp() * 1000))
    app = App(sqlite_url, clock=clock)

    @app.task
    def tick() -> None:
        pass

    trigger = Repeating(
        interval=timedelta(minutes=1),
        start=start,
        misfire=Misfire.CATCH_UP,
        catch_up_spacing=timedelta(seconds=20),
    )
    assert trigger.describe().endswith("misfire catch_up, catch up 20s apart")
    clock.advance(10 * 60_000 + 30_000)  # back at 00:10:30
    _, envelope = app.build(Call(tick.name, trigger=trigger))
    assert to_datetime(envelope.due_ms) == start, "the first missed occurrence is due"
    started = [clock.now_ms()]  # a worker runs it at once, at 00:10:30
    message = Message.decode(envelope.body)
    for _ in range(30):
        finished = started[-1] + 1_000  # each run takes a second
        nxt = app.builder.next_occurrence(message, finished)
        assert nxt is not None
        started.append(max(nxt.due_ms, finished))  # it runs when due, not before
        message = Message.decode(nxt.body)
    gaps = [(b - a) // 1000 for a, b in itertools.pairwise(started)]
    assert gaps[:5] == [21] * 5, "late runs: 20 s after the previous one finished"
    assert [to_datetime(t).second for t in started[-3:]] == [0, 0, 0], "then on the grid"
    assert gaps[-1] == 60
    app.close()
