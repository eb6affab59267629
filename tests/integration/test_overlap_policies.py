"""The overlap policies that run a schedule's runs one at a time, on every backend:
``buffer_all`` runs every occurrence, one after another; ``buffer_one`` keeps at most one
waiting and records the others as skipped by overlap; ``cancel_other`` aborts the run
before; ``terminate_other`` kills it at once on the process pool. Each shown in the
trigger's description and in the schedule's history; a task with a concurrency limit of
its own and a chain refuse them."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.helpers import running, wait_for
from tickwork.cli import cli
from tickwork.scheduler import Aborted, App, ConcurrencyLimit, InvalidMessage, chain, current_run
from tickwork.scheduler.model.message import Message, is_unique_window
from tickwork.scheduler.schedules.ledger import RunOutcome
from tickwork.triggers import Overlap, Repeating
from tickwork.workers import Worker, WorkerConfig


class Runs:
    """Starts and ends of a task's runs, and how many ran at once at most."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now, self.most = 0, 0
        self.starts: list[float] = []

    def start(self) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.starts.append(time.monotonic())

    def end(self) -> None:
        with self.lock:
            self.now -= 1


def _pending_runs(app: App, key: str) -> int:
    """Runs of schedule ``key`` stored and not yet done (a run that succeeded leaves a
    unique window holding its key: not counted)."""
    return sum(
        1
        for m in app.backend.messages.keyed()
        if (m.envelope.key or "").startswith(f"{key}/run/")
        and not is_unique_window(Message.decode(m.envelope.body))
    )


def test_buffer_all_runs_every_occurrence_one_after_another(app: App) -> None:
    runs = Runs()

    @app.task
    def report() -> None:
        runs.start()
        time.sleep(0.5)
        runs.end()

    trigger = Repeating(interval=timedelta(milliseconds=200), overlap=Overlap.BUFFER_ALL)
    assert "overlap buffer_all" in trigger.describe()
    report.schedule(trigger=trigger, key="all")
    with running(app, concurrency=8):
        wait_for(lambda: len(runs.starts) >= 3, timeout_s=30)
        assert app.cancel(key="all")
        wait_for(lambda: _pending_runs(app, "all") == 0 and runs.now == 0, timeout_s=60)
    assert runs.most == 1, "one run at a time"
    gaps = [b - a for a, b in zip(runs.starts, runs.starts[1:], strict=False)]
    assert all(gap >= 0.45 for gap in gaps), gaps
    history = app.schedules.history("all")
    succeeded = [h for h in history if h.outcome is RunOutcome.SUCCEEDED]
    assert len(succeeded) == len(runs.starts), "every occurrence enqueued ran"
    assert RunOutcome.SKIPPED_OVERLAP not in {h.outcome for h in history}


def test_buffer_one_keeps_one_waiting_and_skips_the_rest(app: App) -> None:
    runs = Runs()

    @app.task
    def sync() -> None:
        runs.start()
        time.sleep(0.9)
        runs.end()

    trigger = Repeating(interval=timedelta(milliseconds=200), overlap=Overlap.BUFFER_ONE)
    sync.schedule(trigger=trigger, key="one")
    with running(app, concurrency=8):
        wait_for(lambda: len(runs.starts) >= 2, timeout_s=30)
        wait_for(
            lambda: RunOutcome.SKIPPED_OVERLAP in {h.outcome for h in app.schedules.history("one")},
            timeout_s=30,
        )
        assert _pending_runs(app, "one") <= 2, "the one running and at most one waiting"
        assert app.cancel(key="one")
        wait_for(lambda: _pending_runs(app, "one") == 0 and runs.now == 0, timeout_s=60)
    assert runs.most == 1
    skipped = [h for h in app.schedules.history("one") if h.outcome is RunOutcome.SKIPPED_OVERLAP]
    assert skipped and "waits already" in (skipped[0].note or "")


