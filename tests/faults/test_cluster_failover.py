"""A Redis Cluster with one replica per master loses the master holding a queue
(SIGKILL) while workers run and a producer enqueues; its replica is promoted, and the
dead master, restarted, rejoins as the replica of the promoted one. Redis replicates
asynchronously, so what the dead master acknowledged last may be gone: the test
measures it (acknowledged enqueues lost, acks lost: jobs that ran again), with and
without ``wait_replicas=1`` (then nothing acknowledged may be lost, and writes are
refused while the promoted master has no replica), and checks what must hold whatever
replication did: the workers and the producer carry on against the promoted replica,
and everything enqueued after the failover runs. ``make faults`` only (six Redis
processes, a failover)."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.producer import Producer, jobs_run, publish
from tests.support.helpers import start_record_worker, stop_workers, wait_until
from tests.support.servers import (
    RedisClusterServers,
    RedisServer,
    master_of,
    redis_cli,
    wait_for_replicas,
)

FULL = os.environ.get("TICKWORK_FAULTS_FULL") == "1"
MODULE = "tests.support.loop_tasks"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not FULL, reason="a cluster with replicas and a failover: make faults"),
]


@pytest.fixture
def cluster() -> Iterator[RedisClusterServers]:
    servers = RedisClusterServers(replicas=1, node_timeout_ms=1000)
    wait_for_replicas(servers.nodes, 3)
    yield servers
    servers.stop()


@pytest.mark.parametrize("wait", ["", "wait_replicas=1"])
def test_a_master_failover_keeps_the_queue_running(
    cluster: RedisClusterServers, tmp_path: Path, clean_env: dict[str, str], wait: str
) -> None:
    from tests.support.loop_tasks import app, job

    url = f"{cluster.url}?{wait}" if wait else cluster.url
    app.use_backend(url)
    runs = tmp_path / "runs.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_RUNS": str(runs)}
    assert app.enqueue_many(job.call(n) for n in range(300)).enqueued == 300
    rejoined_at = 0.0
    producer = Producer(job, pause_s=0.01, backoff_s=0.1)

    key = app.backend.store.shard_keys("default", 0)[0]  # type: ignore[attr-defined]
    master = master_of(cluster.nodes, key)
    assert master is not None
    workers = [start_record_worker(env, tmp_path / f"w{n}.log", MODULE) for n in range(2)]
    producer.start()
    try:
        assert wait_until(lambda: len(jobs_run(runs)) >= 200, 60), "the workers never ran"
        killed_at = time.monotonic()
        master.kill()
        assert wait_until(lambda: _promoted(cluster, master, key), 60), "no failover"
        promoted_at = time.monotonic()
        master.start()  # it rejoins as the replica of the promoted one (wait_replicas=1
        wait_for_replicas(cluster.nodes, 3)  # the rejoin (wait_replicas=1 needs one)
        rejoined_at = time.monotonic()
        time.sleep(3)
        producer.stop()
        acknowledged = {**dict.fromkeys(range(300), 0.0), **producer.acknowledged}
        after = {n for n, at in acknowledged.items() if at > promoted_at + 1}
        assert after, "nothing was enqueued after the failover"
        assert wait_until(lambda: after <= set(jobs_run(runs)), 120), "stalled after the failover"
        time.sleep(3)  # what was held when the master died comes back after its lease
    finally:
        producer.stop()
        stop_workers(workers)
        app.close()
    refused = producer.refused
    counts = Counter(jobs_run(runs))
    lost = sorted(set(acknowledged) - set(counts))
    result = {
        "test": "cluster_failover",
        "option": wait or "none",
        "acknowledged": len(acknowledged),
        "refused": len(refused),
        "lost_acknowledged": len(lost),
        "lost_acknowledged_in_last_s_before_kill": sum(
            killed_at - 1 <= acknowledged[n] <= killed_at for n in lost
        ),
        "ran_twice": sum(count > 1 for count in counts.values()),
        "failover_s": round(promoted_at - killed_at, 2),
        "rejoin_s": round(rejoined_at - promoted_at, 2),
    }
    publish(result)
    assert set(counts) - set(acknowledged) <= set(refused), "ran what was never enqueued"
    # asynchronous replication: only what the master acknowledged just before it died
    assert all(acknowledged[n] >= killed_at - 5 for n in lost), result
    if wait:  # what the replica acknowledged is what it serves once promoted
        assert not lost, result


def _promoted(cluster: RedisClusterServers, dead: RedisServer, key: str) -> bool:
    """Whether a replica now serves ``key``'s slot as its master, and the cluster is ok."""
    alive = [node for node in cluster.nodes if node is not dead]
    served = master_of(alive, key) is not None
    return served and all("cluster_state:ok" in redis_cli(n.port, "cluster", "info") for n in alive)
