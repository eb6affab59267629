"""A handler that kills its process costs only its own message (issue 55). Run the user's
way: ``tickwork worker -A crashy --pool process`` from another directory, through the
installed console script; the handlers leave a mark per run in a folder, the test reads
the app's storage and the worker's metrics."""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.helpers import wait_for
from tests.support.servers import free_port
from tickwork import App
from tickwork.scheduler.views.activity import read_activity

ROOT = Path(__file__).resolve().parents[2]

CRASHY = """
    import os
    import time
    from pathlib import Path

    from tickwork import App

    app = App("sqlite:///{data}/crashy.db")
    MARKS = Path("{marks}")


    def mark(name: str) -> None:
        (MARKS / f"{{name}}.{{time.monotonic_ns()}}").touch()


    @app.task(retries=1)
    def crash() -> None:
        mark("crash")
        os.abort()


    @app.task(retries=1)
    def fine(i: int) -> None:
        mark(f"fine-{{i}}")
        time.sleep(1.0)
        mark(f"fine-{{i}}-done")


    @app.task
    def victim() -> None:
        (MARKS / "victim.pid").write_text(str(os.getpid()))
        time.sleep(120)


    @app.task
    def quick(i: int) -> None:
        mark(f"quick-{{i}}")
"""


class Crashy:
    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        app_dir, data, self.marks, self.cwd = (
            tmp_path / "app",
            tmp_path / "data",
            tmp_path / "marks",
            tmp_path / "cwd",
        )
        for folder in (app_dir, data, self.marks, self.cwd):
            folder.mkdir()
        source = textwrap.dedent(CRASHY).format(data=data, marks=self.marks)
        (app_dir / "crashy.py").write_text(source)
        self.env = {**env, "PYTHONPATH": f"{app_dir}:{ROOT}"}
        sys.path.insert(0, str(app_dir))  # the producer: this test, with the same module
        self.module = importlib.import_module("crashy")
        sys.path.remove(str(app_dir))
        self.app: App = self.module.app
        self.metrics_port = free_port()
        self.worker: subprocess.Popen[str] | None = None

    def enqueue(self, task: str, *args: object) -> str:
        return str(getattr(self.module, task).delay(*args).id)

    def start_worker(self) -> None:
        exe = shutil.which("tickwork", path=str(ROOT / ".venv" / "bin"))
        assert exe is not None, "the console script is installed by make"
        self.worker = subprocess.Popen(
            [
                *(exe, "worker", "-A", "crashy", "--pool", "process", "-c", "8"),
                *("--metrics-port", str(self.metrics_port), "--log-level", "warning"),
            ],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def runs(self, name: str) -> int:
        return sum(1 for path in self.marks.iterdir() if path.name.rsplit(".", 1)[0] == name)

    def poisoned(self) -> dict[str, str]:
        return {
            record.envelope.id: record.failure.message for record in self.app.backend.poison.list()
        }

    def metric(self, name: str, task: str) -> float:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        for line in text.splitlines():
            if line.startswith(f"{name}{{") and f'task="crashy.{task}"' in line:
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def stop_worker(self) -> str:
        assert self.worker is not None
        assert self.worker.poll() is None, "the worker keeps running after a child died"
        self.worker.send_signal(signal.SIGTERM)
        _out, err = self.worker.communicate(timeout=60)
        assert self.worker.returncode == 0, err
        return err


@pytest.fixture
def crashy(tmp_path: Path, clean_env: dict[str, str]) -> Iterator[Crashy]:
    made = Crashy(tmp_path, clean_env)
    yield made
    if made.worker is not None and made.worker.poll() is None:
        made.worker.kill()
        made.worker.wait()
    made.app.close()
    sys.modules.pop("crashy", None)


def test_a_handler_that_aborts_its_process_costs_only_its_own_message(crashy: Crashy) -> None:
    fine = [crashy.enqueue("fine", i) for i in range(7)]
    crashed = crashy.enqueue("crash")
    crashy.start_worker()
    wait_for(lambda: crashed in crashy.poisoned(), timeout_s=60)
    wait_for(lambda: all(crashy.runs(f"fine-{i}-done") == 1 for i in range(7)), timeout_s=60)
    quick = [crashy.enqueue("quick", i) for i in range(100)]
    wait_for(lambda: all(crashy.runs(f"quick-{i}") == 1 for i in range(100)), timeout_s=60)
    wait_for(lambda: crashy.app.get(id=quick[-1]) is None)
    assert crashy.metric("tickwork_crashed_total", "crash") == 2.0
    assert crashy.metric("tickwork_succeeded_total", "fine") == 7.0
    assert crashy.metric("tickwork_retried_total", "fine") == 0.0
    err = crashy.stop_worker()

    # the crashing message: retried once, then poisoned, the signal named
    assert crashy.runs("crash") == 2
    assert crashy.poisoned() == {crashed: "the process running it died (signal SIGABRT)"}
    assert "died (signal SIGABRT)" in err
    # the seven beside it: each ran once, to its end, never charged an attempt
    assert [crashy.runs(f"fine-{i}") for i in range(7)] == [1] * 7
    assert all(crashy.app.get(id=message_id) is None for message_id in fine)
    # the activity log counts the deaths (written when the worker stops)
    activity = read_activity(crashy.app.backend, ["default"], crashy.app.backend.now_ms())
    assert sum(minute.counts["crashed"] for minute in activity.total) == 2


def test_a_handler_killed_from_outside_costs_only_its_own_message(crashy: Crashy) -> None:
    """As the OOM killer does: SIGKILL to the child, from outside the worker."""
    fine = [crashy.enqueue("fine", i) for i in range(3)]
    victim = crashy.enqueue("victim")
    crashy.start_worker()
    pid_file = crashy.marks / "victim.pid"
    wait_for(lambda: pid_file.exists() and pid_file.read_text() != "", timeout_s=60)
    wait_for(lambda: crashy.runs("fine-0") + crashy.runs("fine-1") + crashy.runs("fine-2") == 3)
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    wait_for(lambda: victim in crashy.poisoned(), timeout_s=30)
    wait_for(lambda: all(crashy.runs(f"fine-{i}-done") == 1 for i in range(3)), timeout_s=30)
    after = crashy.enqueue("quick", 0)
    wait_for(lambda: crashy.runs("quick-0") == 1)
    wait_for(lambda: crashy.app.get(id=after) is None)
    assert crashy.metric("tickwork_crashed_total", "victim") == 1.0
    crashy.stop_worker()

    assert crashy.poisoned() == {victim: "the process running it died (signal SIGKILL)"}
    assert [crashy.runs(f"fine-{i}") for i in range(3)] == [1] * 3
    assert all(crashy.app.get(id=message_id) is None for message_id in fine)
