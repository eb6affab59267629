"""A producer in another language: ``examples/node/producer.mjs`` (Node.js, no package)
enqueues over the HTTP API, with idempotency keys, against a dashboard served by uvicorn;
a Python worker runs the messages; the producer reads their results back and is told,
in the error shape, what a bad call is."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from scheduler import App
from tests.support.backends import Servers
from tests.support.browser import served
from tests.support.helpers import running, wait_for
from tickwork.dashboard import create_dashboard

ROOT = Path(__file__).resolve().parents[2]
LUA = ROOT / "scheduler" / "backends" / "redis" / "lua"


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


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
def test_a_node_producer_writes_straight_into_redis() -> None:
    """``examples/node/redis_producer.mjs`` writes messages by the documented format (its
    packages installed by ``make test`` from the lock file); a Python worker runs them, a
    keyed one is found by its key, and the same key again is a conflict."""
    from tests.support import node_tasks

    prefix = f"n{uuid.uuid4().hex[:8]}"
    url = f"{Servers.redis_url()}?prefix={prefix}"
    app = App(url)
    app.include(node_tasks.add_noted)

    environment = {
        "REDIS_URL": Servers.redis_url(),
        "TICKWORK_LUA": str(LUA),
        "TICKWORK_PREFIX": prefix,
        "PATH": "/usr/bin:/bin",
    }

    def write(*args: str) -> dict[str, str]:
        done = subprocess.run(
            ["node", str(ROOT / "examples" / "node" / "redis_producer.mjs"), *args],
            env=environment,
            capture_output=True, text=True, timeout=60, check=False, cwd=ROOT / "examples" / "node",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        answer: dict[str, str] = json.loads(done.stdout)
        return answer

    first = write("default", node_tasks.add_noted.name, "[1, 2]")
    keyed = write("default", node_tasks.add_noted.name, "[20, 22]", "nightly")
    again = write("default", node_tasks.add_noted.name, "[0, 0]", "nightly")
    assert first["outcome"] == "enqueued" and keyed["outcome"] == "enqueued"
    assert again["outcome"] == "conflict on nightly"
    found = app.get(key="nightly")
    assert found is not None and found.message.id == keyed["id"]
    assert found.message.args == [20, 22]
    with running(app):
        wait_for(lambda: sorted(node_tasks.sums) == [3, 42])
    app.close()
