"""Priority aging end to end, on every backend: while higher-priority work keeps arriving
faster than a worker runs it, a low-priority message of a task with ``max_wait`` runs
once it has waited that long (not before, and with higher-priority work still waiting),
so does each occurrence of a schedule of such a task (the next one written by the ack of
the one before), and one without ``max_wait`` waits on; bad input is one clear error."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, InvalidMessage
from tickwork.scheduler.model.message import Message
from tickwork.triggers import Repeating

MAX_WAIT_S = 2.0


def test_a_low_priority_message_runs_after_its_max_wait_while_higher_ones_keep_coming(
    app: App,
) -> None:
    lock = threading.Lock()
    counts = {"enqueued": 0, "ran": 0}
    ran_at: dict[str, float] = {}
    backlog_then: dict[str, int] = {}

    @app.task(priority=10)
    def urgent(n: int) -> None:
        time.sleep(0.005)
        with lock:
            counts["ran"] += 1

    @app.task(priority=-10, max_wait=timedelta(seconds=MAX_WAIT_S))
    def report(tag: str) -> None:
        with lock:
            ran_at[tag] = time.monotonic()
            backlog_then[tag] = counts["enqueued"] - counts["ran"]

    @app.task(priority=-10, max_wait=timedelta(seconds=MAX_WAIT_S))
    def every() -> None:  # each occurrence after the first is written by an ack
        with lock:
            occurrences.append(counts["enqueued"] - counts["ran"])

    occurrences: list[int] = []

    @app.task(priority=-10, name="starved")
    def starved(tag: str) -> None:
        with lock:
            ran_at[tag] = time.monotonic()

    stop = threading.Event()

    def flood() -> None:  # keep 100 to 300 urgent messages waiting
        n = 0
        while not stop.is_set():
            with lock:
                waiting = counts["enqueued"] - counts["ran"]
            if waiting < 100:
                app.enqueue_many([urgent.call(n + i) for i in range(200)])
                n += 200
                with lock:
                    counts["enqueued"] += 200
            time.sleep(0.02)

    producer = threading.Thread(target=flood, name="flood")
    with running(app, concurrency=2) as worker:
        producer.start()
        wait_for(lambda: counts["ran"] >= 50, timeout_s=60)  # the flood is running
        enqueued_at = time.monotonic()
        starved.delay("starved")
        report.delay("aged")
        try:
            every.schedule(trigger=Repeating(interval=timedelta(seconds=1)), key="every")
            wait_for(lambda: "aged" in ran_at, timeout_s=60)
            wait_for(lambda: len(occurrences) >= 2, timeout_s=60)  # the second aged too
            assert "starved" not in ran_at, "the message without max_wait waits on"
            assert app.cancel(key="every")
        finally:
            stop.set()
            producer.join(30)
        wait_for(lambda: "starved" in ran_at, timeout_s=120)
        assert worker.stats.poisoned == 0
    waited = ran_at["aged"] - enqueued_at
    assert waited >= MAX_WAIT_S - 0.2, f"ran after {waited:.2f} s: before its max_wait"
    assert waited < MAX_WAIT_S + 20, f"ran after {waited:.2f} s"
    assert backlog_then["aged"] > 0, "it ran ahead of waiting higher-priority messages"
    assert all(backlog > 0 for backlog in occurrences[:2]), "the schedule's ran ahead"
    print(f"\n{app.backend.name}: ran {waited - MAX_WAIT_S:.2f} s after its max_wait")


def test_a_message_and_a_schedule_s_next_occurrence_carry_their_promotion_time(
    sqlite_app: App,
) -> None:
    """What the backends are given (the contract suite checks each one promotes it)."""
    app = sqlite_app

    @app.task(priority=-1, max_wait=30)
    def tick() -> None: ...

    assert app.builder.build(tick.call())[1].promote_ms is not None, "a delay() too"
    _, envelope = app.builder.build(
        tick.call().options(trigger=Repeating(interval=timedelta(minutes=1)))
    )
    assert envelope.promote_ms == envelope.due_ms + 30_000
    message = Message.decode(envelope.body)
    following = app.builder.next_occurrence(message, envelope.due_ms)
    assert following is not None and following.promote_ms == following.due_ms + 30_000

    @app.task(priority=-1)
    def plain() -> None: ...

    assert app.builder.build(plain.call())[1].promote_ms is None


@pytest.mark.parametrize("given", [0, -1, timedelta(0), "soon"])
def test_a_bad_max_wait_is_one_clear_error(sqlite_app: App, given: object) -> None:
    with pytest.raises(InvalidMessage, match=r"option max_wait=.* is not valid"):
        sqlite_app.task(max_wait=given)(lambda: None)  # type: ignore[call-overload]
