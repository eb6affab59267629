"""A producer in another language: ``examples/node/producer.mjs`` (Node.js, no package)
enqueues over the HTTP API, with idempotency keys, against a dashboard served by uvicorn;
a Python worker runs the messages; the producer reads their results back and is told,
in the error shape, what a bad call is."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.backends import Servers
from tests.support.browser import served
from tests.support.helpers import running, wait_for
from tests.support.servers import free_port, wait_for_port
from tickwork.dashboard import create_dashboard
from tickwork.scheduler import App

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


@contextmanager
def _started(command: list[str], env: dict[str, str], cwd: Path) -> Iterator[subprocess.Popen[str]]:
    """``command`` running until the block ends (then stopped as Ctrl-C would)."""
    process = subprocess.Popen(
        command, env=env, cwd=cwd, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        yield process
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
def test_the_documented_command_serves_the_apps_tasks_to_a_node_producer(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """The guide's way, from a directory of its own: ``tickwork dashboard -A MODULE``
    serves the API with the app's tasks, ``tickwork worker -A MODULE`` runs what the
    Node.js producer enqueues by name, and the producer reads the results back."""
    exe = shutil.which("tickwork", path=str(ROOT / ".venv" / "bin"))
    assert exe is not None, "the console script is installed by make"
    env = {**clean_env, "TICKWORK_BACKEND": f"sqlite:///{tmp_path / 'shop.db'}"}
    port = free_port()
    module = "tests.support.node_tasks"
    dashboard = [exe, "dashboard", "-A", module, "--port", str(port)]
    worker = [exe, "worker", "-A", module, "--log-level", "warning"]
    with _started(dashboard, env, tmp_path) as served_by, _started(worker, env, tmp_path):
        wait_for_port(port)
        done = subprocess.run(
            ["node", str(ROOT / "examples" / "node" / "producer.mjs"), f"{module}.add",
             "[1, 2]", "[20, 22]"],
            env={"TICKWORK_API": f"http://127.0.0.1:{port}/api/v1", "PATH": os.environ["PATH"]},
            capture_output=True, text=True, timeout=90, check=False,
        )  # fmt: skip
        assert served_by.poll() is None, "the dashboard is still serving"
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["results"] == [3, 42], "the worker ran what the producer enqueued by name"
    assert answer["refused"] == {"status": 422, "code": "invalid"}


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
