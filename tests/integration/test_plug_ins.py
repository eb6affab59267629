"""A worker takes plug-ins: a run outcome and a rider made up for the test, each a class
in a module of its own (``tests/support/quarantine.py``, ``tests/support/keep_failures.py``)
added with one line, change how a worker settles runs on every backend (the runs they do
not claim settle as before); a made-up boot step checks as the worker is made and boots
before its threads start."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.helpers import running, wait_for
from tests.support.keep_failures import KeepFailures
from tests.support.quarantine import Quarantine, Quarantined
from tickwork.scheduler import App, ConfigurationError, Message, RetryPolicy
from tickwork.scheduler.backends import Claim
from tickwork.scheduler.model.handles import RunStatus
from tickwork.workers import Worker, WorkerConfig
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.boot import BOOT_STEPS
from tickwork.workers.intake.special import SPECIAL_MESSAGES, OverlapTicker
from tickwork.workers.settling.followers import AFTER_POISON
from tickwork.workers.settling.outcomes import OUTCOMES, Failed
from tickwork.workers.settling.plan import Settled
from tickwork.workers.settling.riders import RIDERS
from tickwork.workers.settling.settler import Settler


@pytest.fixture
def plugged() -> Iterator[None]:
    undo_outcome = OUTCOMES.add(Quarantined(), before=Failed)
    undo_rider = RIDERS.add(KeepFailures())
    yield
    undo_outcome()
    undo_rider()


def test_a_made_up_outcome_and_rider_settle_runs_on_every_backend(app: App, plugged: None) -> None:
    attempts: list[str] = []

    @app.task(retry=RetryPolicy(retries=3, base_s=0.05))
    def ingest(name: str) -> None:
        attempts.append(name)
        if name == "corrupt":
            raise Quarantine(f"{name}: checksum mismatch")
        raise ValueError(f"{name}: try again")

    corrupt = ingest.schedule(["corrupt"], key="file-corrupt")
    flaky = ingest.schedule(["flaky"], key="file-flaky")
    with running(app) as worker:
        # the stats count a poison after its write: wait for both
        wait_for(lambda: len(app.poison.list()) == 2 and worker.stats.poisoned == 2, 30)
        stats = worker.stats
    assert attempts.count("corrupt") == 1, "quarantined at once: no retry"
    assert attempts.count("flaky") == 4, "a run the outcome does not claim: retried"
    assert (stats.poisoned, stats.retried) == (2, 3)
    reasons = {view.id: view.reason for view in app.poison.list()}
    assert reasons == {corrupt: "quarantined", flaky: "exception"}
    # the rider kept both failures' records, though the task keeps no results
    info = app.result(corrupt)
    assert info.status is RunStatus.FAILED and info.error_type == "Quarantine"
    assert info.error == "corrupt: checksum mismatch"
    assert app.result(flaky).error_type == "ValueError"


def test_without_the_plug_ins_the_same_run_is_retried(sqlite_app: App) -> None:
    app = sqlite_app
    attempts: list[str] = []

    @app.task(retry=RetryPolicy(retries=1, base_s=0.05))
    def ingest(name: str) -> None:
        attempts.append(name)
        raise Quarantine(name)

    corrupt = ingest.schedule(["corrupt"], key="file-corrupt")
    with running(app):
        wait_for(lambda: len(app.poison.list()) == 1, timeout_s=30)
    assert attempts == ["corrupt", "corrupt"]
    assert [view.reason for view in app.poison.list()] == ["exception"]
    assert app.result(corrupt).status is RunStatus.UNKNOWN, "no record kept"


class _Capped:
    """A boot step made up for the test: checks a cap on concurrency as the worker is
    made, and notes its boot (before the worker's threads start)."""

    def __init__(self) -> None:
        self.booted: list[str] = []

    def check(self, app: WorkerApp, config: WorkerConfig) -> None:
        if config.concurrency > 64:
            raise ConfigurationError("this deployment runs at most 64 handlers")

    def boot(self, app: WorkerApp, config: WorkerConfig) -> None:
        self.booted.append("booted")


def test_a_made_up_boot_step_checks_then_boots(sqlite_app: App) -> None:
    app = sqlite_app
    step = _Capped()
    undo = BOOT_STEPS.add(step)
    seen: list[list[str]] = []

    @app.task
    def probe() -> None:
        seen.append(list(step.booted))

    try:
        with pytest.raises(ConfigurationError, match="at most 64 handlers"):
            Worker(app, WorkerConfig(concurrency=100))
        assert step.booted == [], "a worker refused at its check never boots"
        probe.delay()
        with running(app):
            wait_for(lambda: seen != [])
    finally:
        undo()
    assert seen == [["booted"]], "booted once, before the first run"


class _Noted:
    """A made-up follower of written poisons: notes each one's id."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def follow(self, item: Settled, app: WorkerApp) -> None:
        self.ids.append(item.work.message.id)


def test_a_made_up_follower_is_told_of_each_written_poison(sqlite_app: App) -> None:
    noted = _Noted()
    undo = AFTER_POISON.add(noted)
    try:

        @sqlite_app.task
        def broken() -> None:
            raise RuntimeError("no")

        @sqlite_app.task
        def fine() -> None: ...

        failed, _ = broken.delay(), fine.delay()
        with running(sqlite_app) as worker:
            wait_for(lambda: worker.stats.poisoned == 1 and worker.stats.acked == 1)
    finally:
        undo()
    assert noted.ids == [failed]


class _Tombstone:
    """Made up: a message with the header ``tombstone`` is dropped at intake, unrun."""

    needs_task = False

    def __init__(self) -> None:
        self.dropped: list[str] = []

    def matches(self, message: Message) -> bool:
        return "tombstone" in message.headers

    def take(self, claim: Claim, message: Message, settler: Settler) -> None:
        self.dropped.append(message.id)
        settler.close_window(claim)  # acked with nothing after it, its permit given back


def test_a_made_up_special_message_is_settled_at_intake_and_never_runs(app: App) -> None:
    tombstones = _Tombstone()
    undo = SPECIAL_MESSAGES.add(tombstones, before=OverlapTicker)
    ran: list[int] = []
    try:

        @app.task
        def work(n: int) -> None:
            ran.append(n)

        dropped = app.enqueue(work.call(1).options(headers={"tombstone": "yes"}))
        work.delay(2)
        with running(app) as worker:
            wait_for(lambda: ran == [2] and app.get(id=dropped) is None)
            assert worker.stats.poisoned == 0
    finally:
        undo()
    assert tombstones.dropped == [dropped] and ran == [2]
