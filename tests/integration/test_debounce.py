"""Debounce (issue 51, 1): calls of a task with the same key within a quiet period collapse
into one run with the last call's arguments (or the first's), due at the latest ``max``
after the period's first call; on every backend, and under load from four producer
threads beside a running worker."""

from __future__ import annotations

import math
import threading
import time
from datetime import timedelta

import pytest

from tests.support.helpers import running, wait_for
from tickwork import App, Debounce
from tickwork.errors import InvalidMessage
from tickwork.scheduler.backends import Claim
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.producing.debounce import FIRST_CALL

QUIET = timedelta(milliseconds=300)


def test_calls_in_a_quiet_period_collapse_into_one_run_per_key(app: App) -> None:
    runs: list[tuple[str, int]] = []

    @app.task(debounce=Debounce(QUIET, key="customer"))
    def sync_crm(customer: str, n: int) -> None:
        runs.append((customer, n))

    @app.task(debounce=Debounce(QUIET, keep="first"))
    def rebuild(n: int) -> None:
        runs.append(("rebuild", n))

    for n in range(1, 6):
        sync_crm.delay("acme", n)
        rebuild.delay(n)
    sync_crm.delay("globex", 1)
    sync_crm.delay("globex", 2)
    with running(app):
        wait_for(lambda: len(runs) == 3)
        # nothing is left to run: each group's message is gone once it ran
        groups = [f"debounce:{sync_crm.name}:{c}" for c in ("acme", "globex")]
        groups.append(f"debounce:{rebuild.name}")
        wait_for(lambda: all(app.get(key=group) is None for group in groups))
    assert sorted(runs) == [("acme", 5), ("globex", 2), ("rebuild", 1)]


def test_a_run_waits_at_most_max_after_the_first_call(app: App) -> None:
    @app.task(debounce=Debounce(timedelta(seconds=30), max=timedelta(seconds=2)))
    def digest(n: int) -> None: ...

    for n in range(3):
        digest.delay(n)
    stored = app.get(key=f"debounce:{digest.name}")
    assert stored is not None
    first_ms = int(stored.message.headers[FIRST_CALL])
    assert stored.message.scheduled_at == to_datetime(first_ms + 2000)  # not 30 s after
    assert stored.message.args == [2]  # the last call's arguments


def test_bad_debounces_are_refused_in_tickworks_words(sqlite_app: App) -> None:
    with pytest.raises(InvalidMessage, match="a debounce period is a positive timedelta"):
        Debounce(timedelta(0))
    with pytest.raises(InvalidMessage, match="a debounce max is a positive timedelta"):
        Debounce(timedelta(seconds=5), max=timedelta(0))
    with pytest.raises(InvalidMessage, match="debounce key 'who' of task"):

        @sqlite_app.task(debounce=Debounce(QUIET, key="who"))
        def wrong(customer: str) -> None: ...

    @sqlite_app.task(debounce=QUIET)
    def ping() -> None: ...

    with pytest.raises(InvalidMessage, match="is debounced"):
        ping.schedule(delay=timedelta(seconds=1))
    with pytest.raises(InvalidMessage, match="one at a time"):
        sqlite_app.enqueue_many([ping.call()])


@pytest.mark.parametrize("app", ["sqlite", "redis"], indirect=True)
def test_under_load_the_last_call_of_every_key_runs_and_none_goes_back(app: App) -> None:
    """Four producer threads, 50 keys each of its own, 25 calls a key, while a worker runs:
    per key, runs only move forward (a newer call's arguments are never followed by an
    older one's) and the last call is the last run.

    And they collapsed, whatever the machine's speed: a group is due at least a period
    after its first call and the next group starts with a call after that, so a key's
    groups start at least a period apart, all within the time the producers took."""
    runs: dict[str, list[int]] = {}
    lock = threading.Lock()

    @app.task(debounce=Debounce(timedelta(seconds=1), max=timedelta(seconds=3), key="k"))
    def touch(k: str, n: int) -> None:
        with lock:
            runs.setdefault(k, []).append(n)

    keys = [f"key-{i}" for i in range(50)]

    def produce(mine: list[str]) -> None:
        for n in range(25):
            for key in mine:
                touch.delay(key, n)

    with running(app):
        threads = [threading.Thread(target=produce, args=(keys[i::4],)) for i in range(4)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        producing_s = time.monotonic() - started
        wait_for(lambda: all(runs.get(key, [None])[-1] == 24 for key in keys), timeout_s=60)
    for key in keys:
        assert runs[key] == sorted(set(runs[key])), (key, runs[key])
    most_per_key = math.floor(producing_s / 1.0) + 1
    assert all(len(runs[key]) <= most_per_key for key in keys), (producing_s, runs)


def test_a_call_never_cancels_a_run_that_is_due_and_claimed(app: App) -> None:
    """A worker between its claim of a due run and the handler's start: a call then
    starts the next period in the group's second slot; the claimed run is not replaced
    (its ack is written), and the next run carries the new call."""

    @app.task(debounce=Debounce(timedelta(milliseconds=200), key="k"))
    def sync(k: str, n: int) -> None: ...

    sync.delay("acme", 1)
    queue = sync.options.queue
    claimed: list[Claim] = []

    def claim_it() -> bool:
        claimed.extend(app.backend.leases.claim(queue, 1).claims)
        return bool(claimed)

    wait_for(claim_it)
    (claim,) = claimed
    sync.delay("acme", 2)  # while the claimed run is about to start
    group = f"debounce:{sync.name}:acme"
    following = app.get(key=f"{group}~next", queue=queue)
    assert following is not None and following.message.args == ["acme", 2]
    assert app.backend.leases.ack([(claim, None)]) == [True], "the claimed run was not cancelled"
    sync.delay("acme", 3)  # joins the waiting period
    waiting = app.get(key=f"{group}~next", queue=queue)
    assert waiting is not None and waiting.message.args == ["acme", 3]
    assert app.get(key=group, queue=queue) is None, "one period waits, in one slot"
