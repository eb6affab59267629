"""The worker registry end to end, on every backend: a running worker is listed with what
it consumes and holds, a worker whose heartbeat stopped is shown as gone, and a worker
that stops is removed."""

from __future__ import annotations

import os
import threading
from datetime import timedelta

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.views.presence import WorkerInfo


def test_a_worker_is_listed_while_it_runs_and_removed_when_it_stops(app: App) -> None:
    release = threading.Event()

    @app.task
    def hold() -> None:
        release.wait(30)

    now = to_datetime(app.backend.now_ms())
    ghost = WorkerInfo(  # a worker killed a minute ago: its record was not refreshed since
        id="ghost",
        host="elsewhere",
        pid=1,
        queues=["default"],
        concurrency=4,
        pool="thread",
        started_at=now - timedelta(hours=1),
        last_seen=now - timedelta(minutes=1),
        interval_s=5.0,
    )
    app.backend.registry.put("ghost", ghost.model_dump_json().encode(), 60_000)
    hold.delay()
    with running(app, queues=("default", "reports"), registry_interval_s=0.1) as worker:
        wait_for(lambda: any(w.held == 1 for w in app.workers.live() if w.pid == os.getpid()))
        (me,) = [w for w in app.workers.live() if w.pid == os.getpid()]
        assert me.alive and me.queues == ["default", "reports"] and me.pool == "thread"
        assert me.id == worker._presence.worker_id
        release.set()
        wait_for(lambda: any(w.stats.get("acked") == 1 for w in app.workers.live() if w.alive))
    listed = {w.id: w.alive for w in app.workers.live()}
    assert listed == {"ghost": False}, "the stopped worker left; the silent one is gone"
