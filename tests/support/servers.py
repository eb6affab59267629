"""Real servers for the tests: a Redis server and a three-node Redis Cluster on loopback.

The harness installs Debian's ``redis-server`` package when the binary is missing, starts
each server on a free port in a temporary folder, and stops what it started. Set
``TICKWORK_TEST_REDIS_URL`` (and ``TICKWORK_TEST_REDIS_CLUSTER_URL``) to use existing
servers instead. A server that cannot be started fails the tests; nothing is skipped.
"""

from __future__ import annotations

import fcntl
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port(cluster_bus: bool = False) -> int:
    """A free loopback port; with ``cluster_bus`` also port + 10000 (Redis Cluster's bus)."""
    for _ in range(200):
        port = random.randrange(20000, 30000)
        if _bindable(port) and (not cluster_bus or _bindable(port + 10000)):
            return port
    raise RuntimeError("no free loopback port found")


@contextmanager
def installing(what: str) -> Iterator[None]:
    """Held while ``what`` is installed: the suite runs in several processes (pytest-xdist),
    and two of them must not run apt-get or fetch the same jars at once. The caller checks
    again under the lock whether another process installed it meanwhile."""
    path = Path(tempfile.gettempdir()) / f"tickwork-tests-{what}.lock"
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_debian_packages(commands: list[str], packages: list[str]) -> None:
    """Install Debian ``packages`` with apt-get unless every one of ``commands`` is on
    the PATH already (a fresh machine has only what the project installs)."""
    if all(shutil.which(command) for command in commands):
        return
    with installing("apt"):
        if not all(shutil.which(command) for command in commands):
            _apt_get_install(commands, packages)


def _apt_get_install(commands: list[str], packages: list[str]) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", *packages],
    ):
        done = subprocess.run(step, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(step)} failed: {done.stderr[-2000:]}")
    missing = [command for command in commands if not shutil.which(command)]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} still missing after apt-get install")


def ensure_redis_installed() -> None:
    ensure_debian_packages(["redis-server", "redis-cli"], ["redis-server", "redis-tools"])


