"""A Cassandra 5.0 node from Maven Central jars under Java 17, on loopback: one node of
its own, or a cluster of nodes on loopback addresses of their own (127.0.0.1, .2, .3)."""

from __future__ import annotations

import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.servers import free_port, installing, wait_for_port

# -- Cassandra ------------------------------------------------------------------------------

CASSANDRA_POM = Path(__file__).resolve().parent / "cassandra" / "pom.xml"
CASSANDRA_LIB = Path(__file__).resolve().parents[2] / ".cache" / "cassandra" / "lib"

_CASSANDRA_YAML = """\
cluster_name: 'tickwork-test'
num_tokens: 1
initial_token: {token}
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{seed}:{storage_port}"
listen_address: {address}
rpc_address: {address}
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
    if (CASSANDRA_LIB / _FETCHED).exists():
        return CASSANDRA_LIB
    with installing("cassandra-jars"):
        if not (CASSANDRA_LIB / _FETCHED).exists():
            _fetch_cassandra_jars()
    return CASSANDRA_LIB


#: written once every jar is in place (another process may be copying them)
_FETCHED = ".fetched"


def _fetch_cassandra_jars() -> None:
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
    (CASSANDRA_LIB / _FETCHED).touch()


@dataclass(frozen=True)
class Membership:
    """Where a node listens and which cluster it joins: its loopback address, the seed's
    address, the CQL and storage ports (the same on every node of a cluster, each on its
    own address), its one token, and JVM options of its own (the last ``-Xmx`` wins)."""

    address: str
    seed: str
    port: int
    storage_port: int
    token: int
    jvm_options: tuple[str, ...] = ()


class CassandraNode:
    """One Cassandra 5.0 node from Maven Central jars, on free loopback ports."""

    def __init__(
        self,
        folder: Path | None = None,
        authenticator: str = "AllowAllAuthenticator",
        *,
        member: Membership | None = None,
    ) -> None:
        lib = ensure_cassandra_jars()
        self.folder = folder or Path(tempfile.mkdtemp(prefix="tickwork-cassandra-"))
        member = member or Membership("127.0.0.1", "127.0.0.1", free_port(), free_port(), 0)
        self.address = member.address
        self.port = member.port
        for sub in ("conf", "data", "logs", "tmp"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        config = _CASSANDRA_YAML.format(
            port=self.port,
            storage_port=member.storage_port,
            node=self.folder,
            address=member.address,
            seed=member.seed,
            token=member.token,
        )
        config = config.replace(
            "authenticator: AllowAllAuthenticator", f"authenticator: {authenticator}"
        )
        (self.folder / "conf" / "cassandra.yaml").write_text(config)
        (self.folder / "conf" / "logback.xml").write_text(_LOGBACK)
        jamm = sorted(lib.glob("jamm-*.jar"))
        command = [
            "java",
            *_JVM_OPTIONS,
            *member.jvm_options,
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

    def kill(self) -> None:
        """SIGKILL, as in a crash (``start`` brings it back on the same data)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None
            self.stdout.close()

    def restart(self) -> None:
        """Stop the node (SIGTERM: it drains) and start it again on the same data."""
        self.stop()
        self.start()

    @property
    def hosts(self) -> str:
        return f"{self.address}:{self.port}"

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


#: a cluster node's own options: 1 GiB of heap, a ring delay of 5 s (not 30; with 1 s
#: a joining node sometimes gave up on the seed), and its system tables kept safely
#: (with them unsynced, a node killed came back without the keyspaces and answered
#: "does not exist" for minutes)
CLUSTER_JVM_OPTIONS = (
    "-Xms1G",
    "-Xmx1G",
    "-Dcassandra.ring_delay_ms=5000",
    "-Dcassandra.unsafesystem=false",
)


class CassandraCluster:
    """``size`` nodes on 127.0.0.1, 127.0.0.2, ... (the whole 127/8 is loopback on
    Linux), tokens spread evenly, started one after the other (a node joins once the one
    before it serves CQL), 1 GiB of heap each."""

    def __init__(self, size: int = 3, folder: Path | None = None) -> None:
        base = folder or Path(tempfile.mkdtemp(prefix="tickwork-cassandra-cluster-"))
        port, storage_port = free_port(), free_port()
        step = 2**64 // size
        self.nodes: list[CassandraNode] = []
        try:
            for n in range(size):
                member = Membership(
                    f"127.0.0.{n + 1}",
                    "127.0.0.1",
                    port,
                    storage_port,
                    -(2**63) + n * step,
                    CLUSTER_JVM_OPTIONS,
                )
                self.nodes.append(self._joined(base / f"node{n + 1}", member))
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def _joined(folder: Path, member: Membership) -> CassandraNode:
        """A node that joined; once more on a fresh folder if it gave up on the seed
        ("Unable to contact any seeds", seen on this 2-core machine while the seed was
        still busy starting)."""
        try:
            return CassandraNode(folder, member=member)
        except RuntimeError as err:
            if "Unable to contact any seeds" not in str(err):
                raise
            return CassandraNode(folder.with_name(folder.name + "-again"), member=member)

    @property
    def hosts(self) -> str:
        return ",".join(node.hosts for node in self.nodes)

    def stop(self) -> None:
        for node in self.nodes:
            if node.process is not None:
                node.stop()
