"""Security settings against real servers: Redis speaking only TLS (certificates made
here), with its default user off and an ACL user with a password. The right URL works
end to end; each wrong one is one clear error that says what to fix."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.helpers import run_one_task, without_threads
from tests.support.servers import RedisClusterServers, RedisServer, free_port, make_certificates
from tickwork.scheduler import App, BackendUnavailable

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """(TLS port, CA certificate) of a Redis with no plain port, whose only user is
    ``tick`` with the password ``s3cret``."""
    folder = tmp_path_factory.mktemp("tls")
    ca, cert, key = make_certificates(folder)
    port = free_port()
    server = RedisServer(
        *("--port", "0", "--tls-port", str(port), "--tls-auth-clients", "no"),
        *("--tls-cert-file", str(cert), "--tls-key-file", str(key), "--tls-ca-cert-file", str(ca)),
        *("--user", "tick", "on", ">s3cret", "~*", "&*", "+@all", "--user", "default", "off"),
        port=port,
        folder=folder,
    )
    yield port, ca
    server.stop()


def test_tls_and_an_acl_user_run_a_task_end_to_end(tls_redis: tuple[int, Path]) -> None:
    port, ca = tls_redis
    app = App(f"rediss://tick:s3cret@127.0.0.1:{port}/0?ssl_ca_certs={ca}")
    run_one_task(app)
    assert app.backend.queues.stats("default")[0].ready == 0
    app.close()


def test_tls_and_an_acl_user_enqueue_from_an_event_loop(tls_redis: tuple[int, Path]) -> None:
    """The async producer's own connections (``loop_wire.py``) speak TLS as the user."""
    port, ca = tls_redis
    app = App(f"rediss://tick:s3cret@127.0.0.1:{port}/0?ssl_ca_certs={ca}")

    @app.task
    def noop(n: int) -> None: ...

    app.backend.store.shard_count("default")  # type: ignore[attr-defined]
    app.backend_clock.now_ms()  # both known: the call goes from the loop, no thread
    message_id = without_threads(noop.adelay(1))
    stored = app.backend.messages.get(message_id)
    assert stored is not None and stored.envelope.queue == "default"
    app.close()


@pytest.mark.parametrize(
    ("credentials", "scheme", "query", "says"),
    [
        ("tick:wrong@", "rediss", "ca", "refused the credentials"),
        ("", "rediss", "ca", "refused the credentials"),
        ("tick:s3cret@", "rediss", "", "certificate is not trusted"),
        ("tick:s3cret@", "redis", "", "TLS on one side only"),
    ],
)
def test_a_wrong_setting_is_one_clear_error(
    tls_redis: tuple[int, Path], credentials: str, scheme: str, query: str, says: str
) -> None:
    port, ca = tls_redis
    options = f"?ssl_ca_certs={ca}" if query == "ca" else ""
    app = App(f"{scheme}://{credentials}127.0.0.1:{port}/0{options}")
    with pytest.raises(BackendUnavailable, match=says) as caught:
        app.backend.now_ms()
    assert f"127.0.0.1:{port}" in str(caught.value)
    app.close()


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    """A Redis Cluster speaking only TLS (to clients, on its bus, to replicas), whose
    only user is ``tick`` with the password ``s3cret``."""
    cluster = RedisClusterServers(secure=tmp_path_factory.mktemp("tls-cluster"))
    yield cluster
    cluster.stop()


def test_a_tls_cluster_with_an_acl_user_runs_a_task_end_to_end(
    tls_cluster: RedisClusterServers,
) -> None:
    app = App(f"{tls_cluster.url}&wait_replicas=0&shards=4")
    run_one_task(app)
    assert app.backend.queues.stats("default")[0].ready == 0
    app.close()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (("tick:s3cret@", "tick:wrong@"), "refused the credentials"),
        (("tick:s3cret@", ""), "refused the credentials"),
        (("?ssl_ca_certs=", "?ignored="), "certificate is not trusted"),
        (("rediss+cluster", "redis+cluster"), "TLS on one side only"),
    ],
)
def test_a_wrong_cluster_setting_is_one_clear_error(
    tls_cluster: RedisClusterServers, change: tuple[str, str], says: str
) -> None:
    url = tls_cluster.url.replace(*change)
    url = url.split("?")[0] if change[1] == "?ignored=" else url
    with pytest.raises(BackendUnavailable, match=says):
        App(url).backend.now_ms()
