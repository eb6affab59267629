"""``wait_replicas``: a write returns once that many replicas acknowledged it, on one Redis
with a replica and on a Redis Cluster with a replica per master. A replica that does
not answer (SIGSTOP) makes the write one clear error instead of a silent risk; without
the option the same write returns at once."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from tests.support.helpers import running, wait_for
from tests.support.servers import (
    RedisClusterServers,
    RedisServer,
    master_of,
    redis_with_replica,
    replica_of,
    wait_for_replicas,
)
from tickwork.scheduler import App, ReplicaTimeout

pytestmark = pytest.mark.slow


@dataclass
class Replicated:
    """A deployment with one replica per master: its URL and its servers."""

    url: str
    servers: list[RedisServer]


@pytest.fixture(scope="module", params=["redis", "redis-cluster"])
def replicated(request: pytest.FixtureRequest) -> Iterator[Replicated]:
    if request.param == "redis":
        servers = redis_with_replica()
        deployment = Replicated(servers[0].url, servers)
    else:
        cluster = RedisClusterServers(replicas=1)
        wait_for_replicas(cluster.nodes, 3)
        deployment = Replicated(cluster.url, cluster.nodes)
    yield deployment
    for server in deployment.servers:
        server.stop()


@contextmanager
def replica_stopped(replicated: Replicated, app: App) -> Iterator[None]:
    """The replica of the master holding ``app``'s default queue paused (SIGSTOP)."""
    key = app.backend.store.shard_keys("default", 0)[0]  # type: ignore[attr-defined]
    master = master_of(replicated.servers, key)
    assert master is not None
    replica = replica_of(replicated.servers, master)
    assert replica.process is not None
    replica.process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        replica.process.send_signal(signal.SIGCONT)


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
    assert app.backend.queues.stats("default")[0].ready == 0
    assert handle.cancel() is False  # acked, so gone
    app.close()


def test_a_write_no_replica_acknowledges_is_one_clear_error(replicated: Replicated) -> None:
    waiting = App(_with(replicated.url, "wait_replicas=1&wait_timeout_ms=300&prefix=stop"))
    plain = App(_with(replicated.url, "prefix=stop"))

    def noop() -> None:
        pass

    waited, unwaited = waiting.task(noop), plain.task(noop)
    with replica_stopped(replicated, waiting):
        with pytest.raises(ReplicaTimeout, match=r"applied on Redis .* but 0 of 1 replica"):
            waited.delay()
        written = unwaited.delay()  # no wait: the master's word is enough
        assert plain.get(id=written) is not None
    assert plain.backend.queues.stats("default")[0].ready == 2, "the refused write is on the master"
    handle = waited.delay()  # the replica answers again
    assert waiting.get(id=handle) is not None
    waiting.close()
    plain.close()


def test_a_retry_and_a_poison_no_replica_acknowledges_are_one_clear_error(
    replicated: Replicated,
) -> None:
    """A retry and a poison write what the worker is told is done, so they wait for the
    replicas as an ack does (they went around the wait before)."""
    from tickwork.scheduler.backends import Failure

    waiting = App(_with(replicated.url, "wait_replicas=1&wait_timeout_ms=300&prefix=settle"))

    @waiting.task
    def noop() -> None:
        pass

    noop.delay()
    noop.delay()
    backend = waiting.backend
    first, second = backend.leases.claim("default", 2).claims  # claims are not waited for
    with replica_stopped(replicated, waiting):
        with pytest.raises(ReplicaTimeout):
            backend.leases.retry(first, backend.now_ms() + 60_000, "ValueError: x")
        with pytest.raises(ReplicaTimeout):
            backend.leases.poison(second, Failure("exception", "ValueError", "x"))
    assert backend.queues.stats("default")[0].ready == 0, "both applied on the master"
    assert [r.envelope.id for r in backend.poison.list("default")] == [second.id]
    waiting.close()
