"""``tickwork worker --processes N``: the supervisor shares the work between its worker
processes, restarts one that is killed, stops them all on SIGTERM, exits when every
``--burst`` process has finished, and takes its workers with it when it is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support import supervised_tasks
from tests.support.helpers import wait_for
from tickwork.cli.worker import child_command

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


def supervise(url: str, env: dict[str, str], log: Path, *extra: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tickwork",
                "worker",
                "-A",
                "tests.support.supervised_tasks",
                "--processes",
                "2",
                "-c",
                "2",
                "--grace",
                "5",
                "--backend",
                url,
                *extra,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )


def test_processes_share_the_work_and_a_killed_one_is_restarted(
    sqlite_url: str, clean_env: dict[str, str], tmp_path: Path
) -> None:
    app = supervised_tasks.app
    app.use_backend(sqlite_url)
    handles = [supervised_tasks.where.delay(0.02) for _ in range(300)]
    log = tmp_path / "supervisor.log"
    supervisor = supervise(sqlite_url, clean_env, log)
    try:
        wait_for(lambda: len(children(supervisor.pid)) == 2, 30)
        first = children(supervisor.pid)
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: len(children(supervisor.pid) - first) == 1, 30)
        ran_by = {handle.result(timeout=120) for handle in handles}
        assert len(ran_by) >= 2  # both processes took work
        alive = children(supervisor.pid)
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(60) == 0, log.read_text()
        assert not any(_alive(pid) for pid in alive)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
        app.close()
    text = log.read_text()
    assert "was killed by SIGKILL" in text and "restarting in 1.0s" in text, text


def test_ctrl_c_in_a_terminal_stops_the_processes_gracefully(
    sqlite_url: str, clean_env: dict[str, str], tmp_path: Path
) -> None:
    """A terminal sends SIGINT to its whole foreground process group: the processes
    must see only the supervisor's one SIGTERM (two signals would stop them at once)."""
    log = tmp_path / "supervisor.log"
    with log.open("wb") as out:
        supervisor = subprocess.Popen(
            [
                *(sys.executable, "-m", "tickwork", "worker"),
                *("-A", "tests.support.supervised_tasks", "--processes", "2"),
                *("--backend", sqlite_url),
            ],
            cwd=ROOT,
            env=clean_env,
            stdout=subprocess.DEVNULL,
            stderr=out,
            process_group=0,  # as a shell puts a foreground job in a group of its own
        )
    try:
        wait_for(lambda: len(children(supervisor.pid)) == 2, 30)
        wait_for(lambda: log.read_text().count("worker started") == 2, 30)
        os.killpg(supervisor.pid, signal.SIGINT)
        assert supervisor.wait(60) == 0, log.read_text()
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
    text = log.read_text()
    assert "second signal" not in text and text.count("worker stopped") == 2, text


def test_burst_processes_exit_when_the_work_is_done(
    sqlite_url: str, clean_env: dict[str, str], tmp_path: Path
) -> None:
    app = supervised_tasks.app
    app.use_backend(sqlite_url)
    handles = [supervised_tasks.where.delay(0) for _ in range(40)]
    log = tmp_path / "supervisor.log"
    supervisor = supervise(sqlite_url, clean_env, log, "--burst")
    try:
        assert supervisor.wait(60) == 0, log.read_text()
        assert all(handle.status().value == "succeeded" for handle in handles)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
        app.close()
    assert log.read_text().count("finished") == 2


def test_a_killed_supervisor_takes_its_workers_with_it(
    sqlite_url: str, clean_env: dict[str, str], tmp_path: Path
) -> None:
    supervisor = supervise(sqlite_url, clean_env, tmp_path / "supervisor.log")
    try:
        wait_for(lambda: len(children(supervisor.pid)) == 2, 30)
        workers = children(supervisor.pid)
        supervisor.kill()
        supervisor.wait(10)
        wait_for(lambda: not any(_alive(pid) for pid in workers), 30)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()


def test_an_app_that_cannot_load_fails_before_any_process_starts(
    sqlite_url: str, clean_env: dict[str, str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tickwork", "worker", "-A", "no_such_module", "--processes", "2"],
        cwd=ROOT,
        env={**clean_env, "TICKWORK_BACKEND": sqlite_url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "cannot load the app from 'no_such_module'" in done.stderr
    assert "worker process" not in done.stderr  # nothing was started


def test_each_process_gets_the_options_and_its_own_metrics_port() -> None:
    options = {
        "module": "app",
        "queues": ("a", "b"),
        "metrics_port": 9100,
        "concurrency": 4,
        "async_concurrency": 100,
        "pool": "thread",
        "prefetch": None,
        "batch_size": 100,
        "lookahead_ms": 500,
        "grace": 30.0,
        "abort_grace": 10.0,
        "metrics_host": "127.0.0.1",
        "duration": None,
        "log_level": "info",
        "log_format": "json",
        "burst": True,
    }
    argv = child_command(options, 2)
    assert argv[:6] == [sys.executable, "-m", "tickwork", "worker", "-A", "app"]
    assert argv[6:10] == ["-Q", "a", "-Q", "b"]
    assert argv[argv.index("--metrics-port") + 1] == "9102"
    assert argv[argv.index("--concurrency") + 1] == "4"
    assert argv[argv.index("--log-format") + 1] == "json"
    assert "--prefetch" not in argv and "--duration" not in argv and argv[-1] == "--burst"
    any_port = child_command({**options, "metrics_port": 0}, 1)
    assert any_port[any_port.index("--metrics-port") + 1] == "0"
