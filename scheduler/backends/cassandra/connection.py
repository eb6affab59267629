"""Connecting to Cassandra: the URL options, the cluster and session, and the plumbing every
operation runs through (prepared statements, error translation, the coordinator's clock,
concurrent execution)."""

from __future__ import annotations

import re
import socket
import ssl
import threading
import time
from typing import Any
from urllib.parse import unquote, urlsplit

from cassandra import AuthenticationFailed, ConsistencyLevel
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import (
    EXEC_PROFILE_DEFAULT,
    Cluster,
    ExecutionProfile,
    NoHostAvailable,
    Session,
)
from cassandra.concurrent import execute_concurrent, execute_concurrent_with_args
from cassandra.policies import (
    DCAwareRoundRobinPolicy,
    ExponentialReconnectionPolicy,
    TokenAwarePolicy,
)
from cassandra.query import BatchStatement, BatchType, PreparedStatement
from pydantic import Field, field_validator

from tickwork.scheduler.backends.cassandra.batching import unset_nulls
from tickwork.scheduler.backends.cassandra.rows import cached_named_tuple_factory
from tickwork.scheduler.backends.cassandra.schema import TABLES, create_schema
from tickwork.scheduler.backends.options import UrlOptions, parse_options
from tickwork.scheduler.errors import (
    BackendError,
    BackendUnavailable,
    ConfigurationError,
)


class CassandraOptions(UrlOptions):
    """The query options a Cassandra URL may carry."""

    consistency: str = Field(default="QUORUM", description="consistency of reads and writes")
    replication_factor: int = Field(default=1, ge=1, description="of a keyspace created here")
    shards: int = Field(default=1, ge=1, description="shards of a new queue")
    buckets: int = Field(default=16, ge=1, description="time buckets in a new queue's ring")
    bucket_seconds: int = Field(default=60, ge=1, description="width of one time bucket")
    lock_ttl_ms: int = Field(default=10_000, ge=100, description="a shard lock's lifetime")
    username: str | None = None
    password: str | None = None
    ssl: bool = Field(default=False, description="TLS with the system's trusted CAs")
    create_schema: bool = Field(default=True, description="create keyspace and tables if absent")

    @field_validator("consistency")
    @classmethod
    def known_level(cls, value: str) -> str:
        if value.upper() not in ConsistencyLevel.name_to_value:
            known = ", ".join(sorted(ConsistencyLevel.name_to_value))
            raise ValueError(f"{value!r} is not a consistency level ({known})")
        return value.upper()


def connect(url: str) -> tuple[Session, Cluster, str, CassandraOptions]:
    """(session, cluster, keyspace, options) for ``url``, the schema created unless
    ``create_schema=false``."""
    options = parse_options(CassandraOptions, url, "Cassandra")
    parts = urlsplit(url)
    keyspace = parts.path.strip("/") or "tickwork"
    if not keyspace.replace("_", "").isalnum():
        raise ConfigurationError(f"invalid keyspace name {keyspace!r}")
    hosts, ports = [], set()
    try:
        for item in parts.netloc.rsplit("@", 1)[-1].split(","):
            host, _, port = item.partition(":")
            hosts.append(host or "127.0.0.1")
            ports.add(int(port or 9042))
    except ValueError as err:
        raise ConfigurationError(f"invalid Cassandra host list {parts.netloc!r}: {err}") from err
    if len(ports) > 1:
        raise ConfigurationError("all Cassandra hosts must use the same port")
    username = unquote(parts.username or options.username or "") or None
    password = unquote(parts.password or options.password or "") or None
    auth = PlainTextAuthProvider(username, password) if username else None
    tls = ssl.create_default_context() if options.ssl else None
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
        consistency_level=ConsistencyLevel.name_to_value[options.consistency],
        serial_consistency_level=ConsistencyLevel.SERIAL,
        request_timeout=20,
        row_factory=cached_named_tuple_factory,
    )
    cluster = Cluster(
        hosts,
        port=ports.pop(),
        auth_provider=auth,
        ssl_context=tls,
        connect_timeout=10,
        # the driver's 2 s for the control connection's reads of the system tables failed
        # the whole connect (NoHostAvailable, OperationTimedOut) on a loaded host whose
        # node answered in 3 s: given as long as a connection attempt
        control_connection_timeout=10,
        protocol_version=5,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        # a node back from a restart is used again within seconds (the driver's default
        # waits up to 10 minutes between attempts)
        reconnection_policy=ExponentialReconnectionPolicy(0.5, 10.0),
        # without it small requests wait for delayed ACKs: ~40 ms per claim batch
        sockopts=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
    )
    try:
        session = cluster.connect()
    except NoHostAvailable as err:
        cluster.shutdown()
        where = parts.netloc.rsplit("@", 1)[-1]
        if any(isinstance(e, AuthenticationFailed) for e in err.errors.values()):
            raise BackendUnavailable(
                f"Cassandra at {where} refused the credentials (give a role's name and "
                f"password: cassandra://user:password@host/keyspace): {err}"
            ) from err
        raise BackendUnavailable(f"cannot reach Cassandra at {where}: {err}") from err
    if options.create_schema:
        create_schema(session, keyspace, options.replication_factor)
    return session, cluster, keyspace, options


