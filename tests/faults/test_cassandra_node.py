"""A Cassandra node of its own, with password authentication: the right credentials work
end to end and wrong ones are one clear error; then the node is stopped and restarted
while workers run and a producer enqueues, and nothing acknowledged is lost. The
authentication runs in ``make test`` (a node of its own, started once); the restart,
which waits for the node twice, only in ``make faults``."""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.producer import Producer, jobs_run
from tests.support.cassandra_servers import CassandraNode
from tests.support.helpers import run_one_task, start_record_worker, stop_workers, wait_until
from tickwork.scheduler import App, BackendUnavailable

FULL = os.environ.get("TICKWORK_FAULTS_FULL") == "1"
MODULE = "tests.support.loop_tasks"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CassandraNode]:
    started = CassandraNode(tmp_path_factory.mktemp("node"), authenticator="PasswordAuthenticator")
    yield started
    started.stop()


def url(node: CassandraNode, credentials: str = "cassandra:cassandra@") -> str:
    return f"cassandra://{credentials}{node.hosts}/k{uuid.uuid4().hex[:8]}?consistency=ONE"


def test_password_authentication(node: CassandraNode) -> None:
    address = url(node)
    app = _first_app(address)
    run_one_task(app)
    app.close()
    for credentials in ("cassandra:wrong@", ""):
        with pytest.raises(BackendUnavailable, match="refused the credentials") as caught:
            App(url(node, credentials)).backend.now_ms()
        assert node.hosts in str(caught.value)


@pytest.mark.skipif(not FULL, reason="a node restarted while workers run: make faults only")
def test_a_node_restarted_mid_run_loses_nothing_acknowledged(
    node: CassandraNode, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    from tests.support.loop_tasks import app, job

    address = url(node)
    _first_app(address).close()  # the keyspace exists before the workers start
    app.use_backend(address)
    runs = tmp_path / "runs.txt"
    env = {**clean_env, "TICKWORK_BACKEND": address, "TICKWORK_TEST_RUNS": str(runs)}
    assert app.enqueue_many(job.call(n) for n in range(300)).enqueued == 300
    producer = Producer(job, pause_s=0.02, backoff_s=0.2)
    workers = [start_record_worker(env, tmp_path / f"w{n}.log", MODULE) for n in range(2)]
    producer.start()
    try:
        assert wait_until(lambda: len(jobs_run(runs)) >= 100, 120), "the workers never ran"
        node.restart()
        time.sleep(5)
        producer.stop()
        acknowledged = set(range(300)) | set(producer.acknowledged)
        assert wait_until(lambda: acknowledged <= set(jobs_run(runs)), 240), "lost"
    finally:
        producer.stop()
        stop_workers(workers)
        app.close()
    refused = producer.refused  # enqueues that failed: the outage was seen
    assert refused, "the producer never saw the node down"
    counts = Counter(jobs_run(runs))
    assert acknowledged <= set(counts), "an acknowledged job was lost"
    # a refused enqueue may still have been written (its answer lost): it may run
    assert set(counts) - acknowledged <= set(refused), "a job ran that was never enqueued"
    assert sum(count - 1 for count in counts.values()) <= 2 * 12, "duplicates past the held"


def _first_app(address: str) -> App:
    """An app whose backend answered: the node's default superuser appears a little after
    the node starts."""
    deadline = time.monotonic() + 90
    while True:
        app = App(address)
        try:
            app.backend.now_ms()
            return app
        except BackendUnavailable:
            app.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(2)
