"""Fault test (issue 50): SIGKILL workers again and again while they run durable tasks of
many journaled steps: every run finishes with every step's value; a step's body ran
more than once only when a killed worker ran it before (inside it, or after it and
before its journal write), never after a live worker's run of it (whose journal write
happened); the journal of each run holds each step once, done."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from tests.faults.killing import KillLoop, share
from tests.faults.sizes import sized
from tests.support.backends import BACKEND_NAMES, backend_url
from tests.support.gate import recorded
from tests.support.helpers import wait_until
from tickwork.scheduler import App
from tickwork.scheduler.runs.journal import JournalStore

RUNS, STEPS, ROUNDS = sized(200, 30), sized(20, 10), sized(30, 5)
N = RUNS * STEPS
MODULE = "tests.support.durable_tasks"


@pytest.mark.parametrize("backend_name", BACKEND_NAMES)
def test_sigkilled_workers_never_run_a_journaled_step_again(
    backend_name: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    from tests.support.durable_tasks import app as tasks_app
    from tests.support.durable_tasks import order

    url = backend_url(backend_name, tmp_path)
    done = tmp_path / "done.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_DONE": str(done)}
    tasks_app.use_backend(url)
    handles = [order.delay(n, STEPS) for n in range(RUNS)]
    tasks_app.close()
    app = App(url)
    loop = KillLoop(env, tmp_path, MODULE)
    killed = loop.killed
    try:
        opens = partial(share, N, ROUNDS + 2)
        loop.rounds(ROUNDS, lambda round_: recorded(done) >= opens(round_), opens)
        assert len(_bodies(done)) < N, "the kills must land while steps still run"
        loop.start_last()
        finished = partial(_finished, app, [h.id for h in handles])
        assert wait_until(finished, 240), "not every run finished"
    finally:
        loop.stop()
    bodies = _bodies(done)
    assert set(bodies) == {(n, i) for n in range(RUNS) for i in range(STEPS)}, "every step ran"
    for step, pids in bodies.items():
        # every run of a body but the last was a killed worker's: a live worker's run was
        # journaled, and a journaled step never runs again
        assert all(pid in killed for pid in pids[:-1]), (step, pids)
    for n, handle in enumerate(handles):
        assert handle.result() == sum(n * 1000 + i for i in range(STEPS))
        journal = JournalStore(app.backend.results).read(handle.id)
        assert [(e.name, e.state) for e in journal] == [(f"step {i}", "done") for i in range(STEPS)]
    reruns = sum(len(pids) - 1 for pids in bodies.values())
    print(f"{backend_name}: {RUNS} runs of {STEPS} steps, {len(killed)} killed, {reruns} reruns")
    app.close()


def _bodies(done: Path) -> dict[tuple[int, int], list[int]]:
    """Each step's runs of its body: the pid of each worker that ran it, in order."""
    runs: dict[tuple[int, int], list[int]] = {}
    if done.exists():
        for line in done.read_text().splitlines():
            n, index, pid = line.split()
            runs.setdefault((int(n), int(index)), []).append(int(pid))
    return runs


def _finished(app: App, ids: list[str]) -> bool:
    return all(app.result(id).status.value == "succeeded" for id in ids)
