"""Several specs per schedule and partial catch-up, run by a real worker on every
backend: a ``Specs`` schedule runs at each instant of the union of its grids, once; a
schedule enqueued with a backlog runs only the newest ``max_catch_up`` occurrences inside
its ``catch_up_window``, back to back, then goes on on its grid."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from itertools import pairwise

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App
from tickwork.scheduler.schedules.ledger import RunOutcome
from tickwork.triggers import Misfire, Repeating, Specs

MS = timedelta(milliseconds=1)


def _ran(app: App, key: str) -> list[datetime]:
    entries = reversed(app.schedules.history(key))
    return [h.scheduled_at for h in entries if h.outcome is RunOutcome.SUCCEEDED]


def test_a_schedule_of_several_specs_runs_on_their_union(app: App) -> None:
    lock = threading.Lock()
    count = [0]

    @app.task
    def tick() -> None:
        with lock:
            count[0] += 1

    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    union = Specs(
        misfire=Misfire.CATCH_UP,  # a late run keeps its grid time (no coalesced run at now)
        specs=(
            Repeating(interval=300 * MS, start=start),
            Repeating(interval=300 * MS, start=start + 100 * MS),
            Repeating(interval=600 * MS, start=start),  # on the first grid: no extra run
        ),
    )
    tick.schedule(trigger=union, key="union")
    with running(app):
        wait_for(lambda: len(_ran(app, "union")) >= 6, timeout_s=30)
    app.cancel(key="union")
    ran = _ran(app, "union")
    assert ran == sorted(set(ran)), "each instant once, in order"
    offsets = {round((at - start) / MS) % 300 for at in ran}
    assert offsets <= {0, 100}, ran
    assert app.schedules.list() == []  # cancelled
    assert "any of: every 300ms" in union.describe()


def test_a_backlog_runs_the_newest_occurrences_inside_the_window(app: App) -> None:
    @app.task
    def report() -> None: ...

    now = datetime.now(UTC).replace(microsecond=0)
    start = now - timedelta(seconds=25)  # 25 occurrences are due already
    backlog = Repeating(
        interval=timedelta(seconds=1),
        start=start,
        misfire=Misfire.CATCH_UP,
        max_catch_up=4,
        catch_up_window=timedelta(seconds=10),  # 10 of them are recent enough
    )
    report.schedule(trigger=backlog, key="backlog")
    with running(app):
        wait_for(lambda: len(_ran(app, "backlog")) >= 6, timeout_s=30)
    app.cancel(key="backlog")
    ran = _ran(app, "backlog")
    second = timedelta(seconds=1)
    on_grid = all((at - start) % second == timedelta(0) for at in ran)
    assert ran == sorted(set(ran)) and on_grid, ran
    # of the 25 due at enqueue, only the newest four may run (a worker slow to claim may
    # find more due by then and leave out more of the oldest, never run an older one)
    behind = [at for at in ran if at <= now]
    assert 1 <= len(behind) <= 4 and behind[0] >= now - 3 * second, ran
    later = ran[len(behind) :]  # then every occurrence, along the grid
    assert all(b - a == second for a, b in pairwise(later)), ran


def test_a_stored_occurrence_older_than_the_window_is_missed_not_run(sqlite_app: App) -> None:
    """The occurrence already stored when workers were away (issue 49, 2): found older
    than ``catch_up_window`` when due to start, it is not run, recorded as missed, and
    the schedule goes on from its next occurrence."""
    app = sqlite_app
    ran: list[datetime] = []

    @app.task
    def report() -> None:
        ran.append(datetime.now(UTC))

    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    hourly = Repeating(
        interval=timedelta(hours=1), start=start, catch_up_window=timedelta(seconds=1)
    )
    report.schedule(trigger=hourly, key="hourly")
    wait_for(lambda: datetime.now(UTC) > start + timedelta(seconds=2))  # no worker yet
    with running(app) as worker:
        wait_for(lambda: worker.stats.missed == 1 and worker.stats.acked == 1)
    assert ran == [], "an occurrence older than its catch-up window never runs"
    (missed,) = app.schedules.history("hourly")
    assert missed.outcome is RunOutcome.MISSED and missed.scheduled_at == start
    assert missed.error is not None and "past its catch_up_window of 1 s" in missed.error
    (info,) = app.schedules.list()
    assert info.next_run == start + timedelta(hours=1)