_TABLE = re.compile(r"\b(FROM|INTO|UPDATE)\s+(" + "|".join(TABLES) + r")\b")


class CassandraConnection:
    """The session and its plumbing: statements prepared once per keyspace, errors translated,
    the coordinator's clock, concurrent and batched execution."""

    def __init__(self, session: Session, cluster: Cluster, keyspace: str) -> None:
        self.session = session
        self.cluster = cluster
        self.ks = keyspace
        self.guard = threading.Lock()
        self.prepared: dict[str, PreparedStatement] = {}
        self.offset_ms = 0
        self.offset_ms = self.measure_offset()
        self.last_stamp_us = 0

    def run(self, statement: Any, params: Any = None, **kwargs: Any) -> Any:
        try:
            return self.session.execute(statement, unset_nulls(params), **kwargs)
        except NoHostAvailable as err:
            raise BackendUnavailable(f"Cassandra is unreachable: {err}") from err
        except Exception as err:  # the driver's errors share no useful root
            raise BackendError(f"Cassandra error: {err}") from err

    def prepare(self, cql: str) -> PreparedStatement:
        """``cql`` prepared once (in this keyspace); preparing is a request to a node, so a
        node that cannot be reached is ``BackendUnavailable`` here too: a statement first
        used while the node is down (one per count of ids in an ``IN``, say) must not
        surface the driver's own error to a worker's thread."""
        statement = self.prepared.get(cql)
        if statement is None:
            try:
                statement = self.session.prepare(_TABLE.sub(rf"\1 {self.ks}.\2", cql))
            except NoHostAvailable as err:
                raise BackendUnavailable(f"Cassandra is unreachable: {err}") from err
            except Exception as err:  # the driver's errors share no useful root
                raise BackendError(f"Cassandra error: {err}") from err
            self.prepared[cql] = statement
        return statement

    def measure_offset(self) -> int:
        row = self.run("SELECT toUnixTimestamp(now()) AS t FROM system.local").one()
        return int(row.t) - int(time.time() * 1000)

    def now_ms(self) -> int:
        return int(time.time() * 1000) + self.offset_ms

    def now_us(self) -> int:
        return time.time_ns() // 1000 + self.offset_ms * 1000

    def stamp_us(self) -> int:
        """The coordinator's time in microseconds, strictly increasing in this process:
        what orders two ledger records of one subject written in the same millisecond."""
        with self.guard:
            self.last_stamp_us = max(self.now_us(), self.last_stamp_us + 1)
            return self.last_stamp_us

    def close(self) -> None:
        self.cluster.shutdown()

    def concurrently(self, statement: PreparedStatement, args: list[Any]) -> list[Any]:
        """Run ``statement`` once per parameter tuple, concurrently; the results in order."""
        if not args:
            return []
        try:
            results = execute_concurrent_with_args(
                self.session, statement, [unset_nulls(a) for a in args], concurrency=64
            )
        except NoHostAvailable as err:
            raise BackendUnavailable(f"Cassandra is unreachable: {err}") from err
        except Exception as err:  # the first failure, raised as the driver's own error
            raise BackendError(f"Cassandra error: {err}") from err
        found = []
        for ok, result in results:
            if not ok:
                raise BackendError(f"Cassandra error: {result}")
            found.append(result)
        return found

    def execute_many(self, statements: list[Any]) -> None:
        if not statements:
            return
        try:
            execute_concurrent(
                self.session,
                [(s, None) for s in statements],
                concurrency=32,
                raise_on_first_error=True,
            )
        except NoHostAvailable as err:
            raise BackendUnavailable(f"Cassandra is unreachable: {err}") from err
        except Exception as err:
            raise BackendError(f"Cassandra error: {err}") from err

    @staticmethod
    def batch() -> BatchStatement:
        return BatchStatement(batch_type=BatchType.LOGGED)
