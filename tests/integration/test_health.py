"""A worker's probes (``/healthz``, ``/readyz`` on ``--metrics-port``) and its systemd
notifications, from ``tickwork worker`` run as the docs start it: readiness follows a
Redis server stopped and started again, a draining worker stays alive but is not ready,
and a ``Type=notify`` unit hears ready, the watchdog's pings and stopping. The unit file
of ``examples/deploy/`` passes ``systemd-analyze verify``."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import textwrap
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from tests.support.helpers import wait_for
from tests.support.served import console_script
from tests.support.servers import RedisServer, ensure_debian_packages, free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]

APP = """
from pathlib import Path
from tickwork import App

app = App()


@app.task
def hold(name: str) -> None:
    marks = Path({marks!r})
    (marks / f"{{name}}.started").touch()
    while not (marks / "release").exists():
        __import__("time").sleep(0.02)
    (marks / f"{{name}}.done").touch()
"""


class Deployed:
    """A ``probed`` app in a folder of its own and the ``tickwork worker`` that runs it."""

    def __init__(self, tmp_path: Path, env: dict[str, str], backend: str) -> None:
        app_dir, self.marks, self.cwd = tmp_path / "app", tmp_path / "marks", tmp_path / "cwd"
        for folder in (app_dir, self.marks, self.cwd):
            folder.mkdir()
        (app_dir / "probed.py").write_text(textwrap.dedent(APP).format(marks=str(self.marks)))
        self.env = {**env, "PYTHONPATH": f"{app_dir}:{ROOT}", "TICKWORK_BACKEND": backend}
        self.port = free_port()
        self.worker: subprocess.Popen[str] | None = None

    def start(self, **env: str) -> subprocess.Popen[str]:
        self.worker = subprocess.Popen(
            [console_script(), "worker", "-A", "probed", "--metrics-port", str(self.port)],
            cwd=self.cwd,
            env={**self.env, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for_port(self.port, 60)
        return self.worker

    def probe(self, path: str) -> tuple[int, dict[str, str]]:
        """``GET path``: the status and the checks of the JSON answer."""
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=30) as answer:
                status, body = answer.status, answer.read()
        except urllib.error.HTTPError as answer:
            status, body = answer.code, answer.read()
        checks: dict[str, str] = json.loads(body)["checks"]
        return status, checks

    def enqueue(self, name: str) -> None:
        done = subprocess.run(
            [sys_python(), "-c", f"import probed; probed.hold.delay({name!r})"],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr

    def stop(self) -> str:
        assert self.worker is not None
        self.worker.send_signal(signal.SIGTERM)
        _out, err = self.worker.communicate(timeout=60)
        assert self.worker.returncode == 0, err
        return err


def sys_python() -> str:
    return str(ROOT / ".venv" / "bin" / "python")


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    folder = tmp_path / "redis"
    folder.mkdir()
    server = RedisServer(folder=folder)
    yield server
    server.stop()


def test_readiness_follows_the_backend_down_and_up(
    redis_server: RedisServer, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    deployed = Deployed(tmp_path, clean_env, redis_server.url)
    deployed.start()
    try:
        wait_for(lambda: deployed.probe("/readyz")[0] == 200, 30)
        assert deployed.probe("/healthz") == (200, {"heartbeat": "ok", "threads": "ok"})
        redis_server.stop()
        wait_for(lambda: deployed.probe("/readyz")[0] == 503, 30)
        status, checks = deployed.probe("/readyz")
        assert status == 503
        assert checks["backend"].startswith("the backend does not answer")
        assert checks["draining"] == "ok"
        assert deployed.probe("/healthz")[0] == 200  # a backend down is not a dead worker
        redis_server.start()
        wait_for(lambda: deployed.probe("/readyz")[0] == 200, 60)
        (deployed.marks / "release").touch()
        deployed.enqueue("after")  # and it works again
        wait_for(lambda: (deployed.marks / "after.done").exists(), 60)
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{deployed.port}/metrics", timeout=30)
        assert b"tickwork_succeeded_total" in metrics.read()  # the same port's metrics
    finally:
        deployed.stop()


def test_a_draining_worker_is_alive_and_not_ready(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    deployed = Deployed(tmp_path, clean_env, f"sqlite:///{tmp_path / 'probed.db'}")
    worker = deployed.start()
    try:
        deployed.enqueue("long")
        wait_for(lambda: (deployed.marks / "long.started").exists(), 60)
        assert deployed.probe("/readyz")[0] == 200
        worker.send_signal(signal.SIGTERM)  # drains: the running handler has its grace
        wait_for(lambda: deployed.probe("/readyz")[0] == 503, 30)
        status, checks = deployed.probe("/readyz")
        assert status == 503
        assert checks["draining"] == "stopping: claims nothing more"
        assert checks["backend"] == "ok"
        assert deployed.probe("/healthz")[0] == 200
    finally:
        (deployed.marks / "release").touch()
    _out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert (deployed.marks / "long.done").exists()


@contextmanager
def notify_socket(path: Path) -> Iterator[socket.socket]:
    """A ``$NOTIFY_SOCKET`` as systemd listens on one: a Unix datagram socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(30)
        yield sock


