"""Real servers for the tests: a Redis server and a three-node Redis Cluster on loopback.

The harness installs Debian's ``redis-server`` package when the binary is missing, starts
each server on a free port in a temporary folder, and stops what it started. Set
``TICKWORK_TEST_REDIS_URL`` (and ``TICKWORK_TEST_REDIS_CLUSTER_URL``) to use existing
servers instead. A server that cannot be started fails the tests; nothing is skipped.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path


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


def ensure_debian_packages(commands: list[str], packages: list[str]) -> None:
    """Install Debian ``packages`` with apt-get unless every one of ``commands`` is on
    the PATH already (a fresh machine has only what the project installs)."""
    if all(shutil.which(command) for command in commands):
        return
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


class RedisServer:
    """One ``redis-server`` process on a free loopback port."""

    def __init__(self, *extra: str, port: int | None = None, folder: Path | None = None) -> None:
        ensure_redis_installed()
        self.port = port or free_port(cluster_bus="--cluster-enabled" in extra)
        self.folder = folder or Path(tempfile.mkdtemp(prefix="tickwork-redis-"))
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
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
            self.process = None


class RedisClusterServers:
    """Three masters on loopback (each with ``replicas`` replicas), joined with
    ``redis-cli --cluster create``; a master not heard from for ``node_timeout_ms`` is
    failed over to its replica."""

    def __init__(self, replicas: int = 0, node_timeout_ms: int = 5000) -> None:
        ensure_redis_installed()
        self.replicas = replicas
        self.nodes = [
            RedisServer(
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                str(node_timeout_ms),
                "--appendonly",
                "no",
            )
            for _ in range(3 * (1 + replicas))
        ]
        addresses = [f"127.0.0.1:{n.port}" for n in self.nodes]
        done = subprocess.run(
            [
                "redis-cli",
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
                    ["redis-cli", "-p", str(n.port), "cluster", "info"],
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
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


# -- Cassandra ------------------------------------------------------------------------------

CASSANDRA_POM = Path(__file__).resolve().parent / "cassandra" / "pom.xml"
CASSANDRA_LIB = Path(__file__).resolve().parents[2] / ".cache" / "cassandra" / "lib"

_CASSANDRA_YAML = """\
cluster_name: 'tickwork-test'
num_tokens: 1
initial_token: 0
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:{storage_port}"
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: {storage_port}
native_transport_port: {port}
start_native_transport: true
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
role_manager: CassandraRoleManager
network_authorizer: AllowAllNetworkAuthorizer
data_file_directories:
  - {node}/data/data
commitlog_directory: {node}/data/commitlog
hints_directory: {node}/data/hints
saved_caches_directory: {node}/data/saved_caches
cdc_raw_directory: {node}/data/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
commitlog_segment_size: 32MiB
commitlog_disk_access_mode: legacy
storage_compatibility_mode: NONE
auto_snapshot: false
incremental_backups: false
snapshot_before_compaction: false
hinted_handoff_enabled: false
concurrent_compactors: 1
memtable_flush_writers: 1
paxos_variant: v2
paxos_state_purging: gc_grace
cas_contention_timeout: 1000ms
write_request_timeout: 2000ms
read_request_timeout: 5000ms
range_request_timeout: 10000ms
truncate_request_timeout: 60000ms
tombstone_warn_threshold: 1000
tombstone_failure_threshold: 100000
batch_size_warn_threshold: 16KiB
batch_size_fail_threshold: 50KiB  # Cassandra's default
"""

_LOGBACK = """\
<configuration scan="false">
  <appender name="SYSTEMLOG" class="ch.qos.logback.core.FileAppender">
    <file>${cassandra.logdir}/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="SYSTEMLOG"/></root>
