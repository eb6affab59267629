"""Faults of the network between workers and their store, through a TCP proxy
(``tests/support/fault_proxy.py``) on Redis, PostgreSQL and Cassandra: 100 ms each way
while workers run the crash loop's workload; one worker partitioned from the store past
its leases while another runs, then healed; every worker partitioned, then healed. SQLite
is a file (no network), and a Redis Cluster's client learns its nodes' addresses from the
cluster, so it would go round the proxy.

Each is counted with the crash loop's checker (``checker.py``): nothing lost, nothing
cancelled runs, and duplicates only from leases that ran out (the queue's
``redelivered`` counter bounds them). ``make test`` runs the small form on Redis and
PostgreSQL; ``make faults`` the full one on the three (``TICKWORK_FAULTS_FULL=1``: 4
workers, 5,000 messages, a 30 s partition of one worker and 60 s of all), writing a JSON
line per run to ``TICKWORK_FAULTS_OUT``."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.faults.checker import Verdict, check
from tests.faults.sizes import FULL, sized
from tests.faults.workload import (
    MODULE,
    Workload,
    chains_fired,
    enqueue_workload,
    jobs_done,
    mark,
    stop,
)
from tests.support.backends import backend_url
from tests.support.fault_proxy import FaultProxy
from tests.support.helpers import start_record_worker, stop_workers, wait_until
from tests.support.lossy_net import LossyNamespace, lossy_namespace
from tickwork.scheduler import App

#: Cassandra's claims take several round trips each (its shard lock, reads, a batch): at
#: 100 ms each way it runs about 4 messages a second, so only ``make faults`` takes it
NETWORKED = ["redis", "postgres", "cassandra"] if FULL else ["redis", "postgres"]
LATENCY_S = 0.1
LOSS_PERCENT = 5
NOW, DELAYED, KEYED = (3000, 1000, 1000) if FULL else (100, 30, 20)
SPREAD_S = sized(30, 5)
WORKERS = sized(4, 2)
PARTITION_S = sized(30, 3)  # a worker's leases here last 2 s
EVERYONE_PARTITION_S = sized(60, 5)

pytestmark = pytest.mark.slow


@contextmanager
def proxied(url: str, inside: LossyNamespace | None = None) -> Iterator[tuple[FaultProxy, str]]:
    """A proxy in front of the server ``url`` names, and the same URL through it (the
    proxy listening in the namespace ``inside``, when given)."""
    parts = urlsplit(url)
    credentials, _, address = parts.netloc.rpartition("@")
    host, _, port = address.rpartition(":")
    proxy = FaultProxy(host, int(port), inside.listener() if inside is not None else None)
    netloc = f"{credentials}@" if credentials else ""
    try:
        yield proxy, urlunsplit(parts._replace(netloc=f"{netloc}127.0.0.1:{proxy.port}"))
    finally:
        proxy.close()


@pytest.mark.parametrize("loss_percent", [0, LOSS_PERCENT])
@pytest.mark.parametrize("backend_name", NETWORKED)
def test_a_slow_network_loses_nothing_and_runs_nothing_twice(
    backend_name: str, loss_percent: int, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """100 ms each way; with loss, also 5% of packets dropped (TCP resends them) between
    the workers, in a network namespace of their own, and the proxy."""
    if loss_percent and os.geteuid() != 0:
        pytest.skip("a network namespace needs root")
    url = backend_url(backend_name, tmp_path)
    runs = tmp_path / "runs.txt"
    work = enqueue_workload(url, NOW, DELAYED, KEYED, SPREAD_S)
    with (
        lossy_namespace(loss_percent) if loss_percent else nullcontext() as inside,
        proxied(url, inside) as (proxy, through),
    ):
        proxy.delay(LATENCY_S)
        env = {**clean_env, "TICKWORK_BACKEND": through, "TICKWORK_TEST_RUNS": str(runs)}
        prefix = inside.prefix if inside is not None else []
        workers = [_worker(env, tmp_path, f"slow-{i}", prefix) for i in range(WORKERS)]
        try:
            assert wait_until(lambda: _due_now_done(runs) >= 1, 120), "nothing ran"
            started = time.monotonic()  # the workers are up (connecting takes round trips)
            assert wait_until(lambda: _due_now_done(runs) >= NOW, 300), "stalled"
            due_now_s = time.monotonic() - started
            assert wait_until(lambda: jobs_done(runs) >= len(work.must_run), 300), "stalled"
            mark(runs, 1)
            assert wait_until(lambda: chains_fired(runs, work.chains), 120), "a chain stopped"
        finally:
            stop(url, workers)
        dropped = inside.dropped() if inside is not None else 0
    assert dropped > 0 or not loss_percent, "the namespace dropped no packet"
    verdict = _count(backend_name, url, runs, work, due_now_s)
    _report(
        "lossy_network" if loss_percent else "slow_network",
        verdict,
        {
            "latency_ms": 1000 * LATENCY_S,
            "loss_percent": loss_percent,
            "packets_dropped": dropped,
            "workers": WORKERS,
            "due_now_per_s": round((NOW - 1) / due_now_s, 1),
        },
    )
    assert verdict.ok, verdict


@pytest.mark.parametrize("backend_name", NETWORKED)
def test_a_partitioned_worker_s_leases_are_taken_over_and_it_recovers(
    backend_name: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    url = backend_url(backend_name, tmp_path)
    runs = tmp_path / "runs.txt"
    work = enqueue_workload(url, NOW, DELAYED, KEYED, SPREAD_S + PARTITION_S)
    direct = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_RUNS": str(runs)}
    app = App(url)
    other: subprocess.Popen[bytes] | None = None
    with proxied(url) as (proxy, through):
        cut_off = _worker({**direct, "TICKWORK_BACKEND": through}, tmp_path, "cut-off")
        try:

            def holding() -> bool:
                return (
                    jobs_done(runs) >= 20 and app.backend.queues.stats("default")[0].in_flight > 0
                )

            assert wait_until(holding, 120), "no leases"
            started = time.monotonic()
            with proxy.partitioned_for(PARTITION_S):
                other = _worker(direct, tmp_path, "other")
                taken = jobs_done(runs)
                assert wait_until(lambda: jobs_done(runs) >= taken + 20, 120), "no takeover"
            partition_s = time.monotonic() - started
            mark(runs, 1)
            stop_workers([other])  # from now on only the healed worker runs
            assert cut_off.poll() is None, "the partitioned worker exited"
            assert wait_until(lambda: jobs_done(runs) >= len(work.must_run), 180), (
                "the healed worker did not carry on"
            )
            assert wait_until(lambda: chains_fired(runs, work.chains), 120), "a chain stopped"
        finally:
            stop(url, [w for w in (cut_off, other) if w is not None])
            app.close()
    verdict = _count(backend_name, url, runs, work, partition_s)
    _report("partitioned_worker", verdict, {"partition_s": round(partition_s, 1)})
    assert verdict.ok, verdict


@pytest.mark.parametrize("backend_name", NETWORKED)
def test_workers_cut_off_together_wait_quietly_and_resume_at_the_heal(
    backend_name: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """Every worker partitioned from the store: they wait without spinning (CPU
    measured), none exits, they resume within seconds of the heal, and each occurrence of
    the schedules that fell in the partition is in their ledger (run late, or recorded as
    its misfire policy left it)."""
    url = backend_url(backend_name, tmp_path)
    runs = tmp_path / "runs.txt"
    work = enqueue_workload(url, NOW, DELAYED, KEYED, SPREAD_S + EVERYONE_PARTITION_S)
    with proxied(url) as (proxy, through):
        env = {**clean_env, "TICKWORK_BACKEND": through, "TICKWORK_TEST_RUNS": str(runs)}
        workers = [_worker(env, tmp_path, f"all-{i}") for i in range(WORKERS)]
        try:
            assert wait_until(lambda: _due_now_done(runs) >= NOW, 120), "stalled"
            before = _cpu_s(workers)
            cut_at = time.time()
            with proxy.partitioned_for(EVERYONE_PARTITION_S):
                pass
            healed_at = time.time()
            cpu_share = (_cpu_s(workers) - before) / (healed_at - cut_at) / WORKERS
            lines_at_heal = len(_lines(runs))
            assert wait_until(lambda: len(_lines(runs)) > lines_at_heal, 120), "no resume"
            resumed_s = time.time() - healed_at
            assert all(w.poll() is None for w in workers), "a worker exited"
            mark(runs, 1)
            assert wait_until(lambda: chains_fired(runs, work.chains), 120), "a chain stopped"
            accounted = _occurrences_accounted(url, "rep", cut_at + 1, healed_at - 1)
            assert wait_until(lambda: jobs_done(runs) >= len(work.must_run), 300), "stalled"
        finally:
            stop(url, workers)
    verdict = _count(backend_name, url, runs, work, healed_at - cut_at)
    _report(
        "everyone_partitioned",
        verdict,
        {
            "partition_s": round(healed_at - cut_at, 1),
            "cpu_per_worker": round(cpu_share, 3),
            "resumed_s": round(resumed_s, 2),
            "rep_occurrences_in_ledger": accounted,
        },
    )
    assert verdict.ok, verdict
    assert cpu_share < 0.25, f"a cut-off worker used {cpu_share:.0%} of a core: a busy loop"
    expected = int((healed_at - cut_at - 2) / 0.25)
    assert accounted >= expected - 1, f"{accounted} of {expected} occurrences in the ledger"


def _cpu_s(workers: list[subprocess.Popen[bytes]]) -> float:
    """The CPU time the worker processes used so far, user and system (and their
    children's, a process pool's)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for worker in workers:
        fields = Path(f"/proc/{worker.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / ticks


def _occurrences_accounted(url: str, key: str, start: float, end: float) -> int:
    """How many occurrences of the 250 ms schedule ``key`` due between ``start`` and
    ``end`` (epoch seconds) its ledger accounts for, run or not."""
    app = App(url)
    try:
        entries = app.schedules.history(key)
    finally:
        app.close()
    accounted = 0
    for entry in entries:
        first = entry.scheduled_at.timestamp()
        last = entry.last_at.timestamp() if entry.last_at is not None else first
        step = (last - first) / (entry.count - 1) if entry.count > 1 else 0.0
        times = [first + k * step for k in range(entry.count)]
        accounted += sum(start <= t <= end for t in times)
    return accounted


def _lines(runs: Path) -> list[str]:
    return runs.read_text().splitlines() if runs.exists() else []


def _worker(
    env: dict[str, str], tmp_path: Path, name: str, prefix: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    return start_record_worker(env, tmp_path / f"{name}.log", MODULE, prefix=prefix)


def _due_now_done(runs: Path) -> int:
    """How many of the one-offs due at the start ran."""
    if not runs.exists():
        return 0
    lines = runs.read_text().splitlines()
    return len({line for line in lines if line.startswith("job ") and int(line[4:]) < NOW})


def _count(backend_name: str, url: str, runs: Path, work: Workload, seconds: float) -> Verdict:
    """The checker's verdict: a duplicate is allowed only for a lease that ran out."""
    app = App(url)
    try:
        redelivered = app.backend.queues.stats("default")[0].counters.get("redelivered", 0)
    finally:
        app.close()
    return check(
        runs,
        work.must_run,
        work.cancelled,
        work.chains,
        Verdict(
            backend_name,
            round(seconds, 1),
            0,
            len(work.must_run),
            len(work.cancelled),
            duplicate_bound=redelivered,
        ),
    )


def _report(test: str, verdict: Verdict, extra: dict[str, object]) -> None:
    line = {"test": test, **verdict.as_json(), **extra}
    print(f"\n{json.dumps(line)}")
    if out := os.environ.get("TICKWORK_FAULTS_OUT"):
        with open(out, "a") as results:
            results.write(json.dumps(line) + "\n")
