"""Every backend the contract suite runs against, and how to get a fresh one.

SQLite runs on a ``ManualClock`` (tests move time instantly). Server backends use the
server's clock, so ``advance`` sleeps for real there; tests are written to work either way.
Each Redis test gets its own key prefix, each PostgreSQL test its own schema and each
Cassandra test its own keyspace, so tests never see each other's data.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.cassandra_servers import CassandraNode
from tests.support.postgres_servers import PostgresServer
from tests.support.servers import RedisClusterServers, RedisServer
from tickwork.scheduler import Backend, open_backend
from tickwork.scheduler.clock import ManualClock

BACKEND_NAMES = ["sqlite", "postgres", "redis", "redis-cluster", "cassandra"]
#: the embedded backend and a sharded server: for integration tests of logic above the
#: backend contract (which the contract suite checks on every backend), to keep the suite
#: within its time
PAIR_NAMES = ["sqlite", "redis-cluster"]


class Servers:
    """Servers started on first use and stopped at the end of the test session."""

    redis: RedisServer | None = None
    cluster: RedisClusterServers | None = None
    cassandra: CassandraNode | None = None
    postgres: PostgresServer | None = None

    @classmethod
    def postgres_url(cls) -> str:
        if url := os.environ.get("TICKWORK_TEST_POSTGRES_URL"):
            return url
        if cls.postgres is None:
            cls.postgres = PostgresServer()
        return cls.postgres.url

    @classmethod
    def cassandra_hosts(cls) -> str:
        if hosts := os.environ.get("TICKWORK_TEST_CASSANDRA_HOSTS"):
            return hosts
        if cls.cassandra is None:
            cls.cassandra = CassandraNode()
        return cls.cassandra.hosts

    @classmethod
    def redis_url(cls) -> str:
        if url := os.environ.get("TICKWORK_TEST_REDIS_URL"):
            return url
        if cls.redis is None:
            cls.redis = RedisServer()
        return cls.redis.url

    @classmethod
    def cluster_url(cls) -> str:
        if url := os.environ.get("TICKWORK_TEST_REDIS_CLUSTER_URL"):
            return url
        if cls.cluster is None:
            cls.cluster = RedisClusterServers()
        return cls.cluster.url

    @classmethod
    def stop_all(cls) -> None:
        """SIGKILL each server at the session's end and remove its folder: the data is
        thrown away, and a graceful stop (Cassandra drains, Redis saves) took up to half a
        minute of the suite's last seconds."""
        redis_nodes = [cls.redis] if cls.redis is not None else []
        if cls.cluster is not None:
            redis_nodes += cls.cluster.nodes
        for node in redis_nodes:
            node.kill()
            shutil.rmtree(node.folder, ignore_errors=True)
        if cls.cassandra is not None:
            cls.cassandra.kill()
            shutil.rmtree(cls.cassandra.folder, ignore_errors=True)
        if cls.postgres is not None:
            cls.postgres.kill()
            shutil.rmtree(cls.postgres.folder, ignore_errors=True)
        cls.redis = cls.cluster = cls.cassandra = cls.postgres = None


def backend_url(name: str, tmp_path: Path, shards: int | None = None) -> str:
    """A URL for a fresh, empty backend of kind ``name``."""
    if name == "sqlite":
        return f"sqlite:///{tmp_path / 'tickwork.db'}"
    prefix = f"t{uuid.uuid4().hex[:12]}"
    if name == "postgres":  # a schema per test
        return f"{Servers.postgres_url()}?schema={prefix}"
    if name == "cassandra":  # a keyspace per test; consistency ONE on a single node
        url = f"cassandra://{Servers.cassandra_hosts()}/{prefix}?consistency=ONE"
        return url if shards is None else f"{url}&shards={shards}"
    base = Servers.redis_url() if name == "redis" else Servers.cluster_url()
    separator = "&" if "?" in base else "?"
    url = f"{base}{separator}prefix={prefix}"
    return url if shards is None else f"{url}&shards={shards}"


@dataclass
class BackendHarness:
    name: str
    url: str
    backend: Backend
    clock: ManualClock | None

    def advance(self, ms: int) -> None:
        """Let ``ms`` milliseconds of backend time pass."""
        if self.clock is not None:
            self.clock.advance(ms)
        else:
            time.sleep(ms / 1000)

    def now_ms(self) -> int:
        return self.backend.now_ms()

    def reopen(self) -> Backend:
        """A second, independent client of the same storage."""
        return open_backend(self.url, clock=self.clock)


@contextmanager
def make_harness(name: str, tmp_path: Path) -> Iterator[BackendHarness]:
    clock = ManualClock() if name == "sqlite" else None
    # the cluster runs the contract with queues spread over three shards (slots)
    url = backend_url(name, tmp_path, shards=3 if name in ("redis-cluster", "cassandra") else None)
    backend = open_backend(url, clock=clock)
    try:
        yield BackendHarness(name, url, backend, clock)
    finally:
        backend.close()
