"""PostgreSQL faults: kill -9 the server mid-run (``synchronous_commit=on``) and restart
it; drop the workers' connections again and again mid-claim and mid-ack; SIGKILL a worker
inside its transactions. Nothing acknowledged is lost, nothing is acked twice, a killed
worker holds nothing, and workers reconnect by themselves."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import psycopg
import pytest

from tests.support.backends import Servers, backend_url
from tests.support.helpers import completed, enqueue_records, start_record_worker, wait_until
from tests.support.postgres_servers import PostgresServer
from tickwork.scheduler import open_backend
from tickwork.workers.intake.flow import LENT_PER_PERMIT

pytestmark = pytest.mark.slow

N = 2000
CONCURRENCY = 4  # start_record_worker's
#: what one worker may hold at once: its permits' claims and the runs awaiting their ack
HELD = CONCURRENCY * 3 * (1 + LENT_PER_PERMIT)


def _settled(url: str, total: int) -> None:
    """Nothing is left waiting, running or poisoned, and each of ``total`` messages was
    acked once (a second ack of one, after a lost reply, is refused by its lease token)."""
    backend = open_backend(url)
    try:
        assert wait_until(lambda: backend.queues.stats("default")[0].in_flight == 0, 30)
        stats = backend.queues.stats("default")[0]
        assert (stats.ready, stats.scheduled, stats.poison) == (0, 0, 0), stats
        assert stats.counters["acked"] == total, stats.counters
    finally:
        backend.close()


def _stop(worker: subprocess.Popen[bytes] | None) -> None:
    if worker is not None and worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)


def test_kill_9_the_server_mid_run_loses_nothing(tmp_path: Path, clean_env: dict[str, str]) -> None:
    server = PostgresServer()  # a server of this test's own: it is killed
    url = f"{server.url}?schema=durable"
    done = tmp_path / "done.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_DONE": str(done)}
    worker: subprocess.Popen[bytes] | None = None
    try:
        enqueue_records(url, range(N))
        worker = start_record_worker(env, tmp_path / "worker.log")
        assert wait_until(lambda: sum(completed(done).values()) >= N // 3, 60), "worker stalled"
        server.kill()
        before_restart = completed(done)
        assert len(before_restart) < N, "the kill must land mid-run"
        time.sleep(1.0)
        server.start()
        enqueue_records(url, range(N, N + 500))  # the restarted server takes new work at once
        assert wait_until(lambda: len(completed(done)) == N + 500, 120), (
            f"lost messages: {N + 500 - len(completed(done))} never ran; "
            f"log: {(tmp_path / 'worker.log').read_text()[-2000:]}"
        )
        assert worker.poll() is None, "the worker must survive the outage"
        _settled(url, N + 500)
    finally:
        _stop(worker)
        server.stop()
    runs = completed(done)
    assert set(runs) == set(range(N + 500))
    duplicates = sum(runs.values()) - (N + 500)
    # only what the worker held when the server died may run again (acks are durable):
    # the outage (a restart with crash recovery) outlasts the tasks' 2 s leases, so all
    # it held may, at most its permits and the finished runs that lent theirs back
    assert duplicates <= HELD, (duplicates, len(before_restart))


def test_dropped_connections_mid_claim_and_ack_lose_nothing(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """Every 300 ms (30 times) the server ends every connection of the worker, as a proxy
    or a failover would: a claim or an ack in flight fails, is retried on a new
    connection, or its lease runs out and the message runs again; none is lost or acked
    twice."""
    url = backend_url("postgres", tmp_path)
    done = tmp_path / "done.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_DONE": str(done)}
    worker: subprocess.Popen[bytes] | None = None
    dropped = 0
    enqueue_records(url, range(N))
    try:
        worker = start_record_worker(env, tmp_path / "worker.log")
        # its start first (a connection ended while it opens its store is a start that
        # fails, not what this is about): once it ran something, it is connected
        assert wait_until(lambda: len(completed(done)) > 0 or worker.poll() is not None, 120)
        with psycopg.connect(Servers.postgres_url(), autocommit=True) as admin:
            while len(completed(done)) < N and dropped < 30:
                assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-2000:]
                time.sleep(0.3)
                (ended,) = admin.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = 'tickwork' AND pid != pg_backend_pid() "
                    "AND state IS NOT NULL",
                ).fetchone() or (0,)
                dropped += int(ended > 0)
        assert wait_until(lambda: len(completed(done)) == N, 120), (
            f"lost: {N - len(completed(done))}; log: "
            f"{(tmp_path / 'worker.log').read_text()[-2000:]}"
        )
        assert worker.poll() is None, "the worker must survive dropped connections"
        assert dropped >= 3, "connections were dropped while it ran"
        _settled(url, N)
    finally:
        _stop(worker)
    runs = completed(done)
    assert set(runs) == set(range(N))
    twice = [n for n, count in runs.items() if count > 1]
    # a run whose ack was cut off may run again after its lease: at most what was held
    assert len(twice) <= HELD * dropped, (len(twice), dropped)
    print(f"dropped {dropped} times; {len(twice)} ran twice")


def test_a_worker_killed_inside_its_transactions_holds_nothing(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """SIGKILL a busy worker: the server ends its sessions and their transactions (no
    lock, no 'idle in transaction' left), and a second worker runs everything."""
    url = backend_url("postgres", tmp_path)
    done = tmp_path / "done.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_DONE": str(done)}
    enqueue_records(url, range(N))
    first = start_record_worker(env, tmp_path / "first.log")
    second: subprocess.Popen[bytes] | None = None
    try:
        assert wait_until(lambda: len(completed(done)) >= N // 4, 60), "worker stalled"
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        with psycopg.connect(Servers.postgres_url(), autocommit=True) as admin:

            def sessions_left() -> int:
                row = admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tickwork' "
                    "AND state = 'idle in transaction'"
                ).fetchone()
                return 0 if row is None else int(row[0])

            assert wait_until(lambda: sessions_left() == 0, 10), "a dead worker holds a transaction"
        second = start_record_worker(env, tmp_path / "second.log")
        assert wait_until(lambda: len(completed(done)) == N, 120), "lost messages"
        _settled(url, N)
    finally:
        _stop(second)
    assert set(completed(done)) == set(range(N))
