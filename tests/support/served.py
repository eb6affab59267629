"""The dashboard as the docs start it: ``tickwork dashboard -A MODULE --token ...``, a
real process through the installed console script, from a directory of the test's own;
and the HTTP API called over the wire, as a client other than Python calls it."""

from __future__ import annotations

import base64
import contextlib
import http.client
import http.cookiejar
import json
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from tests.support.servers import free_port, wait_for_port
from tickwork.api.security import CSRF_COOKIE

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token"


def console_script() -> str:
    """The installed ``tickwork`` command (``make`` installs it into ``.venv``)."""
    exe = shutil.which("tickwork", path=str(ROOT / ".venv" / "bin"))
    assert exe is not None, "the console script is installed by make"
    return exe


def run_tickwork(
    cwd: Path, env: dict[str, str], *args: str, timeout: float = 120, typed: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``tickwork ARGS...`` through the installed console script, run from ``cwd`` as a
    user runs it (``typed`` on its standard input); its exit code and output (never
    raises on a failing exit)."""
    return run_command([console_script(), *args], cwd, env, timeout=timeout, typed=typed)


def run_command(
    command: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    *,
    timeout: float = 120,
    typed: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``command`` run from ``cwd`` to its end (``typed`` on its standard input): its exit
    code and output as text (never raises on a failing exit)."""
    return subprocess.run(
        list(command),
        cwd=cwd,
        env=env,
        input=typed,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@contextmanager
def worker(
    module: str, cwd: Path, env: dict[str, str], *options: str
) -> Iterator[subprocess.Popen[str]]:
    """``tickwork worker -A module OPTIONS`` run from ``cwd`` for the block, then asked to
    stop (SIGTERM) and waited for: it must end cleanly (its standard error says why not)."""
    command = [console_script(), "worker", "-A", module, *options]
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        yield process
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=60)
    assert process.returncode == 0, errors


@contextmanager
def dashboard(module: str, cwd: Path, env: dict[str, str], *options: str) -> Iterator[str]:
    """``tickwork dashboard -A module --token TOKEN`` run from ``cwd``; its base URL."""
    port = free_port()
    command = [console_script(), "dashboard", "-A", module, "--port", str(port)]
    command += ["--token", TOKEN, *options]
    server = subprocess.Popen(command, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=30)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # a page's action answers 303: that is the answer wanted


def page_post(base: str, path: str, fields: dict[str, str] | None = None) -> int:
    """A dashboard form's POST (with ``fields``), as a browser sends it: signed in, with
    its CSRF token; the status (303: done, and back to the page)."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirect)
    signed_in = {"authorization": "Basic " + base64.b64encode(f"ops:{TOKEN}".encode()).decode()}
    opener.open(urllib.request.Request(f"{base}/", headers=signed_in), timeout=30).close()
    (token,) = [cookie.value for cookie in jar if cookie.name == CSRF_COOKIE]  # the page's
    form = urlencode({"csrf": token, "next": "/", **(fields or {})}).encode()
    try:
        opener.open(urllib.request.Request(f"{base}{path}", form, signed_in), timeout=30)
    except urllib.error.HTTPError as answer:
        return answer.code
    return 200


def page_get(base: str, path: str) -> str:
    """A dashboard page as a signed-in browser gets it: its HTML."""
    signed_in = {"authorization": "Basic " + base64.b64encode(f"ops:{TOKEN}".encode()).decode()}
    request = urllib.request.Request(f"{base}{path}", headers=signed_in)
    with urllib.request.urlopen(request, timeout=30) as answer:
        return str(answer.read().decode())


def call_api(base: str, method: str, path: str, body: object = None) -> tuple[int, object]:
    """``method /api/v1{path}`` with the token: the status and the JSON answer (an error's
    too)."""
    request = urllib.request.Request(
        f"{base}/api/v1{path}",
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"authorization": f"Bearer {TOKEN}", "content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as answer:
        return answer.code, json.loads(answer.read())


class EventStream:
    """A Server-Sent Events client of ``{base}/api/v1/stream?{query}`` with the token: a
    thread reads the events (name and JSON data) as they come; ``take`` waits for them."""

    def __init__(self, base: str, query: str = "") -> None:
        where = urlsplit(base)
        self._connection = http.client.HTTPConnection(where.netloc, timeout=60)
        headers = {"authorization": f"Bearer {TOKEN}", "accept": "text/event-stream"}
        self._connection.request("GET", f"/api/v1/stream?{query}", headers=headers)
        self.answer = self._connection.getresponse()
        assert self.answer.status == 200, self.answer.read()
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        name, data = "message", ""
        try:
            for raw in self.answer:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    data = line.removeprefix("data: ")
                elif line == "" and data:
                    self.events.put((name, json.loads(data)))
                    name, data = "message", ""
        except (OSError, ValueError, AttributeError):
            pass  # closed by the test (http.client reads a closed response's None)

    def take(self, count: int, timeout_s: float = 30.0) -> list[tuple[str, Any]]:
        """The next ``count`` events (fewer when the time ran out)."""
        taken: list[tuple[str, Any]] = []
        deadline = time.monotonic() + timeout_s
        while len(taken) < count and (left := deadline - time.monotonic()) > 0:
            try:
                taken.append(self.events.get(timeout=left))
            except queue.Empty:
                break
        return taken

    def close(self) -> None:
        """Hang up: the socket shut first, which ends the reader's wait at once."""
        if (sock := self._connection.sock) is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.answer.close()
        self._connection.close()

    def __enter__(self) -> EventStream:
        (ready,) = self.take(1)
        assert ready[0] == "ready", ready
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
