"""``wait_replicas``: a write returns once that many replicas acknowledged it, on one Redis
with a replica and on a Redis Cluster with a replica per master. A replica that does
not answer (SIGSTOP) makes the write one clear error instead of a silent risk; without
the option the same write returns at once."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from scheduler import App, ReplicaTimeout
from tests.support.helpers import running, wait_for, wait_until
from tests.support.servers import RedisClusterServers, RedisServer

pytestmark = pytest.mark.slow


@dataclass
class Replicated:
    """A deployment with replicas: its URL, and how to find the replica of a key's
    master."""

    url: str
    servers: list[RedisServer]

    def replica_of(self, key: str) -> RedisServer:
        """The replica of the master that serves ``key``."""
        slot = _cli(self.servers[0].port, "cluster", "keyslot", key).strip()
        masters = [s for s in self.servers if "role:master" in _cli(s.port, "info", "replication")]
        if slot.isdigit():  # a cluster: the master whose slot ranges hold it
            masters = [m for m in masters if _serves(m, int(slot))]
        (master,) = masters
        for server in self.servers:
            info = _cli(server.port, "info", "replication")
            if "role:slave" in info and f"master_port:{master.port}" in info:
                return server
        raise AssertionError(f"no replica of the master on port {master.port}")


def _cli(port: int, *command: str) -> str:
    done = subprocess.run(
        ["redis-cli", "-p", str(port), *command], capture_output=True, text=True, check=False
    )
    return done.stdout


def _serves(master: RedisServer, slot: int) -> bool:
    for line in _cli(master.port, "cluster", "nodes").splitlines():
        fields = line.split()
        if "myself" in fields[2]:
            for span in fields[8:]:
                low, _, high = span.partition("-")
                if low.isdigit() and int(low) <= slot <= int(high or low):
                    return True
    return False


def _in_sync(servers: list[RedisServer], replicas: int) -> bool:
    infos = [_cli(s.port, "info", "replication") for s in servers]
    linked = [i for i in infos if "role:slave" in i and "master_link_status:up" in i]
    return len(linked) == replicas


@pytest.fixture(scope="module", params=["redis", "redis-cluster"])
def replicated(request: pytest.FixtureRequest) -> Iterator[Replicated]:
    if request.param == "redis":
        master = RedisServer()
        replica = RedisServer("--replicaof", "127.0.0.1", str(master.port))
        servers = [master, replica]
        deployment = Replicated(master.url, servers)
    else:
        cluster = RedisClusterServers(replicas=1)
        servers = cluster.nodes
        deployment = Replicated(cluster.url, servers)
    assert wait_until(lambda: _in_sync(servers, len(servers) // 2), 60), "replicas never synced"
    yield deployment
    for server in servers:
        server.stop()


def _with(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


def test_writes_that_wait_for_a_replica_run_a_workload_end_to_end(
    replicated: Replicated,
) -> None:
    app = App(_with(replicated.url, "wait_replicas=1&prefix=e2e"))
    done: list[int] = []

    @app.task
    def record(n: int) -> None:
        done.append(n)

    report = app.enqueue_many(record.call(n) for n in range(40))
    assert report.enqueued == 40
    handle = record.delay(40)
    assert app.get(id=handle) is not None
    with running(app):
        wait_for(lambda: len(done) == 41)
    assert sorted(done) == list(range(41))
    assert app.backend.stats("default")[0].ready == 0
    assert handle.cancel() is False  # acked, so gone
    app.close()


def test_a_write_no_replica_acknowledges_is_one_clear_error(replicated: Replicated) -> None:
    waiting = App(_with(replicated.url, "wait_replicas=1&wait_timeout_ms=300&prefix=stop"))
    plain = App(_with(replicated.url, "prefix=stop"))

    def noop() -> None:
        pass

    waited, unwaited = waiting.task(noop), plain.task(noop)
    key = waiting.backend._shard_keys("default", 0)[0]  # type: ignore[attr-defined]
    replica = replicated.replica_of(key)
    assert replica.process is not None
    replica.process.send_signal(signal.SIGSTOP)
    try:
        with pytest.raises(ReplicaTimeout, match=r"applied on Redis .* but 0 of 1 replica"):
            waited.delay()
        written = unwaited.delay()  # no wait: the master's word is enough
        assert plain.get(id=written) is not None
    finally:
        replica.process.send_signal(signal.SIGCONT)
    assert plain.backend.stats("default")[0].ready == 2, "the refused write is on the master"
    handle = waited.delay()  # the replica answers again
    assert waiting.get(id=handle) is not None
    waiting.close()
    plain.close()
