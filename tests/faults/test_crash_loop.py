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
from pathlib import Path

import pytest

from tests.faults.checker import Verdict, check
from tests.faults.sizes import FULL
from tests.faults.workload import MODULE, chains_fired, enqueue_workload, jobs_done, mark, stop
from tests.support.backends import BACKEND_NAMES, backend_url
from tests.support.helpers import start_record_worker, wait_until
from tickwork.workers.intake.flow import LENT_PER_PERMIT

NOW, DELAYED, KEYED = (3000, 700, 300) if FULL else (300, 100, 60)
SECONDS, KILL_EVERY = (60.0, 3.0) if FULL else (12.0, 2.0)
WORKERS, CONCURRENCY = 4, 4

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend_name", BACKEND_NAMES)
def test_crash_loop_loses_nothing_and_runs_no_cancelled_key(
    backend_name: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    url = backend_url(backend_name, tmp_path)
    runs = tmp_path / "runs.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_RUNS": str(runs)}
    work = enqueue_workload(url, NOW, DELAYED, KEYED, SECONDS / 2)
    must_run, cancelled, chains = work.must_run, work.cancelled, work.chains
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
            mark(runs, kills)  # the checker counts fires after the last kill
            workers.append(_start(env, tmp_path, WORKERS + kills))
        elapsed = time.monotonic() - started
        # no more kills: the survivors finish what is due (killed leases last 2 s)
        assert wait_until(lambda: jobs_done(runs) >= len(must_run), 120), "stalled"
        # every chain fires again after the last kill; then the killed leases have run out
        # (2 s), so a redelivery would show
        assert wait_until(lambda: chains_fired(runs, chains), 120), "a chain stopped"
    finally:
        stop(url, workers)
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


def _start(env: dict[str, str], tmp_path: Path, n: int) -> subprocess.Popen[bytes]:
    return start_record_worker(env, tmp_path / f"worker-{n}.log", MODULE)
