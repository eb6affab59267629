"""Three Cassandra nodes on loopback addresses of their own, a keyspace with
replication 3 written and read at QUORUM: one node is SIGKILLed while two workers run
and a producer enqueues, stays down for a while, and is started again. QUORUM is two of
three, so writes, reads and the shard locks' lightweight transactions go on without it:
nothing acknowledged is lost, the work goes on while it is down, and the measured
figures (refused enqueues, runs twice) go to ``failover.jsonl``. ``make faults`` only
(three nodes take about three minutes to start here)."""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.producer import Producer, jobs_run, publish
from tests.support.cassandra_servers import CassandraCluster
from tests.support.helpers import start_record_worker, stop_workers, wait_until
from tickwork.scheduler import App

FULL = os.environ.get("TICKWORK_FAULTS_FULL") == "1"
MODULE = "tests.support.loop_tasks"
DOWN_S = 45  # the survivors' failure detector convicts the dead node in about 10-20 s

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not FULL, reason="three Cassandra nodes: make faults only"),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CassandraCluster]:
    started = CassandraCluster(3, tmp_path_factory.mktemp("cluster"))
    yield started
    started.stop()


def test_losing_one_node_of_three_under_quorum_loses_nothing(
    cluster: CassandraCluster, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    from tests.support.loop_tasks import app, job

    address = (
        f"cassandra://{cluster.hosts}/q{uuid.uuid4().hex[:8]}"
        "?consistency=QUORUM&replication_factor=3"
    )
    first = App(address)
    first.backend.now_ms()  # the keyspace and its tables exist before the workers start
    first.close()
    app.use_backend(address)
    runs = tmp_path / "runs.txt"
    env = {**clean_env, "TICKWORK_BACKEND": address, "TICKWORK_TEST_RUNS": str(runs)}
    assert app.enqueue_many(job.call(n) for n in range(300)).enqueued == 300
    producer = Producer(job, pause_s=0.02, backoff_s=0.2)

    victim = cluster.nodes[2]
    workers = [start_record_worker(env, tmp_path / f"w{n}.log", MODULE) for n in range(2)]
    producer.start()
    try:
        assert wait_until(lambda: len(jobs_run(runs)) >= 100, 180), "the workers never ran"
        killed_at = time.monotonic()
        ran_before = len(jobs_run(runs))
        victim.kill()
        time.sleep(DOWN_S / 2)
        ran_in_first_half = len(jobs_run(runs)) - ran_before
        time.sleep(DOWN_S / 2)
        ran_while_down = len(jobs_run(runs)) - ran_before
        restarted_at = time.monotonic()
        victim.start()
        back_at = time.monotonic()
        time.sleep(3)
        producer.stop()
        acknowledged = {**dict.fromkeys(range(300), 0.0), **producer.acknowledged}
        assert wait_until(lambda: set(acknowledged) <= set(jobs_run(runs)), 240), "lost"
    finally:
        producer.stop()
        stop_workers(workers)
        app.close()
    refused = producer.refused
    counts = Counter(jobs_run(runs))
    down = [n for n, at in acknowledged.items() if killed_at <= at <= restarted_at]
    second_half = [at for at in acknowledged.values() if killed_at + DOWN_S / 2 <= at]
    second_half = [at for at in second_half if at <= restarted_at]
    result = {
        "test": "cassandra_quorum_node_lost",
        "nodes": 3,
        "replication_factor": 3,
        "consistency": "QUORUM",
        "down_s": DOWN_S,
        "acknowledged": len(acknowledged),
        "acknowledged_while_down": len(down),
        "refused": len(refused),
        "refused_while_down": sum(killed_at <= at <= restarted_at for at in refused.values()),
        "ran_while_down": ran_while_down,
        "ran_in_first_half": ran_in_first_half,
        "acknowledged_in_second_half": len(second_half),
        "lost_acknowledged": len(set(acknowledged) - set(counts)),
        "ran_twice": sum(count > 1 for count in counts.values()),
        "restart_s": round(back_at - restarted_at, 1),
    }
    publish(result)
    assert result["lost_acknowledged"] == 0, result
    # once the survivors convict the dead node, logged batches and QUORUM go on without it
    assert second_half and ran_while_down > ran_in_first_half, f"stopped with 2 of 3 up: {result}"
    assert set(counts) - set(acknowledged) <= set(refused), "ran what was never enqueued"
    assert sum(count - 1 for count in counts.values()) <= 2 * 12, "duplicates past the held"