def wait_for_port(port: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A test CA and a server certificate for 127.0.0.1 signed by it, made with
    ``openssl``: (CA certificate, server certificate, server key)."""
    ensure_debian_packages(["openssl"], ["openssl"])
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    cert, key, request = folder / "server.pem", folder / "server.key", folder / "server.csr"
    extensions = folder / "san.ext"
    extensions.write_text("subjectAltName=IP:127.0.0.1\n")
    new_key = ("-newkey", "rsa:2048", "-nodes", "-days", "2")
    for step in (
        ("req", "-x509", *new_key, "-keyout", ca_key, "-out", ca, "-subj", "/CN=tickwork CA"),
        ("req", *new_key[:3], "-keyout", key, "-out", request, "-subj", "/CN=127.0.0.1"),
        (
            "x509",
            "-req",
            "-in",
            request,
            "-CA",
            ca,
            "-CAkey",
            ca_key,
            "-CAcreateserial",
            *("-out", cert, "-days", "2", "-extfile", extensions),
        ),
    ):
        subprocess.run(["openssl", *map(str, step)], check=True, capture_output=True)
    return ca, cert, key


def stop_process(process: subprocess.Popen[Any], wait_s: float) -> None:
    """SIGTERM ``process``; SIGKILL it if it has not exited within ``wait_s``."""
    process.terminate()
    try:
        process.wait(wait_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


class RedisServer:
    """One ``redis-server`` process on a free loopback port."""

    def __init__(self, *extra: str, port: int | None = None, folder: Path | None = None) -> None:
        ensure_redis_installed()
        self.port = port or free_port(cluster_bus="--cluster-enabled" in extra)
        self.folder = folder or Path(tempfile.mkdtemp(prefix="tickwork-redis-"))
        if folder is None:  # a folder of its own: gone when the server object is
            weakref.finalize(self, shutil.rmtree, self.folder, ignore_errors=True)
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = [
            "redis-server",
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dir",
            str(self.folder),
            "--save",
            "",
            "--protected-mode",
            "yes",
            "--daemonize",
            "no",
            "--logfile",
            str(self.folder / "redis.log"),
            *self.extra,
        ]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for_port(self.port)

    def kill(self) -> None:
        """SIGKILL, as in a crash."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, 10)
            self.process = None


class RedisClusterServers:
    """Three masters on loopback (each with ``replicas`` replicas), joined with
    ``redis-cli --cluster create``; a master not heard from for ``node_timeout_ms`` is
    failed over to its replica. With ``secure`` (a folder for certificates), every node
    speaks only TLS (clients, the cluster bus and replication) and its only user is
    ``tick`` with the password ``s3cret``."""

    def __init__(
        self, replicas: int = 0, node_timeout_ms: int = 5000, secure: Path | None = None
    ) -> None:
        ensure_redis_installed()
        self.replicas = replicas
        self.ca: Path | None = None
        self._cli: list[str] = []
        extra: list[str] = []
        if secure is not None:
            self.ca, cert, key = make_certificates(secure)
            extra = [
                *("--tls-cluster", "yes", "--tls-replication", "yes", "--tls-auth-clients", "no"),
                *("--tls-cert-file", str(cert), "--tls-key-file", str(key)),
                *("--tls-ca-cert-file", str(self.ca), "--masteruser", "tick"),
                *("--masterauth", "s3cret", "--user", "tick", "on", ">s3cret", "~*", "&*"),
                *("+@all", "--user", "default", "off"),
            ]
            self._cli = ["--tls", "--cacert", str(self.ca), "--user", "tick", "--pass", "s3cret"]
        self.nodes = []
        for _ in range(3 * (1 + replicas)):
            port = free_port(cluster_bus=True)
            listen = ["--port", "0", "--tls-port", str(port)] if secure is not None else []
            self.nodes.append(
                RedisServer(
                    *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
                    *("--cluster-node-timeout", str(node_timeout_ms), "--appendonly", "no"),
                    *listen,
                    *extra,
                    port=port,
                )
            )
        addresses = [f"127.0.0.1:{n.port}" for n in self.nodes]
        done = subprocess.run(
            [
                "redis-cli",
                *self._cli,
                "--cluster",
                "create",
                *addresses,
                "--cluster-replicas",
                str(replicas),
                "--cluster-yes",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if done.returncode != 0:
            self.stop()
            raise RuntimeError(f"redis-cli --cluster create failed: {done.stdout}{done.stderr}")
        self._wait_ok()

    def _wait_ok(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            states = [
                subprocess.run(
                    ["redis-cli", *self._cli, "-p", str(n.port), "cluster", "info"],
                    capture_output=True,
                    text=True,
                    check=False,
                ).stdout
                for n in self.nodes
            ]
            if all("cluster_state:ok" in s for s in states):
                return
            time.sleep(0.2)
        raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")

    @property
    def url(self) -> str:
        nodes = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)
        if self.ca is None:
            return f"redis+cluster://{nodes}"
        return f"rediss+cluster://tick:s3cret@{nodes}?ssl_ca_certs={self.ca}"

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


# -- replicas -------------------------------------------------------------------------------


def redis_cli(port: int, *command: str) -> str:
    """What ``redis-cli`` prints for ``command`` on the server at ``port``."""
    done = subprocess.run(
        ["redis-cli", "-p", str(port), *command], capture_output=True, text=True, check=False
    )
    return done.stdout


def redis_with_replica() -> list[RedisServer]:
    """A master and its replica (in that order), the replica in sync."""
    master = RedisServer()
    servers = [master, RedisServer("--replicaof", "127.0.0.1", str(master.port))]
    wait_for_replicas(servers, 1)
    return servers


def wait_for_replicas(servers: list[RedisServer], count: int, timeout_s: float = 60) -> None:
    """Wait until ``count`` of ``servers`` are replicas whose link to their master is up."""
    deadline = time.monotonic() + timeout_s
    while linked_replicas(servers) != count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} replica(s) never came in sync")
        time.sleep(0.2)


def linked_replicas(servers: list[RedisServer]) -> int:
    """How many of ``servers`` are replicas whose link to their master is up."""
    infos = [redis_cli(s.port, "info", "replication") for s in servers]
    return sum("role:slave" in i and "master_link_status:up" in i for i in infos)


def master_of(servers: list[RedisServer], key: str) -> RedisServer | None:
    """The one of ``servers`` that serves ``key`` as a master: on a cluster, the master
    whose slot ranges hold the key's slot; otherwise the one master."""
    slot = redis_cli(servers[0].port, "cluster", "keyslot", key).strip()
    for server in servers:
        if "role:master" not in redis_cli(server.port, "info", "replication"):
            continue
        if not slot.isdigit() or _serves_slot(server, int(slot)):
            return server
    return None


def replica_of(servers: list[RedisServer], master: RedisServer) -> RedisServer:
    """The replica of ``master`` among ``servers``."""
    for server in servers:
        info = redis_cli(server.port, "info", "replication")
        if "role:slave" in info and f"master_port:{master.port}" in info:
            return server
    raise AssertionError(f"no replica of the master on port {master.port}")


def _serves_slot(server: RedisServer, slot: int) -> bool:
    for line in redis_cli(server.port, "cluster", "nodes").splitlines():
        fields = line.split()
        if "myself" in fields[2]:
            for span in fields[8:]:
                low, _, high = span.partition("-")
                if low.isdigit() and int(low) <= slot <= int(high or low):
                    return True
    return False
