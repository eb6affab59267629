"""A worker paused with SIGSTOP past its leases, then resumed (SIGCONT): the message it
held runs again elsewhere, and when the paused worker wakes its ack is refused, so the
recurring chain it held does not fork. ``make test`` runs it on SQLite and a Redis
Cluster, ``make faults`` on every backend."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support.backends import BACKEND_NAMES, PAIR_NAMES, backend_url
from tests.support.helpers import start_record_worker, stop_workers, wait_until
from tickwork.scheduler import App
from tickwork.triggers import Repeating

FULL = os.environ.get("TICKWORK_FAULTS_FULL") == "1"
MODULE = "tests.support.loop_tasks"

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend_name", BACKEND_NAMES if FULL else PAIR_NAMES)
def test_a_paused_workers_acks_are_refused_and_its_chain_does_not_fork(
    backend_name: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    from tests.support.loop_tasks import app as tasks_app
    from tests.support.loop_tasks import stall

    url = backend_url(backend_name, tmp_path)
    runs = tmp_path / "runs.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_RUNS": str(runs)}
    tasks_app.use_backend(url)
    stall.schedule(trigger=Repeating(interval=timedelta(milliseconds=200)), key="stall")
    tasks_app.close()
    app = App(url)
    paused = start_record_worker(env, tmp_path / "paused.log", MODULE)
    other: subprocess.Popen[bytes] | None = None
    try:
        assert wait_until(lambda: len(_lines(runs)) >= 3, 60), "the chain never ran"
        for _ in range(40):  # pause it while it holds the chain's lease
            paused.send_signal(signal.SIGSTOP)
            assert wait_until(lambda: _stopped(paused.pid), 5), "SIGSTOP did not stop it"
            if app.backend.queues.stats("default")[0].in_flight > 0 and _writable(url):
                break
            paused.send_signal(signal.SIGCONT)
            time.sleep(0.05)
        else:
            pytest.fail("the worker never held a lease when paused")
        stopped_at = len(_lines(runs))
        other = start_record_worker(env, tmp_path / "other.log", MODULE)
        assert wait_until(lambda: len(_lines(runs)) >= stopped_at + 5, 60), "no takeover"
        paused.send_signal(signal.SIGCONT)  # it wakes holding a lease that ran out: its
        resumed = len(_lines(runs))  # ack (or its heartbeat's extend) is refused
        assert wait_until(lambda: len(_lines(runs)) >= resumed + 10, 60), "the chain stopped"
    finally:
        stop_workers([w for w in (paused, other) if w is not None])
    assert [m.envelope.key for m in app.backend.messages.keyed("default")] == ["stall"], (
        "it goes on"
    )
    # a fork would run the chain's occurrences (ids chain.N) twice from then on
    per_occurrence = Counter(_occurrence(line.split()[1]) for line in _lines(runs))
    last = sorted(per_occurrence)[-10:]
    assert all(per_occurrence[n] == 1 for n in last), f"two chains run: {per_occurrence}"
    assert max(per_occurrence.values()) <= 2, "an occurrence runs at most once more"
    app.cancel(key="stall")
    app.close()


def _stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` has stopped: a signal stops the threads of a
    process one by one, and one still running could begin a write transaction after
    ``_writable`` looked (CI saw it: the other worker then waited on SQLite's lock)."""
    tasks = Path(f"/proc/{pid}/task")
    states = []
    for task in tasks.iterdir():
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:
            continue  # the thread ended
        states.append(stat.rsplit(")", 1)[1].split()[0])
    return bool(states) and all(state in ("T", "t") for state in states)


def _writable(url: str) -> bool:
    """Whether another process can write: on SQLite a process stopped inside its write
    transaction holds the file's one write lock until it resumes or dies (SQLite has one
    writer; docs/reliability.md), so the test pauses the worker between transactions."""
    if not url.startswith("sqlite:///"):
        return True
    db = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=0.2, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        db.close()


def _lines(runs: Path) -> list[str]:
    return runs.read_text().splitlines() if runs.exists() else []


def _occurrence(message_id: str) -> int:
    """The occurrence number in a chain's message id (``chain.N``; the first is ``chain``)."""
    return int(message_id.rsplit(".", 1)[1]) if "." in message_id else 0
