"""``overlap="allow"`` on every backend: occurrences start on time while earlier ones still
run, each as its own message recorded in the schedule's ledger; a cancelled schedule
starts nothing more; a ticker delivered twice enqueues its run once; chains refuse it."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, InvalidMessage, Outcome, chain
from tickwork.scheduler.backends import OnConflict, State
from tickwork.scheduler.clock import to_ms
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.schedules.ledger import RunOutcome
from tickwork.scheduler.schedules.overlap import run_of
from tickwork.triggers import Overlap, Repeating

EVERY = timedelta(milliseconds=300)


def test_occurrences_start_on_time_while_earlier_ones_run(app: App) -> None:
    lock = threading.Lock()
    running_now, most, starts = [0], [0], []

    @app.task
    def slow() -> None:
        with lock:
            running_now[0] += 1
            most[0] = max(most[0], running_now[0])
            starts.append(time.monotonic())
        time.sleep(1.0)
        with lock:
            running_now[0] -= 1

    @app.task
    def sentinel() -> None:
        ended.set()

    ended = threading.Event()
    trigger = Repeating(interval=EVERY, overlap=Overlap.ALLOW)
    assert "overlap allow" in trigger.describe()
    slow.schedule(trigger=trigger, key="slow")
    with running(app, concurrency=8):
        wait_for(lambda: len(starts) >= 6, timeout_s=20)
        # its chain never sees a run end: the last success comes from the ledger
        wait_for(lambda: app.schedules.list()[0].last_success is not None)
        app.cancel(key="slow")
        # runs enqueued before the cancel still run (on a slow backend, several may wait)
        waiting = [
            m
            for m in app.backend.messages.keyed()
            if (m.envelope.key or "").startswith("slow/run/") and m.state is not State.RUNNING
        ]
        cancelled_at = time.monotonic()
        # a sentinel due after several more occurrences would have been: once it ran,
        # they would have started (the queue is claimed in due order)
        sentinel.schedule(delay=timedelta(seconds=1.5))
        assert ended.wait(60)
    assert most[0] >= 3, "each occurrence started while earlier ones still ran"
    after = [s for s in starts if s > cancelled_at]
    # ... and so does the run of an occurrence whose ticker was firing as the cancel came
    assert len(after) <= len(waiting) + 1, "a cancelled schedule starts nothing new"
    history = app.schedules.history("slow")
    runs = [h for h in history if h.outcome is RunOutcome.SUCCEEDED]
    assert len(runs) >= 3 and all(h.origin == "scheduled" for h in runs)
    assert RunOutcome.SKIPPED_OVERLAP not in {h.outcome for h in history}
    assert RunOutcome.CANCELLED in {h.outcome for h in history}


def test_a_ticker_delivered_twice_enqueues_its_run_once(pair_app: App) -> None:
    app = pair_app
    ran: list[int] = []

    @app.task
    def tick() -> None:
        ran.append(1)

    tick.schedule(trigger=Repeating(interval=timedelta(hours=1), overlap=Overlap.ALLOW), key="t")
    found = app.get(key="t")
    assert found is not None
    ticker: Message = found.message
    now = app.backend.now_ms()
    run = run_of(app.builder, ticker, now, now)
    assert run.key == f"t/run/{to_ms(ticker.scheduled_at)}"
    assert app.backend.messages.enqueue([run], OnConflict.IGNORE) == [Outcome.ENQUEUED]
    assert app.backend.messages.enqueue([run], OnConflict.IGNORE) != [Outcome.ENQUEUED]
    app.cancel(key="t")
    with running(app):
        wait_for(lambda: len(ran) == 1)
    again = run_of(app.builder, ticker, now, app.backend.now_ms())
    assert app.backend.messages.enqueue([again], OnConflict.IGNORE) == [Outcome.IGNORED], (
        "after it ran, its key is kept: a late redelivery enqueues nothing"
    )


def test_a_chain_with_a_trigger_refuses_overlap(pair_app: App) -> None:
    app = pair_app

    @app.task
    def step() -> None:
        pass

    allow = Repeating(interval=timedelta(minutes=1), overlap=Overlap.ALLOW)
    with pytest.raises(InvalidMessage, match="overlap='allow' is for a single task"):
        app.enqueue(chain(step.si(), step.si()).options(key="c", trigger=allow))
    assert app.get(key="c") is None
