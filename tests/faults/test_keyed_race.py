"""Keyed messages sent one at a time while a worker claims: each runs exactly once.

On Cassandra a message's rows are written by one logged batch, atomic but not isolated,
so a claim can read its pending row before its key row; a claim once took such a row for
one a cancel had left behind and deleted it (1 to 3 of 3,000 lost under load). Every
backend runs it; ``make test`` at a small size, ``make faults`` at full size."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.faults.sizes import sized
from tests.support.backends import BACKEND_NAMES, backend_url
from tests.support.helpers import running, wait_for
from tickwork.scheduler import App

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend_name", BACKEND_NAMES)
def test_keyed_messages_sent_while_a_worker_claims_each_run_once(
    backend_name: str, tmp_path: Path
) -> None:
    count = sized(3_000, 100)
    app = App(backend_url(backend_name, tmp_path))
    lock = threading.Lock()
    runs: dict[int, int] = {}

    @app.task
    def record(number: int) -> None:
        with lock:
            runs[number] = runs.get(number, 0) + 1

    with app, running(app, concurrency=4):
        for number in range(count):
            record.schedule(args=(number,), key=f"message-{number}")

        def missing() -> list[int]:
            return sorted(set(range(count)) - set(runs))

        wait_for(
            lambda: not missing(),
            timeout_s=120,
            explain=lambda: (
                f"{len(missing())} never ran, e.g. "
                + ", ".join(f"{n}: {app.get(key=f'message-{n}')}" for n in missing()[:3])
            ),
        )
    twice = {number: times for number, times in runs.items() if times > 1}
    assert not twice, f"ran more than once: {twice}"
