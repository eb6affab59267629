"""Redis URL options and connecting.

``redis://[user:password@]host:6379/0?shards=1&prefix=tw``; ``rediss://`` for TLS;
``redis+cluster://host:7000,host:7001`` for Redis Cluster (a startup node list),
``rediss+cluster://`` for a cluster over TLS;
``wait_replicas=N`` makes every acknowledged write wait for N replicas (``replicas.py``).
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import redis
from pydantic import Field
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import RedisClusterException
from redis.retry import Retry

from tickwork.scheduler.backends.options import UrlOptions, parse_options
from tickwork.scheduler.errors import BackendUnavailable, ConfigurationError


class RedisOptions(UrlOptions):
    """The query options a Redis URL may carry."""

    shards: int = Field(default=1, ge=1, description="shards of a new queue")
    prefix: str = Field(default="tw", min_length=1, description="prefix of every key")
    sweep: int = Field(
        default=1000, ge=1, description="expired leases and due messages moved per claim, at most"
    )
    wait_replicas: int = Field(
        default=0, ge=0, description="replicas that must acknowledge a write before it returns"
    )
    wait_timeout_ms: int = Field(
        default=1000, ge=1, description="how long a write waits for its replicas"
    )
    # passed to redis-py
    socket_timeout: float = Field(default=10.0, gt=0)
    socket_connect_timeout: float = Field(default=5.0, gt=0)
    health_check_interval: int = Field(default=30, ge=0)
    max_connections: int | None = Field(default=None, ge=1)
    client_name: str | None = None
    ssl_cert_reqs: Literal["none", "optional", "required"] | None = None
    ssl_ca_certs: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool | None = None

    def client_options(self) -> dict[str, Any]:
        """The redis-py keyword arguments these options set."""
        ours = {"shards", "prefix", "sweep", "wait_replicas", "wait_timeout_ms"}
        return {
            name: value
            for name, value in self.model_dump().items()
            if name not in ours and value is not None
        }


def connect(url: str) -> tuple[redis.Redis | RedisCluster, RedisOptions, bool, str]:
    """(client, options, is a cluster, where) for ``url``; the client has answered a ping
    only once the backend is built."""
    options = parse_options(RedisOptions, url, "Redis")
    parts = urlsplit(url)
    common: dict[str, Any] = {
        "retry": Retry(ExponentialBackoff(cap=2.0, base=0.05), retries=5),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
        **options.client_options(),
    }
    try:
        if parts.scheme in ("redis+cluster", "rediss+cluster"):
            nodes = []
            for host_port in parts.netloc.rsplit("@", 1)[-1].split(","):
                host, _, port = host_port.partition(":")
                node = ClusterNode(host or "localhost", int(port or 6379))  # type: ignore[no-untyped-call]
                nodes.append(node)
            common.pop("max_connections", None)  # per node in a cluster: redis-py's default
            if parts.scheme == "rediss+cluster":
                common["ssl"] = True
            client: redis.Redis | RedisCluster = RedisCluster(
                startup_nodes=nodes, username=parts.username, password=parts.password, **common
            )
            return client, options, True, parts.netloc.rsplit("@", 1)[-1]
        clean = without_query(url)
        address = f"{parts.hostname}:{parts.port or 6379}"
        _refused_at_once(clean, common, address)
        client = redis.Redis.from_url(clean, **common)
        return client, options, False, address
    except (redis.RedisError, RedisClusterException) as err:
        raise unreachable(parts.netloc.rsplit("@", 1)[-1], err) from err
    except ValueError as err:
        raise ConfigurationError(f"invalid Redis URL {url!r}: {err}") from err


def without_query(url: str) -> str:
    """``url`` with its options (the query) taken out: what redis-py is given."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def unreachable(where: str, err: Exception) -> BackendUnavailable:
    """The error for a connection that failed, saying why where the driver's words do not
    (a cluster client wraps the first node's error in ``RedisClusterException``)."""
    why = _refusal(err)
    if why is None and ("WRONG_VERSION_NUMBER" in str(err) or "reset by peer" in str(err)):
        why = "the connection was dropped (TLS on one side only? rediss:// speaks TLS)"
    if why is None:
        return BackendUnavailable(f"Redis at {where} is unreachable: {err}")
    return BackendUnavailable(f"Redis at {where}: {why}: {err}")


def _refusal(err: Exception) -> str | None:
    """What a server that answered but refused the connection means (retrying it does not
    help): credentials refused, or a certificate not trusted; None for other errors."""
    cause = err.__cause__
    if isinstance(err, redis.AuthenticationError) or isinstance(cause, redis.AuthenticationError):
        return _CREDENTIALS
    if "HELLO must be called" in str(err) or "NOAUTH" in str(err):
        return _CREDENTIALS
    if "CERTIFICATE_VERIFY_FAILED" in str(err):
        return "its TLS certificate is not trusted (give its CA with ?ssl_ca_certs=PATH)"
    return None


_CREDENTIALS = (
    "it refused the credentials (give the user and password of an ACL user in the "
    "URL: redis://user:password@host)"
)


def _refused_at_once(url: str, common: dict[str, Any], where: str) -> None:
    """Connect once without retries: refused credentials or an untrusted certificate fail
    now, not after the retries (nested in redis-py: 20 s) meant for a server restarting."""
    probe = redis.Redis.from_url(url, **{**common, "retry": Retry(NoBackoff(), 0)})
    try:
        probe.ping()
    except redis.RedisError as err:
        if _refusal(err) is not None:
            raise unreachable(where, err) from err
    finally:
        probe.close()
