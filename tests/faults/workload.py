"""The crash loop's workload, shared by the fault tests that count with the checker
(``checker.py``): one-offs due now, delayed ones, keyed ones of which every other one is
cancelled, a repeating chain and a per-second cron chain, all of
``tests.support.loop_tasks`` (each run appends a line to ``TICKWORK_TEST_RUNS``)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from tests.support.helpers import stop_workers
from tickwork.scheduler import App
from tickwork.triggers import Cron, Repeating

MODULE = "tests.support.loop_tasks"
CHAIN_KEYS = ("rep", "cron")


@dataclass(frozen=True)
class Workload:
    """What was enqueued: the one-offs that must run, those cancelled, the chains (name
    -> the prefix of their message ids)."""

    must_run: set[int]
    cancelled: set[int]
    chains: dict[str, str]


def enqueue_workload(url: str, now: int, delayed: int, keyed: int, spread_s: float) -> Workload:
    """``now`` one-offs due now, ``delayed`` due over ``spread_s``, ``keyed`` due from 3 s
    on over ``spread_s`` of which every other one is cancelled at once, a chain repeating
    every 250 ms and a per-second cron chain."""
    from tests.support.loop_tasks import app, job, tick

    app.use_backend(url)
    report = app.enqueue_many(job.call(n) for n in range(now))
    assert report.enqueued == now
    for n in range(now, now + delayed):
        job.schedule(args=(n,), delay=timedelta(seconds=spread_s * (n - now) / delayed))
    keyed_numbers = range(now + delayed, now + delayed + keyed)
    for n in keyed_numbers:
        delay = timedelta(seconds=3 + spread_s * (n - keyed_numbers.start) / keyed)
        job.schedule(args=(n,), delay=delay, key=f"k{n}")
    cancelled = {n for n in keyed_numbers if n % 2 == 0}
    for n in cancelled:
        assert app.cancel(key=f"k{n}"), n
    must_run = set(range(now + delayed + keyed)) - cancelled
    rep = tick.schedule(trigger=Repeating(interval=timedelta(milliseconds=250)), key="rep")
    cron = tick.schedule(trigger=Cron("* * * * * ?"), key="cron")
    app.close()
    return Workload(
        must_run, cancelled, {"repeating": rep.split(".")[0], "cron": cron.split(".")[0]}
    )


def jobs_done(runs: Path) -> int:
    """How many distinct one-offs ran."""
    if not runs.exists():
        return 0
    return len({line for line in runs.read_text().splitlines() if line.startswith("job ")})


def chains_fired(runs: Path, chains: dict[str, str]) -> bool:
    """Whether every chain ran an occurrence (twice: the first may have been due before
    the mark) after the last ``kill`` line (the mark a test writes at each fault)."""
    lines = runs.read_text().splitlines()
    kills = [i for i, line in enumerate(lines) if line.startswith("kill ")]
    after = lines[kills[-1] + 1 :] if kills else lines
    return all(sum(line.startswith(f"tick {p}") for line in after) >= 2 for p in chains.values())


def mark(runs: Path, n: int) -> None:
    """Write the ``kill N`` mark: the checker counts the chains' fires after the last."""
    with runs.open("a") as log:
        log.write(f"kill {n}\n")


def stop(url: str, workers: list[subprocess.Popen[bytes]]) -> None:
    """Cancel the chains, then stop the workers."""
    app = App(url)
    try:
        for key in CHAIN_KEYS:
            app.cancel(key=key)
    finally:
        app.close()
    stop_workers(workers)
