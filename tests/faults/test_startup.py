"""Ten workers start together, each installing the same two periodic schedules at start:
each schedule is installed once (one chain: every message id of a schedule shares its
chain's id) and each occurrence fires once. ``make test`` runs it on SQLite, a Redis
Cluster and Cassandra (whose install race it found: ``key_claims.py``), ``make faults``
on every backend."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from tests.support.backends import BACKEND_NAMES, PAIR_NAMES, backend_url
from tests.support.helpers import start_record_worker, stop_workers, wait_until
from tickwork.scheduler import App

FULL = os.environ.get("TICKWORK_FAULTS_FULL") == "1"
MODULE = "tests.support.startup_tasks"
WORKERS = 10
FIRES = 8 if FULL else 4  # runs of the per-second schedule to wait for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend_name", BACKEND_NAMES if FULL else [*PAIR_NAMES, "cassandra"])
def test_ten_workers_starting_together_install_each_schedule_once(
    backend_name: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    url = backend_url(backend_name, tmp_path)
    runs = tmp_path / "runs.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_RUNS": str(runs)}
    workers = [start_record_worker(env, tmp_path / f"w{n}.log", MODULE) for n in range(WORKERS)]
    try:
        assert wait_until(lambda: _fired(runs)["each-second"] >= FIRES, 120), _fired(runs)
    finally:
        stop_workers(workers)
    app = App(url)
    try:
        assert sorted(m.envelope.key or "" for m in app.backend.messages.keyed("default")) == [
            "each-second",
            "often",
        ]
    finally:
        app.close()
    ids = [line.split()[1] for line in _lines(runs)]
    twice = [i for i, count in Counter(ids).items() if count > 1]
    assert twice == [], f"occurrences fired twice: {twice}"
    for name in ("often", "each-second"):
        chains = {line.split()[1].split(".")[0] for line in _lines(runs) if line.startswith(name)}
        assert len(chains) == 1, f"{name} was installed as {len(chains)} schedules: {chains}"


def _fired(runs: Path) -> Counter[str]:
    return Counter(line.split()[0] for line in _lines(runs))


def _lines(runs: Path) -> list[str]:
    return runs.read_text().splitlines() if runs.exists() else []
