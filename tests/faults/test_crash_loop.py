"""The crash loop, on every backend: four worker processes, one SIGKILLed and replaced
every few seconds while they run messages due now, delayed ones, keyed ones (half of them
cancelled before they are due), a repeating chain and a per-second cron chain. The
checker (``checker.py``, in the style of Jepsen's queue tests) then counts what was lost
(must be 0), what ran that was cancelled (must be 0), and what ran twice (must stay
within what the killed workers held).

``make test`` runs a bounded loop (12 s) on every backend; ``make faults``
sets ``TICKWORK_FAULTS_FULL=1`` (every backend, 60 s, a kill every 3 s, 4,000 messages)
and ``TICKWORK_FAULTS_OUT`` (a JSON line per run, for ``docs/reliability.md``)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest

from tests.faults.checker import Verdict, check
from tests.faults.sizes import FULL
from tests.support.backends import BACKEND_NAMES, backend_url
from tests.support.helpers import start_record_worker, stop_workers, wait_until
from tickwork.scheduler import App
from tickwork.triggers import Cron, Repeating
from tickwork.workers.intake.flow import LENT_PER_PERMIT

NOW, DELAYED, KEYED = (3000, 700, 300) if FULL else (300, 100, 60)
SECONDS, KILL_EVERY = (60.0, 3.0) if FULL else (12.0, 2.0)
WORKERS, CONCURRENCY = 4, 4
MODULE = "tests.support.loop_tasks"

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend_name", BACKEND_NAMES)
def test_crash_loop_loses_nothing_and_runs_no_cancelled_key(
    backend_name: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    url = backend_url(backend_name, tmp_path)
    runs = tmp_path / "runs.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_RUNS": str(runs)}
    must_run, cancelled, chains = _enqueue(url)
    rng = random.Random(7)
    workers = [_start(env, tmp_path, i) for i in range(WORKERS)]
    kills, started = 0, time.monotonic()
    try:
        while time.monotonic() - started < SECONDS:
            time.sleep(KILL_EVERY)
            victim = workers.pop(rng.randrange(len(workers)))
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            kills += 1
            with runs.open("a") as log:  # the checker counts fires after the last kill
                log.write(f"kill {kills}\n")
            workers.append(_start(env, tmp_path, WORKERS + kills))
        elapsed = time.monotonic() - started
        # no more kills: the survivors finish what is due (killed leases last 2 s)
        assert wait_until(lambda: _jobs_done(runs) >= len(must_run), 120), "stalled"
        # every chain fires again after the last kill; then the killed leases have run out
        # (2 s), so a redelivery would show
        assert wait_until(lambda: _chains_fired(runs, chains), 120), "a chain stopped"
    finally:
        _stop(url, workers)
    verdict = check(
        runs,
        must_run,
        cancelled,
        chains,
        Verdict(
            backend_name,
            round(elapsed, 1),
            kills,
            len(must_run),
            len(cancelled),
            # a worker's permits and the finished runs that lent theirs back, per kill
            duplicate_bound=kills * CONCURRENCY * 3 * (1 + LENT_PER_PERMIT),
        ),
    )
    if out := os.environ.get("TICKWORK_FAULTS_OUT"):
        with open(out, "a") as results:
            results.write(json.dumps({"test": "crash_loop", **verdict.as_json()}) + "\n")
    assert verdict.lost == 0, verdict
    assert verdict.unexpected == 0, verdict
    assert verdict.ok, verdict  # includes: each chain fired after the last kill


def _enqueue(url: str) -> tuple[set[int], set[int], dict[str, str]]:
    """The workload: one-offs due now, delayed ones (due within the first half of the
    loop), keyed ones due within the loop of which every other one is cancelled now, and
    two recurring chains. Returns (must run, cancelled, chain name -> id prefix)."""
    from tests.support.loop_tasks import app, job, tick

    app.use_backend(url)
    report = app.enqueue_many(job.call(n) for n in range(NOW))
    assert report.enqueued == NOW
    spread = SECONDS / 2
    for n in range(NOW, NOW + DELAYED):
        job.schedule(args=(n,), delay=timedelta(seconds=spread * (n - NOW) / DELAYED))
    keyed = range(NOW + DELAYED, NOW + DELAYED + KEYED)
    for n in keyed:
        delay = timedelta(seconds=3 + spread * (n - keyed.start) / KEYED)
        job.schedule(args=(n,), delay=delay, key=f"k{n}")
    cancelled = {n for n in keyed if n % 2 == 0}
    for n in cancelled:
        assert app.cancel(key=f"k{n}"), n
    job_ids = set(range(NOW + DELAYED + KEYED)) - cancelled
    rep = tick.schedule(trigger=Repeating(interval=timedelta(milliseconds=250)), key="rep")
    cron = tick.schedule(trigger=Cron("* * * * * ?"), key="cron")
    chains = {"repeating": rep.split(".")[0], "cron": cron.split(".")[0]}
    app.close()
    return job_ids, cancelled, chains


def _start(env: dict[str, str], tmp_path: Path, n: int) -> subprocess.Popen[bytes]:
    return start_record_worker(env, tmp_path / f"worker-{n}.log", MODULE)


def _jobs_done(runs: Path) -> int:
    if not runs.exists():
        return 0
    return len({line for line in runs.read_text().splitlines() if line.startswith("job ")})


def _chains_fired(runs: Path, chains: dict[str, str]) -> bool:
    """Whether every chain ran an occurrence (twice: the first may have been due before
    the kill) after the last ``kill`` line."""
    lines = runs.read_text().splitlines()
    kills = [i for i, line in enumerate(lines) if line.startswith("kill ")]
    after = lines[kills[-1] + 1 :] if kills else lines
    return all(sum(line.startswith(f"tick {p}") for line in after) >= 2 for p in chains.values())


def _stop(url: str, workers: list[subprocess.Popen[bytes]]) -> None:
    app = App(url)
    try:
        for key in ("rep", "cron"):
            app.cancel(key=key)
    finally:
        app.close()
    stop_workers(workers)
