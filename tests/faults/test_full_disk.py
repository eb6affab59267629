"""A store's disk that fills while a worker runs (a small tmpfs the test mounts: root
only, else skipped with the reason): SQLite's file on it, or a PostgreSQL database whose
tablespace is on it. An enqueue is refused whole with one clear error (``BackendFull``)
and writes nothing; the worker keeps what it holds, backs off without dying, and
finishes everything once space returns; nothing is lost, and what ran twice is at most
what it held. (PostgreSQL's write-ahead log on a full disk is another story: the server
stops itself, which the clients meet as a server gone: ``test_postgres_faults.py``.)"""

from __future__ import annotations

import errno
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from tests.faults.sizes import sized
from tests.support.backends import Servers
from tests.support.helpers import (
    completed,
    enqueue_records,
    start_record_worker,
    stop_workers,
    wait_until,
)
from tests.support.postgres_servers import PostgresServer
from tickwork.errors import BackendFull, BackendUnavailable
from tickwork.workers.intake.flow import LENT_PER_PERMIT

N = sized(2000, 400)
CONCURRENCY = 4

pytestmark = pytest.mark.slow


@contextmanager
def small_disk(path: Path, size: str, owner: str | None = None) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` for the block (its root owned by
    ``owner``, when given)."""
    path.mkdir(exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {mounted.stderr.strip()}")
    if owner is not None:
        shutil.chown(path, owner, owner)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path) -> Path:
    """Write a file on ``disk`` until it is full; the file. Unbuffered: a buffered file
    that met the full disk would try its rest again as it closes, and raise there."""
    filler = disk / "filler"
    chunk = b"\0" * 65536
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(chunk)
        except OSError as err:
            assert err.errno == errno.ENOSPC, err
    return filler


def test_sqlite_on_a_full_disk_refuses_writes_whole_and_resumes_when_space_returns(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    with small_disk(tmp_path / "disk", "32m") as disk:
        url = f"sqlite:///{disk / 'tickwork.db'}"
        _fill_while_running(url, disk, tmp_path, clean_env, "disk holding the SQLite database")


def test_postgres_on_a_full_disk_refuses_writes_whole_and_resumes_when_space_returns(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    server = Servers.postgres_url()
    name = f"full{uuid.uuid4().hex[:10]}"
    # a folder PostgreSQL's own user can reach (pytest's folders are root's alone)
    place = Path(tempfile.mkdtemp(prefix="tickwork-pgdisk-"))
    place.chmod(0o755)
    admin = psycopg.connect(server, autocommit=True)
    try:
        with small_disk(place, "48m", owner="postgres") as disk:
            admin.execute(f"CREATE TABLESPACE {name} LOCATION '{disk}'")
            admin.execute(f"CREATE DATABASE {name} TABLESPACE {name}")
            try:
                url = f"{server.rsplit('/', 1)[0]}/{name}"
                _fill_while_running(url, disk, tmp_path, clean_env, "PostgreSQL server's disk")
            finally:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                admin.execute(f"DROP TABLESPACE IF EXISTS {name}")
    finally:
        admin.close()
        shutil.rmtree(place, ignore_errors=True)


def test_postgres_whose_write_ahead_log_fills_stops_and_loses_nothing_once_restarted(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """A producer writes on while the log's disk is full: the server stops itself, the
    producer's write is refused, the worker waits; once the operator frees space and
    starts the server, every acknowledged message runs."""
    place = Path(tempfile.mkdtemp(prefix="tickwork-pgwal-"))
    place.chmod(0o755)
    done = tmp_path / "done.txt"
    log = tmp_path / "worker.log"
    worker: subprocess.Popen[bytes] | None = None
    with small_disk(place, "24m", owner="postgres") as disk:
        # a server of the test's own, its log in 1 MB segments made anew each time
        server = PostgresServer(
            "min_wal_size=2MB", "max_wal_size=8MB", "wal_recycle=off", wal_dir=disk / "wal"
        )
        try:
            env = {**clean_env, "TICKWORK_BACKEND": server.url, "TICKWORK_TEST_DONE": str(done)}
            enqueue_records(server.url, range(N))
            worker = start_record_worker(env, log, concurrency=CONCURRENCY)
            assert wait_until(lambda: len(completed(done)) >= N // 4, 60), "the worker stalled"
            filler = fill(disk)
            accepted, refused, error = _write_until_refused(server.url, N)
            stopped = server.process
            assert stopped is not None
            assert wait_until(lambda: stopped.poll() is not None, 60), "it did not stop itself"
            assert "No space left on device" in (server.folder / "server.log").read_text()
            stalled = len(completed(done))
            assert wait_until(lambda: "PostgreSQL is unavailable" in log.read_text(), 30)
            assert worker.poll() is None, "the worker died with its server"
            filler.unlink()  # the operator frees space and starts the server again
            server.start()
            total = N + len(accepted)
            assert wait_until(lambda: len(set(completed(done)) - refused) == total, 120), (
                "it did not resume"
            )
        finally:
            if worker is not None:
                stop_workers([worker])
            server.stop()
    shutil.rmtree(place, ignore_errors=True)
    runs = completed(done)
    assert set(runs) - refused == set(range(N)) | accepted, "an acknowledged message was lost"
    duplicates = sum(runs.values()) - len(runs)
    held = CONCURRENCY * 3 * (1 + LENT_PER_PERMIT)
    assert duplicates <= held, f"{duplicates} ran twice: more than the worker held"
    print(
        f"\nfull write-ahead log: {stalled} of {N} done when it filled; {len(accepted)} "
        f"enqueued on the full disk before one of {len(refused)} was refused; "
        f"{len(set(runs) & refused)} of those ran; {duplicates} ran twice; {error}"
    )


def _write_until_refused(url: str, first: int) -> tuple[set[int], set[int], str]:
    """Enqueue batches of records numbered from ``first`` until one is refused (within
    a minute): the numbers acknowledged, those of the refused batch (a write whose
    connection the server's crash cut may have committed: they may run, once), and the
    error's words."""
    from tests.support.crash_tasks import app, record

    app.use_backend(url)
    accepted: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            batch = range(first + len(accepted), first + len(accepted) + 200)
            try:
                app.enqueue_many(record.call(n) for n in batch)
            except (BackendFull, BackendUnavailable) as err:
                return accepted, set(batch), f"{type(err).__name__}: {err}"
            accepted.update(batch)
    finally:
        app.close()
    raise AssertionError("no write was refused on the full disk")


def _fill_while_running(
    url: str, disk: Path, tmp_path: Path, clean_env: dict[str, str], cause: str
) -> None:
    """Records run by a worker on ``url``; ``disk`` fills a quarter of the way through,
    a producer writes on until its enqueue is refused (a store reuses the room its
    deleted rows left first), and the disk is given room again once the worker met it."""
    from tests.support.crash_tasks import app

    done = tmp_path / "done.txt"  # on the roomy disk: what ran is always recorded
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_DONE": str(done)}
    enqueue_records(url, range(N))
    worker = start_record_worker(env, tmp_path / "worker.log", concurrency=CONCURRENCY)
    try:
        assert wait_until(lambda: len(completed(done)) >= N // 4, 60), "the worker stalled"
        filler = fill(disk)
        accepted, refused, error = _write_until_refused(url, N)
        assert re.match(f"BackendFull: the {cause}.* is full", error), error
        log = tmp_path / "worker.log"
        assert wait_until(lambda: cause in log.read_text(), 30), "the worker never met it"
        assert worker.poll() is None, "the worker died of a full disk"
        stalled = len(completed(done))
        assert stalled < N, "the disk filled too late to matter"
        filler.unlink()
        total = N + len(accepted)
        assert wait_until(lambda: len(completed(done)) == total, 120), "it did not resume"
        app.use_backend(url)
        try:
            assert wait_until(lambda: app.backend.queues.stats("default")[0].in_flight == 0, 30)
        finally:
            app.close()
    finally:
        stop_workers([worker])
    runs = completed(done)
    assert set(runs) == set(range(N)) | accepted, "lost, or the refused enqueue wrote some"
    duplicates = sum(runs.values()) - total
    held = CONCURRENCY * 3 * (1 + LENT_PER_PERMIT)  # its permits and the runs lent back
    assert duplicates <= held, f"{duplicates} ran twice: more than the worker held"
    print(
        f"\nfull disk: {stalled} of {N} done when it filled; {len(accepted)} enqueued on "
        f"the full disk before one of {len(refused)} was refused; {duplicates} ran twice"
    )
