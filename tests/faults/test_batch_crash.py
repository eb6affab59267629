"""Fault test: SIGKILL workers again and again while they run a 1,000-member batch; the
batch's callback runs exactly once, with every member's outcome."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest

from tests.faults.killing import KillLoop, idle, share
from tests.faults.sizes import sized
from tests.support.backends import BACKEND_NAMES, backend_url
from tests.support.gate import recorded
from tests.support.helpers import completed, wait_until
from tickwork.scheduler import App, batch, group

N = sized(1000, 200)
FAILING = {n for n in range(N) if n % 97 == 0}
MODULE = "tests.support.batch_tasks"


@pytest.mark.parametrize("backend_name", BACKEND_NAMES)
def test_sigkilled_workers_fire_the_callback_exactly_once(
    backend_name: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    from tests.support.batch_tasks import app as tasks_app
    from tests.support.batch_tasks import member, summary

    url = backend_url(backend_name, tmp_path)
    done, callbacks = tmp_path / "done.txt", tmp_path / "callbacks.jsonl"
    env = {
        **clean_env,
        "TICKWORK_BACKEND": url,
        "TICKWORK_TEST_DONE": str(done),
        "TICKWORK_TEST_CALLBACKS": str(callbacks),
    }
    tasks_app.use_backend(url)
    handle = tasks_app.batches.enqueue(
        batch(group(member.call(n) for n in range(N)), on_complete=summary.s())
    )
    tasks_app.close()
    app = App(url)
    loop = KillLoop(env, tmp_path, MODULE)
    try:
        opens = partial(share, N, 6)
        loop.rounds(4, lambda round_: recorded(done) >= opens(round_), opens)
        assert len(completed(done)) < N, "the kills must land while members still run"
        loop.start_last()
        assert wait_until(lambda: callbacks.exists(), 180), "the callback never ran"
        assert wait_until(lambda: app.batches.get(handle).complete, 30)
        # let every killed lease expire and be redelivered, then look again
        assert wait_until(lambda: idle(app), 60)
    finally:
        loop.stop()
    lines = callbacks.read_text().splitlines()
    assert len(lines) == 1, f"the callback ran {len(lines)} times"
    outcome = json.loads(lines[0])
    assert (outcome["size"], outcome["failed"], outcome["succeeded"]) == (
        N,
        len(FAILING),
        N - len(FAILING),
    )
    assert outcome["results"] == [None if n in FAILING else n for n in range(N)]
    assert {f["index"] for f in outcome["failures"]} == FAILING
    assert set(completed(done)) == set(range(N)), "every member ran"
    app.close()
