"""Fault test: SIGKILL workers again and again while they run batches of a task with
``batch_size=100``; every call is accounted for (acked, or poisoned when it fails for
good, none left), and the calls still run in few handler calls. (Without kills, 10,000
calls run in 101 handler calls: ``bench/batching.py``.)"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from tests.faults.killing import KillLoop, idle, share
from tests.faults.sizes import sized
from tests.support.backends import BACKEND_NAMES, backend_url
from tests.support.gate import recorded
from tests.support.helpers import completed, wait_until
from tickwork.scheduler import App
from tickwork.scheduler.model.message import Message

N = sized(10_000, 1_000)
ROUNDS = sized(4, 2)
FAILING = {n for n in range(N) if n % 97 == 0}
MODULE = "tests.support.batched_tasks"
#: handler calls at most: full batches, a few for the retried calls and the last partial
#: ones, and per kill what the killed worker ran (its 4 threads' batches run again)
MOST_CALLS = N // 100 + 5 + ROUNDS * 5


@pytest.mark.parametrize("backend_name", BACKEND_NAMES)
def test_sigkilled_workers_lose_no_call_of_a_batched_task(
    backend_name: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    from tests.support.batched_tasks import app as tasks_app
    from tests.support.batched_tasks import batched

    url = backend_url(backend_name, tmp_path)
    done, calls = tmp_path / "done.txt", tmp_path / "calls.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_DONE": str(done)}
    env["TICKWORK_TEST_CALLS"] = str(calls)
    tasks_app.use_backend(url)
    tasks_app.enqueue_many([batched.call(n) for n in range(N)])
    tasks_app.close()
    app = App(url)
    loop = KillLoop(env, tmp_path, MODULE)
    try:
        opens = partial(share, N, ROUNDS + 2)
        loop.rounds(ROUNDS, lambda round_: recorded(done) >= opens(round_), opens)
        assert len(completed(done)) < N, "the kills must land while calls still run"
        loop.start_last()
        assert wait_until(lambda: idle(app), 300), f"calls left: {app.backend.queues.stats()}"
    finally:
        loop.stop()
    assert set(completed(done)) == set(range(N)), "every call ran"
    poisoned = app.backend.poison.list(limit=N)
    assert sorted(Message.decode(p.envelope.body).args[0] for p in poisoned) == sorted(FAILING)
    sizes = [int(line) for line in calls.read_text().split()]
    print(f"{backend_name}: {len(sizes)} handler calls for {N} calls")
    assert len(sizes) <= MOST_CALLS, f"{len(sizes)} handler calls for {N} calls: {sizes}"
    app.close()