def test_cancel_other_aborts_the_run_before(app: App) -> None:
    """A run that started is stopped by the next occurrence (a run a worker had claimed
    ahead of its time is aborted before it starts: both end as aborted)."""
    runs = Runs()
    stopped: list[int] = []

    @app.task
    def crunch() -> None:
        runs.start()
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                current_run().raise_if_aborted()
                time.sleep(0.02)
        except Aborted:
            stopped.append(1)  # stopped while it ran, by the occurrence after it
            raise
        finally:
            runs.end()

    def aborted() -> int:
        history = app.schedules.history("latest")
        return len([h for h in history if h.outcome is RunOutcome.ABORTED])

    trigger = Repeating(interval=timedelta(milliseconds=700), overlap=Overlap.CANCEL_OTHER)
    crunch.schedule(trigger=trigger, key="latest")
    with running(app, concurrency=8, abort_check_s=0.05):
        wait_for(lambda: len(stopped) >= 1 and aborted() >= 2, timeout_s=40)
        assert app.cancel(key="latest")
        for stored in app.backend.messages.keyed():
            if (stored.envelope.key or "").startswith("latest/run/"):
                app.abort(id=stored.envelope.id)
        wait_for(lambda: runs.now == 0, timeout_s=30)
    assert runs.most == 1, "the next run starts once the one before stopped"


def test_terminate_other_kills_the_run_before_on_the_process_pool(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run sleeps in C, deaf to its abort, with a 60 s abort grace: only a kill ends
    it, and the next occurrence kills it when it comes."""
    monkeypatch.setenv("TICKWORK_BACKEND", sqlite_url)
    import importlib

    import tests.support.overlap_tasks as module

    tasks = importlib.reload(module)
    marker = tmp_path / "starts"
    trigger = Repeating(interval=timedelta(seconds=2), overlap=Overlap.TERMINATE_OTHER)
    tasks.deaf.schedule((str(marker),), trigger=trigger, key="deaf")
    config = WorkerConfig(
        pool="process",
        concurrency=2,
        poll_interval_s=0.05,
        abort_check_s=0.05,
        abort_grace_s=60,
        grace_s=5,
        app_reference="tests.support.overlap_tasks",
    )
    worker = Worker(tasks.app, config)
    worker.start()
    try:
        wait_for(lambda: marker.exists() and len(marker.read_text().split()) >= 3, 40)
        aborted = [
            h for h in tasks.app.schedules.history("deaf") if h.outcome is RunOutcome.ABORTED
        ]
        assert len(aborted) >= 2, "each run was ended by the next occurrence"
        tasks.app.cancel(key="deaf")
    finally:
        worker.stop()
        worker.join(30)
        tasks.app.close()


def test_a_limited_task_or_a_chain_refuses_them(pair_app: App) -> None:
    app = pair_app

    @app.task(concurrency_limit=ConcurrencyLimit(name="crm", capacity=2))
    def limited() -> None:
        pass

    @app.task
    def step() -> None:
        pass

    one = Repeating(interval=timedelta(minutes=1), overlap=Overlap.BUFFER_ONE)
    with pytest.raises(InvalidMessage, match="concurrency limit"):
        limited.schedule(trigger=one, key="l")
    with pytest.raises(InvalidMessage, match="overlap='buffer_one' is for a single task"):
        app.enqueue(chain(step.si(), step.si()).options(key="c", trigger=one))
    assert app.get(key="l") is None and app.get(key="c") is None


def test_preview_and_history_show_the_policy(sqlite_app: App, sqlite_url: str) -> None:
    app = sqlite_app

    @app.task
    def nightly() -> None:
        pass

    trigger = Repeating(interval=timedelta(hours=1), overlap=Overlap.BUFFER_ONE)
    nightly.schedule(trigger=trigger, key="nightly")
    shown = CliRunner().invoke(
        cli, ["--backend", sqlite_url, "schedules", "preview", "nightly", "-n", "2"]
    )
    assert shown.exit_code == 0, shown.output
    first = shown.output.splitlines()[0]
    assert "overlap buffer_one" in first and "one more waits, the others are skipped" in first
