"""A real PostgreSQL server for the tests, from Debian's ``postgresql`` package.

The harness installs the package when its binaries are missing, runs ``initdb`` in a
temporary folder and starts its own server on a free loopback port. PostgreSQL refuses
to run as root, so under root the server runs as the package's ``postgres`` user (the
folder is handed to it), still as a child of the test process. Clients log in as
``tickwork`` with a password (SCRAM), as an application would. Set
``TICKWORK_TEST_POSTGRES_URL`` to use an existing server instead.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.servers import ensure_debian_packages, free_port, wait_for_port

USER, PASSWORD, DATABASE = "tickwork", "tick-secret", "tickwork"


def postgres_bin() -> Path:
    """The folder of the newest installed server's binaries (installed when missing)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        ensure_debian_packages(["pg_ctlcluster"], ["postgresql"])
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("no PostgreSQL server binaries after installing postgresql")
    return Path(found[-1]).parent


class PostgresServer:
    """One PostgreSQL server in a folder of its own, on a free loopback port."""

    def __init__(self, *settings: str, wal_dir: Path | None = None) -> None:
        """``settings``: more ``name=value`` server settings (``-c``); ``wal_dir``: the
        write-ahead log's folder (elsewhere than the data, in 1 MB segments), when given."""
        self.bin = postgres_bin()
        self.settings = settings
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="tickwork-pg-"))
        self.data = self.folder / "data"
        # the server refuses root: run it (and initdb) as the package's user, as our own
        # child (so that we reap it: a postmaster left a zombie would keep its pid "alive"
        # and refuse the restart with "lock file postmaster.pid already exists")
        self._as_user: dict[str, Any] = {}
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.folder, user.pw_uid, user.pw_gid)
            self._as_user = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        password_file = self.folder / "password"
        password_file.write_text(PASSWORD + "\n")
        if self._as_user:
            shutil.chown(password_file, "postgres")
        self._run(
            str(self.bin / "initdb"),
            *("-D", str(self.data), "-U", USER, "--pwfile", str(password_file)),
            *("--auth-host", "scram-sha-256", "--auth-local", "trust", "-E", "UTF8"),
            "--no-sync",
            *(("--waldir", str(wal_dir), "--wal-segsize", "1") if wal_dir is not None else ()),
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.start()
        self._run(
            str(self.bin / "psql"),
            *("-h", str(self.folder), "-p", str(self.port), "-U", USER, "-d", "postgres"),
            *("-q", "-c", f"CREATE DATABASE {DATABASE}"),
        )

    @property
    def url(self) -> str:
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{DATABASE}"

    def _run(self, *command: str) -> None:
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, cwd=self.folder, **self._as_user
        )
        if done.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {done.stdout[-1000:]}{done.stderr[-2000:]}")

    def start(self) -> None:
        """Start the server on its folder (again, after ``kill``)."""
        log = open(self.folder / "server.log", "ab")  # noqa: SIM115 (the server keeps it)
        self.process = subprocess.Popen(
            [
                str(self.bin / "postgres"),
                *("-D", str(self.data), "-p", str(self.port), "-k", str(self.folder)),
                *("-c", "listen_addresses=127.0.0.1", "-c", "max_connections=400"),
                # a killed server keeps what it committed (the kernel has it); fsync only
                # matters when the machine itself goes down, which no test does
                *("-c", "fsync=off", "-c", "synchronous_commit=on"),
                *("-c", "full_page_writes=off", "-c", "shared_buffers=128MB"),
                *(option for setting in self.settings for option in ("-c", setting)),
            ],
            stdout=log,
            stderr=log,
            start_new_session=True,
            cwd=self.folder,
            **self._as_user,
        )
        log.close()
        wait_for_port(self.port, timeout_s=60)
        deadline = time.monotonic() + 60
        while True:  # the port opens before the server accepts logins
            ready = subprocess.run(
                [str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                capture_output=True,
                check=False,
            )
            if ready.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL on port {self.port} never became ready")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL the server's postmaster and every backend process, as in a crash."""
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
            self.process = None
            time.sleep(0.2)  # the backends go with their session

    def stop(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGINT)  # fast shutdown
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
            self.process = None
        shutil.rmtree(self.folder, ignore_errors=True)
