"""Workers whose clocks are 30 s ahead and 30 s behind (libfaketime, Debian's
``faketime``, preloaded into the worker process) run next to one with the true time:
nothing fires early and nothing fires twice. A worker keeps time by the backend's clock
(Redis ``TIME``, the Cassandra coordinator's ``now()``), measuring its offset at start,
so the skew of its own clock does not matter. SQLite has no server: every process reads
the machine's one clock, so skew between them cannot arise and is not tested there.
``make test`` runs it on Redis, ``make faults`` on Redis, a Redis Cluster and Cassandra."""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from tests.faults.faketime import count_runs, libfaketime, runners
from tests.support.backends import backend_url
from tests.support.helpers import start_record_worker, stop_workers, wait_until
from tickwork.scheduler import App
from tickwork.scheduler.clock import ManualClock, to_datetime
from tickwork.triggers import Cron, Repeating

FULL = os.environ.get("TICKWORK_FAULTS_FULL") == "1"
MODULE = "tests.support.skew_tasks"
SKEWS_S = (0, 30, -30)  # one worker each
JOBS = 600 if FULL else 150
SPREAD_S = 12 if FULL else 5  # delayed jobs fall due over this many seconds
EARLY_MS = 20  # what "early" must exceed: the offset a worker measures is this precise

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "backend_name", ["redis", "redis-cluster", "cassandra"] if FULL else ["redis"]
)
def test_skewed_workers_fire_nothing_early_or_twice(
    backend_name: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    preload = libfaketime()
    url = backend_url(backend_name, tmp_path)
    runs = tmp_path / "runs.txt"
    from tests.support.skew_tasks import app, job, tick

    app.use_backend(url)
    now = app.backend.now_ms()
    due = {n: now + 1000 + random.randrange(SPREAD_S * 1000) for n in range(JOBS)}
    calls = [replace(job.call(n), at=to_datetime(due[n])) for n in range(JOBS)]
    assert app.enqueue_many(calls).enqueued == JOBS
    tick.schedule(trigger=Repeating(interval=timedelta(milliseconds=300)), key="rep")
    tick.schedule(trigger=Cron("* * * * * ?"), key="cron")
    started = time.time()
    workers = []
    for n, skew in enumerate(SKEWS_S):
        env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_RUNS": str(runs)}
        if skew:
            env |= {
                "LD_PRELOAD": preload,
                "FAKETIME": f"{skew:+d}s",
                "FAKETIME_DONT_FAKE_MONOTONIC": "1",  # the test's true time, see skew_tasks
            }
        workers.append(start_record_worker(env, tmp_path / f"w{n}.log", MODULE, concurrency=2))
    try:
        # every job ran, and every worker ran something (the schedules keep firing: a
        # worker that started late under load still gets its turn)
        pids = {worker.pid for worker in workers}

        def all_ran() -> bool:
            return count_runs(runs, "job") >= JOBS and runners(runs) >= pids

        assert wait_until(all_ran, 60 + SPREAD_S), f"stalled: ran by {runners(runs)}"
        time.sleep(1)  # a job run twice would show now
    finally:
        app.cancel(key="rep")
        app.cancel(key="cron")
        elapsed_s = time.time() - started
        stop_workers(workers)
        app.close()
    real_minus_monotonic = time.time() - time.monotonic()
    lines = [line.split() for line in runs.read_text().splitlines()]
    by_pid = {w.pid: skew for w, skew in zip(workers, SKEWS_S, strict=True)}
    # the skew was in effect: each worker ran something, with its clock off as told
    for kind, what, monotonic, own, pid in lines:
        offset_s = float(own) - (float(monotonic) + real_minus_monotonic)
        assert abs(offset_s - by_pid[int(pid)]) < 2, (kind, what, offset_s)
    assert {int(line[4]) for line in lines} == set(by_pid), "a worker ran nothing"
    jobs = [
        (int(what), float(mono), int(pid)) for kind, what, mono, _, pid in lines if kind == "job"
    ]
    assert Counter(n for n, _, _ in jobs) == Counter(range(JOBS)), "a job lost or run twice"
    # per worker that ran jobs (one may take them all: a claim takes a batch; the ticks
    # below check every worker's firing times)
    early = {
        by_pid[pid]: max(
            due[n] - (mono + real_minus_monotonic) * 1000 for n, mono, p in jobs if p == pid
        )
        for pid in by_pid
        if any(p == pid for _, _, p in jobs)
    }
    assert max(early.values()) < EARLY_MS, f"jobs started early (ms, by the worker's skew): {early}"
    ticks = Counter(what for kind, what, *_ in lines if kind == "tick")
    assert max(ticks.values()) == 1, "an occurrence fired twice"
    fires = Counter(what.split(".")[0] for what in ticks)
    # a chain firing early would run through the occurrences of the next 30 s at once
    assert max(fires.values()) <= elapsed_s / 0.3 + 2, fires


@pytest.mark.parametrize("skew_ms", [30_000, -30_000])
def test_a_skewed_producer_stamps_on_the_backends_clock(skew_ms: int, tmp_path: Path) -> None:
    """A producer whose clock is off still delays from the backend's time."""
    url = backend_url("redis", tmp_path)
    app = App(url, clock=ManualClock(int(time.time() * 1000) + skew_ms))

    @app.task
    def later() -> None: ...

    handle = later.schedule(delay=timedelta(seconds=5))
    stored = app.backend.messages.get(str(handle))
    assert stored is not None
    assert abs(stored.envelope.due_ms - (app.backend.now_ms() + 5000)) < 500
    assert abs(app.backend_clock.offset_ms + skew_ms) < 500
    app.close()
