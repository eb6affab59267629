"""``tickwork worker --processes N``: the supervisor shares the work between its worker
processes, restarts one that is killed, stops them all on SIGTERM, exits when every
``--burst`` process has finished, and takes its workers with it when it is killed."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from subprocess import Popen

import pytest

from tests.support import supervised_tasks
from tests.support.helpers import wait_for
from tests.support.served import run_tickwork
from tickwork.cli.worker import child_command, worker
from tickwork.scheduler import App
from tickwork.workers.supervisor import _die_with_parent

ROOT = Path(__file__).resolve().parents[2]


def children(pid: int) -> set[int]:
    """The pids of ``pid``'s live child processes (Linux ``/proc``)."""
    try:
        listed = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return set()
    return {int(child) for child in listed if _alive(int(child))}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


@contextmanager
def supervising(url: str, env: dict[str, str], log: Path, *extra: str) -> Iterator[Popen[bytes]]:
    """``tickwork worker --processes 2`` on ``url``, its log in ``log``, in a process
    group of its own (as a shell runs a foreground job); killed on the way out if it
    still runs."""
    command = [sys.executable, "-m", "tickwork", "worker", "-A", "tests.support.supervised_tasks"]
    command += ["--processes", "2", "-c", "2", "--grace", "5", "--backend", url, *extra]
    with log.open("wb") as out:
        supervisor = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=out, process_group=0
        )
    try:
        yield supervisor
    finally:
        if supervisor.poll() is None:
            supervisor.kill()


@pytest.fixture
def app(sqlite_url: str) -> Iterator[App]:
    """The supervised tasks' app on the test's database."""
    supervised_tasks.app.use_backend(sqlite_url)
    yield supervised_tasks.app
    supervised_tasks.app.close()


def test_processes_share_the_work_and_a_killed_one_is_restarted(
    app: App, sqlite_url: str, clean_env: dict[str, str], tmp_path: Path
) -> None:
    handles = [supervised_tasks.where.delay(0.02) for _ in range(300)]
    log = tmp_path / "supervisor.log"
    with supervising(sqlite_url, clean_env, log) as supervisor:
        wait_for(lambda: len(children(supervisor.pid)) == 2, 30)
        first = children(supervisor.pid)
        os.kill(min(first), signal.SIGKILL)
        wait_for(lambda: len(children(supervisor.pid) - first) == 1, 30)
        ran_by = {handle.result(timeout=120) for handle in handles}
        assert len(ran_by) >= 2  # both processes took work
        alive = children(supervisor.pid)
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(60) == 0, log.read_text()
        assert not any(_alive(pid) for pid in alive)
    text = log.read_text()
    assert "was killed by SIGKILL" in text and "restarting in 1.0s" in text, text


def test_ctrl_c_in_a_terminal_stops_the_processes_gracefully(
    sqlite_url: str, clean_env: dict[str, str], tmp_path: Path
) -> None:
    """A terminal sends SIGINT to its whole foreground process group: the processes
    must see only the supervisor's one SIGTERM (two signals would stop them at once)."""
    log = tmp_path / "supervisor.log"
    with supervising(sqlite_url, clean_env, log) as supervisor:
        wait_for(lambda: len(children(supervisor.pid)) == 2, 30)
        wait_for(lambda: log.read_text().count("worker started") == 2, 30)
        os.killpg(supervisor.pid, signal.SIGINT)
        assert supervisor.wait(60) == 0, log.read_text()
    text = log.read_text()
    assert "second signal" not in text and text.count("worker stopped") == 2, text


def test_burst_processes_exit_when_the_work_is_done(
    app: App, sqlite_url: str, clean_env: dict[str, str], tmp_path: Path
) -> None:
    handles = [supervised_tasks.where.delay(0) for _ in range(40)]
    log = tmp_path / "supervisor.log"
    with supervising(sqlite_url, clean_env, log, "--burst") as supervisor:
        assert supervisor.wait(60) == 0, log.read_text()
    assert all(handle.status().value == "succeeded" for handle in handles)
    assert log.read_text().count("finished") == 2


def test_a_killed_supervisor_takes_its_workers_with_it(
    sqlite_url: str, clean_env: dict[str, str], tmp_path: Path
) -> None:
    with supervising(sqlite_url, clean_env, tmp_path / "supervisor.log") as supervisor:
        wait_for(lambda: len(children(supervisor.pid)) == 2, 30)
        workers = children(supervisor.pid)
        supervisor.kill()
        supervisor.wait(10)
        wait_for(lambda: not any(_alive(pid) for pid in workers), 30)


def test_a_child_whose_supervisor_died_before_it_asked_exits_at_once() -> None:
    """The kernel sends nothing to a child re-parented before it asked for the death
    signal (the supervisor died right after the fork): the child checks and exits."""
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    orphan = subprocess.Popen(sleeper, preexec_fn=functools.partial(_die_with_parent, -1))
    assert orphan.wait(10) == 1
    own = [sys.executable, "-c", "pass"]
    child = subprocess.Popen(own, preexec_fn=functools.partial(_die_with_parent, os.getpid()))
    assert child.wait(30) == 0


def test_an_app_that_cannot_load_fails_before_any_process_starts(
    tmp_path: Path, sqlite_url: str, clean_env: dict[str, str]
) -> None:
    env = {**clean_env, "TICKWORK_BACKEND": sqlite_url}
    done = run_tickwork(tmp_path, env, "worker", "-A", "no_such_module", "--processes", "2")
    assert done.returncode == 2, done.stderr
    assert "cannot load the app from 'no_such_module'" in done.stderr
    assert "worker process" not in done.stderr  # nothing was started


def test_each_process_gets_every_option_and_its_own_metrics_port() -> None:
    """Parsed back, a process's command line holds every value the supervisor was given
    (an option added to ``worker`` later is passed on without a list to keep), bar
    ``--processes`` and the metrics port."""
    given = [
        *("-A", "app", "-Q", "a", "-Q", "b", "-c", "4", "--async-concurrency", "7"),
        *("--pool", "process", "--prefetch", "9", "--batch-size", "50", "--lookahead-ms", "5"),
        *("--grace", "3", "--abort-grace", "2", "--metrics-port", "9100"),
        *("--metrics-host", "0.0.0.0", "--processes", "3", "--duration", "60", "--burst"),
        *("--log-level", "debug", "--log-format", "json", "--all-threads"),
    ]
    supervisor = worker.make_context("worker", given)
    argv = child_command(worker, supervisor.params, 2)
    assert argv[:4] == [sys.executable, "-m", "tickwork", "worker"]
    child = worker.make_context("worker", argv[4:])
    assert child.params == {**supervisor.params, "processes": 1, "metrics_port": 9102}
    unset = worker.make_context("worker", ["-A", "app", "--metrics-port", "0"])
    child_argv = child_command(worker, unset.params, 1)
    assert worker.make_context("worker", child_argv[4:]).params == unset.params
    assert "--prefetch" not in child_argv and "--burst" not in child_argv
    assert "--all-threads" not in child_argv
