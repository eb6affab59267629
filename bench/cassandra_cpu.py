"""Where a Cassandra drain spends the machine's two cores: the CPU seconds of the worker
process and of the node while one worker drains N no-ops with defaults.

A local node is started here and warmed up (50,000 writes and one worker's round); then,
``--rounds`` times, N messages are enqueued and one worker (this script's child process)
drains them while the node's CPU time is read from ``/proc`` before and after. Prints JSON
(wall seconds, messages/s, worker and node CPU seconds, each as a share of the wall time
and as microseconds a message)::

    python -m bench.cassandra_cpu --messages 20000 --rounds 3 --out FILE.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from bench.common import machine

HERE = Path(__file__).resolve().parents[1]

_DRAIN = """
import json, logging, resource, sys, time
logging.getLogger('cassandra').setLevel(logging.ERROR)
from bench.engine import fresh_app
from tickwork.workers import Worker, WorkerConfig
app, tasks = fresh_app({url!r})
app.enqueue_many((tasks.noop.call(i) for i in range({count})), batch_size=5000)
print('ready', flush=True)
sys.stdin.readline()
config = WorkerConfig(queues=('bench',), concurrency=8, burst=True, install_periodic=False,
                      poll_interval_s=0.01)
before = resource.getrusage(resource.RUSAGE_SELF)
started = time.perf_counter()
stats = Worker(app, config).run()
wall = time.perf_counter() - started
after = resource.getrusage(resource.RUSAGE_SELF)
assert stats.acked == {count}, stats
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(json.dumps({{'wall_s': wall, 'worker_cpu_s': cpu}}), flush=True)
"""


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` and its threads (``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def drain(url: str, count: int, node_pid: int) -> dict[str, Any]:
    """Enqueue ``count`` no-ops, then measure one worker's drain of them."""
    child = subprocess.Popen(
        [sys.executable, "-c", _DRAIN.format(url=url, count=count)],
        cwd=HERE,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    if child.stdout.readline().strip() != "ready":
        raise SystemExit("the drain's process failed before it was ready")
    node_before = _cpu_seconds(node_pid)
    child.stdin.write("go\n")
    child.stdin.flush()
    line = child.stdout.readline()
    node_cpu = _cpu_seconds(node_pid) - node_before
    if child.wait() != 0 or not line:
        raise SystemExit("the drain's process failed")
    done = json.loads(line)
    wall, worker_cpu = done["wall_s"], done["worker_cpu_s"]
    return {
        "messages": count,
        "wall_s": round(wall, 2),
        "per_second": round(count / wall),
        "worker_cpu_s": round(worker_cpu, 2),
        "node_cpu_s": round(node_cpu, 2),
        "worker_share_of_wall": round(worker_cpu / wall, 2),
        "node_share_of_wall": round(node_cpu / wall, 2),
        "worker_us_per_message": round(worker_cpu / count * 1e6),
        "node_us_per_message": round(node_cpu / count * 1e6),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from tests.support.cassandra_servers import CassandraNode

    node = CassandraNode()
    try:
        assert node.process is not None
        template = f"cassandra://{node.hosts}/KEYSPACE?consistency=ONE"
        subprocess.run(
            [
                sys.executable,
                "-c",
                "from bench.engine import bulk_enqueue;"
                f"bulk_enqueue({template.replace('KEYSPACE', 'warm')!r}, 50000, 5000)",
            ],
            cwd=HERE,
            check=True,
        )
        drain(template.replace("KEYSPACE", "warmdrain"), args.messages, node.process.pid)
        rounds = [
            drain(
                template.replace("KEYSPACE", "cpu" + uuid.uuid4().hex[:8]),
                args.messages,
                node.process.pid,
            )
            for _ in range(args.rounds)
        ]
    finally:
        node.stop()
    report = {"machine": machine(), "rounds": rounds}
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
