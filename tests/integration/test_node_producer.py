"""A producer in another language: ``examples/node/producer.mjs`` (Node.js, no package)
enqueues over the HTTP API, with idempotency keys, against a dashboard served by uvicorn;
a Python worker runs the messages; the producer reads their results back and is told,
in the error shape, what a bad call is."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from scheduler import App
from tests.support.browser import served
from tests.support.helpers import running, wait_for
from tickwork.dashboard import create_dashboard

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
def test_a_node_producer_enqueues_and_reads_results(sqlite_url: str) -> None:
    from tests.support import node_tasks

    app: App = node_tasks.app
    app.use_backend(sqlite_url)
    with served(create_dashboard(app)) as base, running(app):
        done = subprocess.run(
            ["node", str(ROOT / "examples" / "node" / "producer.mjs"), node_tasks.add.name,
             "[1, 2]", "[20, 22]", "[100, 0]"],
            env={"TICKWORK_API": f"{base}/api/v1", "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        wait_for(lambda: node_tasks.seen == [{"count": 3}])
    assert answer["results"] == [3, 42, 100]
    assert answer["refused"] == {"status": 422, "code": "invalid"}
    assert len(set(answer["ids"])) == 3
    assert app.backend.queues.stats("default")[0].ready == 0
