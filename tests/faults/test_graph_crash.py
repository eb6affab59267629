"""Fault test: SIGKILL workers again and again while they run a 1,000-step graph (10
steps a level over 100 levels, each after two steps of the level before, then a last
step after the whole last level): every step runs to success once, a step runs twice
only when a killed worker ran it first, and the last step runs exactly once with every
result it waits for."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest

from tests.faults.killing import KillLoop, idle, share
from tests.faults.sizes import sized
from tests.support.backends import BACKEND_NAMES, backend_url
from tests.support.gate import recorded
from tests.support.graphs import mesh, mesh_name
from tests.support.helpers import wait_until
from tickwork.scheduler import App, after, graph

WIDTH, DEPTH = 10, sized(100, 20)
N = WIDTH * DEPTH
MODULE = "tests.support.graph_tasks"


@pytest.mark.parametrize("backend_name", BACKEND_NAMES)
def test_sigkilled_workers_run_each_step_once_and_the_last_exactly_once(
    backend_name: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    from tests.support.graph_tasks import app as tasks_app
    from tests.support.graph_tasks import last, step

    url = backend_url(backend_name, tmp_path)
    done, callbacks = tmp_path / "done.txt", tmp_path / "callbacks.jsonl"
    env = {
        **clean_env,
        "TICKWORK_BACKEND": url,
        "TICKWORK_TEST_DONE": str(done),
        "TICKWORK_TEST_CALLBACKS": str(callbacks),
    }
    tasks_app.use_backend(url)
    steps = mesh(WIDTH, DEPTH, lambda level, place: step.si(level * WIDTH + place))
    ends = [mesh_name(DEPTH - 1, place) for place in range(WIDTH)]
    steps["last"] = after(ends, last.s())
    handle = tasks_app.enqueue(graph(steps))
    tasks_app.close()
    app = App(url)
    loop = KillLoop(env, tmp_path, MODULE)
    killed = loop.killed
    try:
        opens = partial(share, N, 6)
        loop.rounds(4, lambda round_: recorded(done) >= opens(round_), opens)
        assert len(_runs(done)) < N, "the kills must land while steps still run"
        loop.start_last()
        assert wait_until(lambda: callbacks.exists(), 240), "the last step never ran"
        assert wait_until(lambda: app.batches.workflow(handle).state == "succeeded", 30)
        assert wait_until(lambda: idle(app), 60)  # killed leases expired and redelivered
    finally:
        loop.stop()
    runs = _runs(done)
    assert set(runs) == set(range(N)), "every step ran"
    for number, pids in runs.items():
        # a step ran more than once only because a killed worker ran it (its run was not
        # acked): every run but one is a killed worker's
        assert len([pid for pid in pids if pid not in killed]) <= 1, (number, pids)
    reruns = sum(len(pids) - 1 for pids in runs.values())
    lines = callbacks.read_text().splitlines()
    assert len(lines) == 1, f"the last step ran {len(lines)} times"
    expected = {mesh_name(DEPTH - 1, p): (DEPTH - 1) * WIDTH + p for p in range(WIDTH)}
    assert json.loads(lines[0]) == expected
    print(f"{backend_name}: {N + 1} steps, {len(killed)} workers killed, {reruns} reruns")
    app.close()


def _runs(done: Path) -> dict[int, list[int]]:
    """Each step's runs: the pid of each worker that ran it, in order."""
    runs: dict[int, list[int]] = {}
    if done.exists():
        for line in done.read_text().splitlines():
            number, pid = line.split()
            runs.setdefault(int(number), []).append(int(pid))
    return runs