def test_a_notify_unit_hears_ready_the_watchdog_and_stopping(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    deployed = Deployed(tmp_path, clean_env, f"sqlite:///{tmp_path / 'probed.db'}")
    address = tmp_path / "notify.sock"
    with notify_socket(address) as listener:
        worker = deployed.start(NOTIFY_SOCKET=str(address), WATCHDOG_USEC="900000")
        heard: list[str] = []

        def hear(line: str) -> None:
            while not any(message.startswith(line) for message in heard):
                heard.append(listener.recv(4096).decode())

        hear("READY=1")
        assert heard[0].splitlines()[1].startswith("STATUS=running")
        heard.clear()
        hear("WATCHDOG=1")
        hear("WATCHDOG=1")  # again: the pings go on while it is alive
        worker.send_signal(signal.SIGTERM)
        hear("STOPPING=1")
        _out, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err


def test_the_example_unit_file_is_one_systemd_accepts(tmp_path: Path) -> None:
    """``systemd-analyze verify`` in a root of the test's own: the system's units, and the
    unit's command where the example puts it (a script running the installed one). A
    warning (an unknown key, a value it cannot parse) fails the test too."""
    ensure_debian_packages(["systemd-analyze"], ["systemd"])
    unit = (ROOT / "examples" / "deploy" / "tickwork-worker.service").read_text()
    root = tmp_path / "root"
    system_units = root / "usr" / "lib" / "systemd" / "system"
    shutil.copytree("/usr/lib/systemd/system", system_units, symlinks=True)
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    command, *arguments = exec_start.removeprefix("ExecStart=").split()
    stand_in = root / command.lstrip("/")
    stand_in.parent.mkdir(parents=True)
    stand_in.write_text(f'#!/bin/sh\nexec {console_script()} "$@"\n')
    stand_in.chmod(0o755)
    (root / "etc" / "systemd" / "system").mkdir(parents=True)
    (root / "etc" / "systemd" / "system" / "tickwork-worker.service").write_text(unit)
    checked = subprocess.run(
        ["systemd-analyze", "verify", f"--root={root}", "tickwork-worker.service"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr == "", checked.stderr
    # and the command's options are the worker's
    usage = subprocess.run(
        [str(stand_in), arguments[0], "--help"], capture_output=True, text=True, check=True
    ).stdout
    for option in (arg for arg in arguments if arg.startswith("-")):
        assert option in usage, option


def test_the_kubernetes_example_probes_what_the_worker_serves() -> None:
    """The manifest's probes ask the port the worker's command serves on, for the paths
    the worker answers, and the pod waits longer than the worker's grace."""
    manifest = yaml.safe_load((ROOT / "examples" / "deploy" / "kubernetes-worker.yaml").read_text())
    pod = manifest["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    command: list[str] = container["command"]
    assert command[:2] == ["tickwork", "worker"]
    options = dict(zip(command[2::2], command[3::2], strict=True))
    (port,) = [p for p in container["ports"] if p["name"] == "metrics"]
    assert port["containerPort"] == int(options["--metrics-port"])
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert pod["terminationGracePeriodSeconds"] > float(options["--grace"])
    usage = subprocess.run(
        [console_script(), "worker", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for option in options:
        assert option in usage, option
