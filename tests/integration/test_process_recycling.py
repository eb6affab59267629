"""Worker recycling (issue 54, 4): ``tickwork worker --pool process --max-tasks-per-child
N`` replaces a child after N messages, ``--max-memory-per-child MIB`` once a message
leaves it over that much resident memory; no message is lost or run twice for it. Run
the user's way: the installed console script, from another directory."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections import Counter
from pathlib import Path
from types import ModuleType

from tests.support.served import run_tickwork

ROOT = Path(__file__).resolve().parents[2]

LEAKY = """
    import os
    from pathlib import Path

    from tickwork import App

    app = App("sqlite:///{data}/leaky.db")
    RUNS = Path("{runs}")
    KEPT = []  # what a leaking handler never lets go of


    @app.task
    def work(i: int) -> None:
        with open(RUNS, "a") as runs:
            runs.write(f"{{i}} {{os.getpid()}}\\n")


    @app.task
    def leak(i: int, mib: int) -> None:
        KEPT.append(bytearray(mib * 1024 * 1024))
        work(i)
"""


def _leaky(tmp_path: Path) -> tuple[ModuleType, Path, dict[str, str]]:
    app_dir, data, cwd = tmp_path / "app", tmp_path / "data", tmp_path / "cwd"
    for folder in (app_dir, data, cwd):
        folder.mkdir()
    runs = tmp_path / "runs.txt"
    (app_dir / "leaky.py").write_text(textwrap.dedent(LEAKY).format(data=data, runs=runs))
    sys.path.insert(0, str(app_dir))  # the producer: this test, with the same module
    sys.modules.pop("leaky", None)
    module = importlib.import_module("leaky")
    sys.path.remove(str(app_dir))
    return module, runs, {"PYTHONPATH": f"{app_dir}:{ROOT}"}


def _pids(runs: Path) -> tuple[Counter[int], Counter[int]]:
    """How many times each message ran, and how many messages each process ran."""
    lines = [line.split() for line in runs.read_text().splitlines()]
    return Counter(int(i) for i, _ in lines), Counter(int(pid) for _, pid in lines)


def test_a_child_is_replaced_after_its_tasks_and_nothing_is_lost(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    module, runs, paths = _leaky(tmp_path)
    for i in range(7):
        module.work.delay(i)
    worker = run_tickwork(
        tmp_path / "cwd",
        {**clean_env, **paths},
        *("worker", "-A", "leaky", "--pool", "process", "-c", "1", "--burst"),
        *("--max-tasks-per-child", "2", "--log-level", "info"),
    )
    assert worker.returncode == 0, worker.stderr
    each, per_process = _pids(runs)
    assert each == Counter({i: 1 for i in range(7)}), "every message ran once"
    assert max(per_process.values()) == 2 and len(per_process) == 4, per_process
    assert worker.stderr.count("recycled a pool process after 2 jobs") >= 3
    module.app.close()


def test_a_child_over_its_memory_bound_is_replaced(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    module, runs, paths = _leaky(tmp_path)
    module.work.delay(0)
    module.leak.delay(1, 64)  # leaves its child 64 MiB heavier
    module.work.delay(2)
    module.work.delay(3)
    worker = run_tickwork(
        tmp_path / "cwd",
        {**clean_env, **paths},
        *("worker", "-A", "leaky", "--pool", "process", "-c", "1", "--burst"),
        *("--max-memory-per-child", "60", "--log-level", "info"),
    )
    assert worker.returncode == 0, worker.stderr
    ran = [
        (int(i), int(pid)) for i, pid in (line.split() for line in runs.read_text().splitlines())
    ]
    assert sorted(i for i, _ in ran) == [0, 1, 2, 3], "every message ran once"
    leaked = [i for i, _ in ran].index(1)
    before, after = {pid for _, pid in ran[: leaked + 1]}, {pid for _, pid in ran[leaked + 1 :]}
    assert len(before) == 1, "a child under the bound keeps running"
    assert len(after) <= 1 and not before & after, "replaced once, after the leak"
    assert "recycled a pool process using" in worker.stderr
    module.app.close()


def test_a_worker_past_its_memory_bound_drains_and_exits_to_be_restarted(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """``--max-memory``: the worker whose handlers leaked past the bound stops claiming,
    finishes what it holds and exits with status 1; what it ran is acked, the rest stays
    stored for the next worker."""
    module, runs, paths = _leaky(tmp_path)
    module.leak.delay(0, 400)  # the thread pool's handler leaves the worker 400 MiB heavier
    worker = run_tickwork(
        tmp_path / "cwd",
        {**clean_env, **paths},
        *("worker", "-A", "leaky", "-c", "1", "--max-memory", "300", "--duration", "60"),
    )
    assert worker.returncode == 1, worker.stderr
    assert "MiB resident, over --max-memory 300 MiB: draining and exiting" in worker.stderr
    assert _pids(runs)[0] == Counter({0: 1})
    stats = {s.queue: s for s in module.app.backend.queues.stats()}
    assert stats["default"].ready + stats["default"].in_flight == 0, "the leak's run was acked"
    module.work.delay(1)
    again = run_tickwork(
        tmp_path / "cwd", {**clean_env, **paths}, "worker", "-A", "leaky", "--burst"
    )
    assert again.returncode == 0 and _pids(runs)[0] == Counter({0: 1, 1: 1})
    module.app.close()