</configuration>
"""

_JVM_OPTIONS = [
    "-ea",
    "-da:net.openhft...",
    "-XX:+UseThreadPriorities",
    "-Xss256k",
    "-XX:+UseTLAB",
    "-XX:+ResizeTLAB",
    "-XX:+PerfDisableSharedMem",
    "-Djava.net.preferIPv4Stack=true",
    "-Dchronicle.analytics.disable=true",
    "-XX:+UseG1GC",
    "-XX:+ParallelRefProcEnabled",
    "-XX:MaxTenuringThreshold=1",
    "-XX:G1HeapRegionSize=16m",
    "-XX:MaxGCPauseMillis=300",
    "-XX:InitiatingHeapOccupancyPercent=70",
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports",
    "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports",
    "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports",
    "java.management/com.sun.jmx.remote.security=ALL-UNNAMED",
    "--add-exports",
    "java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports",
    "java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports",
    "java.sql/java.sql=ALL-UNNAMED",
    "--add-exports",
    "java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports",
    "jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens",
    "jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.io=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.util=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-exports",
    "jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-exports",
    "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-opens",
    "jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
    # a keyspace per test: about 100 keyspaces of 20 tables fill 2 GiB; with 2 GiB the node
    # stalled in GC late in the suite (connections timed out after 10 s)
    "-Xms4G",
    "-Xmx4G",
    "-XX:OnOutOfMemoryError=kill -9 %p",
    "-Dcassandra-foreground=yes",
    "-Dcassandra.skip_wait_for_gossip_to_settle=0",
    "-Dcassandra.unsafesystem=true",
]


def ensure_cassandra_jars() -> Path:
    """Fetch cassandra-all and its dependencies from Maven Central once (cached)."""
    if any(CASSANDRA_LIB.glob("cassandra-all-*.jar")):
        return CASSANDRA_LIB
    CASSANDRA_LIB.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            "mvn",
            "-q",
            "-B",
            "-f",
            str(CASSANDRA_POM),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={CASSANDRA_LIB}",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=1200,
    )
    if done.returncode != 0 or not any(CASSANDRA_LIB.glob("cassandra-all-*.jar")):
        raise RuntimeError(f"mvn dependency:copy-dependencies failed: {done.stdout[-3000:]}")
    return CASSANDRA_LIB


class CassandraNode:
    """One Cassandra 5.0 node from Maven Central jars, on free loopback ports."""

    def __init__(
        self, folder: Path | None = None, authenticator: str = "AllowAllAuthenticator"
    ) -> None:
        lib = ensure_cassandra_jars()
        self.folder = folder or Path(tempfile.mkdtemp(prefix="tickwork-cassandra-"))
        self.port = free_port()
        storage_port = free_port()
        for sub in ("conf", "data", "logs", "tmp"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        config = _CASSANDRA_YAML.format(port=self.port, storage_port=storage_port, node=self.folder)
        config = config.replace(
            "authenticator: AllowAllAuthenticator", f"authenticator: {authenticator}"
        )
        (self.folder / "conf" / "cassandra.yaml").write_text(config)
        (self.folder / "conf" / "logback.xml").write_text(_LOGBACK)
        jamm = sorted(lib.glob("jamm-*.jar"))
        command = [
            "java",
            *_JVM_OPTIONS,
            *([f"-javaagent:{jamm[0]}"] if jamm else []),
            f"-XX:HeapDumpPath={self.folder / 'logs'}",
            f"-Dlogback.configurationFile={self.folder / 'conf' / 'logback.xml'}",
            f"-Dcassandra.logdir={self.folder / 'logs'}",
            f"-Dcassandra.storagedir={self.folder / 'data'}",
            f"-Dcassandra.config=file://{self.folder / 'conf' / 'cassandra.yaml'}",
            f"-Djava.io.tmpdir={self.folder / 'tmp'}",
            f"-Djna.tmpdir={self.folder / 'tmp'}",
            "-cp",
            f"{lib}/*",
            "org.apache.cassandra.service.CassandraDaemon",
        ]
        self._command = command
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        """Start the node (on its folder and ports) and wait until it serves CQL."""
        self._started_logs = len(self._log())  # a restart reads only what follows
        self.stdout = (self.folder / "logs" / "stdout.log").open("ab")
        self.process = subprocess.Popen(
            self._command, stdout=self.stdout, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._wait_ready()

    def restart(self) -> None:
        """Stop the node (SIGTERM: it drains) and start it again on the same data."""
        self.stop()
        self.start()

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _log(self) -> str:
        path = self.folder / "logs" / "system.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _wait_ready(self, timeout_s: float = 180.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"Cassandra exited: {self._log()[-4000:]}")
            log = self._log()[self._started_logs :]
            if "Exception encountered during startup" in log:
                self.stop()
                raise RuntimeError(f"Cassandra failed to start: {log[-4000:]}")
            if "Starting listening for CQL clients" in log and "Startup complete" in log:
                wait_for_port(self.port)
                return
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"Cassandra did not start in {timeout_s} s: {self._log()[-4000:]}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
            self.process = None
        self.stdout.close()
