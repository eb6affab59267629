"""Running the docs' command lines as a reader does (``test_readme_tour``,
``test_guide_commands``): through the installed console script, from the reader's
directory, remembering which shown lines ran."""

from __future__ import annotations

import re
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from tests.conftest import ROOT
from tests.support.served import console_script, run_tickwork
from tests.support.servers import wait_for_port


def shown(line: str) -> str:
    """A shown command line without its comment."""
    return re.split(r"\s{2,}#|\s#\s", line)[0].strip()


class Tour:
    """Runs the tour's lines in one directory, remembering which lines it ran."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.cwd, self.env = cwd, env
        self.ran: set[str] = set()

    def run(
        self,
        line: str,
        *args: str,
        codes: tuple[int, ...] = (0,),
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        typed: str | None = None,
    ) -> str:
        """``tickwork ARGS`` for the shown ``line`` (from ``cwd``, with ``env`` added,
        ``typed`` on its standard input): its output, once its exit code is one of
        ``codes``."""
        environment = {**self.env, **(env or {})}
        done = run_tickwork(cwd or self.cwd, environment, *args, typed=typed)
        assert done.returncode in codes, f"{line}: {args}\n{done.stdout}{done.stderr}"
        self.ran.add(line)
        return done.stdout

    def serve(
        self,
        line: str,
        args: list[str],
        port: int,
        path: str,
        status: int = 200,
        env: dict[str, str] | None = None,
    ) -> bytes:
        """Start the server ``line`` shows (``env`` added), read ``path`` from it
        (answered with ``status``: 401 where it asks who is calling), stop it."""
        with _started([console_script(), *args], self.cwd, {**self.env, **(env or {})}) as server:
            wait_for_port(port, 30)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as got:
                    answered, body = got.status, bytes(got.read())
            except urllib.error.HTTPError as refused:
                answered, body = refused.code, bytes(refused.read())
            assert answered == status, f"{line}: {answered} {body[:200]!r}"
            assert server.poll() is None, line
        self.ran.add(line)
        return body


class _started:
    def __init__(self, command: list[str], cwd: Path, env: dict[str, str]) -> None:
        self._process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def __enter__(self) -> subprocess.Popen[bytes]:
        return self._process

    def __exit__(self, *exc: object) -> None:
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)


def python(cwd: Path, env: dict[str, str], source: str) -> str:
    """Run ``source`` with ``python`` in ``cwd`` (the reader's own script): its output."""
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "python"), "-c", source],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
