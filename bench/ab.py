"""This tree against another (an older commit checked out apart), pair by pair: one
measurement run in a fresh process of each tree in turn, so drift in the machine hits
both alike; prints each run and the median ratio (this / base) as JSON.

Measurements (a Redis server is started here; SQLite on scratch files):
  noop-redis, noop-sqlite  20,000 pre-enqueued no-ops over 1,000 keys, one worker with
                           defaults (8 threads): messages/s (``bench.limits.end_to_end``)
  limited-redis            the same with a concurrency limit of 10 per key (each ack
                           frees slots: the ack and slot scripts go in one round trip)
  bulk-redis, bulk-sqlite  100,000 messages by ``enqueue_many`` in batches of 5,000:
                           messages/s (``bench.engine.bulk_enqueue``)
  bulk-keyed-redis         100,000 keyed messages (each its own key, as ``enqueue_dataframe``
                           writes rows) by ``enqueue_many`` in batches of 1,000: messages/s
  delay-redis              5,000 ``.delay()`` calls one at a time (after 500 to warm up):
                           calls/s
  adelay-redis             the same with ``await task.adelay()`` in an event loop
  memory-redis             Redis's memory per pending message with a 100-byte payload,
                           100,000 pending: bytes (lower is better)
  lateness-redis,          2,000 messages due over 5 s, one worker: p99 of start minus
  lateness-sqlite          due time, microseconds (lower is better)
  noop-cassandra           20,000 no-ops end to end with defaults on one local Cassandra
                           node started here (warmed up first), a keyspace per run
  ledger-redis             the ledger's keyed recurring workload, 200 schedules, 5 s
                           with the ledger on: acks/s (``bench.ledger.throughput``)
  incr-redis               30,000 jobs of the peers' task (one ``INCR`` each), one
                           worker with defaults: jobs/s (``bench.peers``' tickwork side)
  incr-cli-redis           the same through ``tickwork worker --burst`` (its default
                           ``info`` lines to /dev/null), the process timed whole
  process-redis            10,000 jobs of the peers' task on the process pool (two
                           children), one worker: jobs/s
  nap-redis,               6,000 jobs of a handler waiting on I/O (``time.sleep`` of
  nap-long-redis           0.5 ms, of 5 ms), one worker with defaults: jobs/s
  decode-cron, next-cron,  one call of a worker's on a scheduled message, in a loop:
  next-repeating           calls/s (``bench.schedule_costs``, this tree's file run
                           against the other tree's code)
  ledger-entry,            the ledger's parts alone: entries built, records folded
  ledger-fold-sqlite,      (SQLite), records appended a second of Redis's script time
  ledger-append-redis      (``bench.ledger_parts``, this tree's file, the other's code)

git worktree add /tmp/base COMMIT
python -m bench.ab --base /tmp/base --measure noop-redis [--pairs 6] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import machine

HERE = Path(__file__).resolve().parent.parent

_COSTS = (
    "import sys; sys.path.append("
    + repr(str(HERE / "bench"))
    + "); import schedule_costs; print(schedule_costs.per_second('{measure}'))"
)

#: each measurement: Python code printing one figure as its last line ({url}: the backend)
MEASURES = {
    "noop-redis": (
        "redis",
        "from bench.limits import end_to_end;"
        "print(end_to_end({url!r}, 'free', 20000, 1000)['per_second'])",
    ),
    "limited-redis": (
        "redis",
        "from bench.limits import end_to_end;"
        "print(end_to_end({url!r}, 'limited', 20000, 1000)['per_second'])",
    ),
    "noop-sqlite": (
        "sqlite",
        "from bench.limits import end_to_end;"
        "print(end_to_end({url!r}, 'free', 20000, 1000)['per_second'])",
    ),
    "bulk-redis": (
        "redis",
        "from bench.engine import bulk_enqueue;"
        "print(bulk_enqueue({url!r}, 100000, 5000)['per_second'])",
    ),
    "bulk-keyed-redis": (
        "redis",
        "import time; from bench.engine import fresh_app; app, tasks = fresh_app({url!r});"
        "calls = [tasks.noop.call(i).options(key=f'k{{i}}') for i in range(100000)];"
        "started = time.perf_counter(); app.enqueue_many(calls, batch_size=1000);"
        "print(round(100000 / (time.perf_counter() - started)))",
    ),
    "delay-redis": (
        "redis",
        "import time; from bench.engine import fresh_app; app, tasks = fresh_app({url!r});"
        "[tasks.noop.delay(i) for i in range(500)]; started = time.perf_counter();"
        "[tasks.noop.delay(i) for i in range(5000)];"
        "print(round(5000 / (time.perf_counter() - started)))",
    ),
    "ledger-redis": (
        "redis",
        "import logging; logging.getLogger('tickwork').setLevel(logging.WARNING);"
        "from bench.ledger import throughput; rate, app = throughput({url!r}, 200, 5.0, 100);"
        "app.close(); print(round(rate))",
    ),
    "bulk-sqlite": (
        "sqlite",
        "from bench.engine import bulk_enqueue;"
        "print(bulk_enqueue({url!r}, 100000, 5000)['per_second'])",
    ),
    "adelay-redis": (
        "redis",
        "import asyncio, time; from bench.engine import fresh_app\n"
        "app, tasks = fresh_app({url!r})\n"
        "async def calls():\n"
        "    [await tasks.noop.adelay(i) for i in range(500)]; started = time.perf_counter()\n"
        "    [await tasks.noop.adelay(i) for i in range(5000)]\n"
        "    return round(5000 / (time.perf_counter() - started))\n"
        "print(asyncio.run(calls()))",
    ),
    "memory-redis": (
        "redis",
        "from bench.engine import redis_memory;"
        "print(round(redis_memory({url!r}, 100000)['bytes_per_message']))",
    ),
    "lateness-redis": (
        "redis",
        "import logging; logging.getLogger('tickwork').setLevel(logging.WARNING);"
        "from bench.engine import lateness;"
        "print(round(lateness({url!r}, 2000, 5.0, 1.0)['p99_ms'] * 1000))",
    ),
    "lateness-sqlite": (
        "sqlite",
        "import logging; logging.getLogger('tickwork').setLevel(logging.WARNING);"
        "from bench.engine import lateness;"
        "print(round(lateness({url!r}, 2000, 5.0, 1.0)['p99_ms'] * 1000))",
    ),
    "noop-cassandra": (
        "cassandra",
        "import logging, uuid; logging.getLogger('cassandra').setLevel(logging.ERROR);"
        "from bench.engine import end_to_end;"
        "url = {url!r}.replace('KEYSPACE', 'ab' + uuid.uuid4().hex[:8]);"
        "print(end_to_end(url, 20000, 8, None, 100)['per_second'])",
    ),
    "incr-redis": (
        "redis",
        "import os, time; os.environ['BENCH_REDIS_URL'] = {url!r};"
        "import bench.peers.tickwork_app as side; from tickwork import Worker, WorkerConfig;"
        "side.enqueue_many(30000);"
        "config = WorkerConfig(queues=(side.QUEUE,), burst=True, install_periodic=False);"
        "started = time.perf_counter(); Worker(side.app, config).run();"
        "print(round(30000 / (time.perf_counter() - started)))",
    ),
    "incr-cli-redis": (
        "redis",
        "import os, subprocess, sys, time; os.environ['BENCH_REDIS_URL'] = {url!r};"
        "import bench.peers.tickwork_app as side; side.enqueue_many(30000);"
        "started = time.perf_counter(); subprocess.run([sys.executable, '-m', 'tickwork',"
        "'worker', '-A', 'bench.peers.tickwork_app', '-Q', side.QUEUE, '--burst'],"
        "stderr=subprocess.DEVNULL, check=True);"
        "print(round(30000 / (time.perf_counter() - started)))",
    ),
    "process-redis": (
        "redis",
        "import os, time; os.environ['BENCH_REDIS_URL'] = {url!r};"
        "import bench.peers.tickwork_app as side; from tickwork import Worker, WorkerConfig;"
        "side.enqueue_many(10000);"
        "config = WorkerConfig(queues=(side.QUEUE,), burst=True, install_periodic=False,"
        " pool='process', concurrency=2, app_reference='bench.peers.tickwork_app');"
        "started = time.perf_counter(); Worker(side.app, config).run();"
        "print(round(10000 / (time.perf_counter() - started)))",
    ),
}
#: a handler that waits on I/O (a sleep of {seconds}), 6,000 runs, one worker with
#: defaults: jobs/s (what a pool whose threads take turns must not lose)
_NAP = (
    "import logging, time; logging.getLogger('tickwork').setLevel(logging.WARNING)\n"
    "from tickwork import App, Worker, WorkerConfig\n"
    "app = App({url!r}); app.backend.queues.purge('naps')\n"
    "@app.task(name='bench.nap', queue='naps')\n"
    "def nap(seconds: float) -> None:\n"
    "    time.sleep(seconds)\n"
    "app.enqueue_many([nap.call({seconds}) for _ in range(6000)], batch_size=1000)\n"
    "config = WorkerConfig(queues=('naps',), burst=True, install_periodic=False)\n"
    "started = time.perf_counter(); stats = Worker(app, config).run()\n"
    "assert stats.acked == 6000, stats\n"
    "print(round(6000 / (time.perf_counter() - started)))"
)
MEASURES["nap-redis"] = ("redis", _NAP.replace("{seconds}", "0.0005"))
MEASURES["nap-long-redis"] = ("redis", _NAP.replace("{seconds}", "0.005"))
for _measure in ("decode-cron", "next-cron", "next-repeating"):
    MEASURES[_measure] = ("sqlite", _COSTS.replace("{measure}", _measure))
_PARTS = (
    "import sys; sys.path.append("
    + repr(str(HERE / "bench"))
    + "); import ledger_parts; print(ledger_parts.per_second('{measure}', {url!r}))"
)
for _measure in ("ledger-entry", "ledger-fold-sqlite", "ledger-append-redis"):
    MEASURES[_measure] = ("redis", _PARTS.replace("{measure}", _measure))


def run_once(tree: Path, code: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the run in {tree} failed:\n{done.stderr[-2000:]}")
    return int(done.stdout.strip().splitlines()[-1])


def pairs(base: Path, measure: str, count: int, urls: dict[str, str]) -> dict[str, object]:
    kind, template = MEASURES[measure]
    runs: dict[str, list[int]] = {"base": [], "this": []}
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(count):
            for name, tree in (("base", base), ("this", HERE)):
                url = urls.get(kind, f"sqlite:///{scratch}/{name}{index}.db")
                runs[name].append(run_once(tree, template.format(url=url)))
    ratios = [this / was for was, this in zip(runs["base"], runs["this"], strict=True)]
    return {
        "measure": measure,
        "base_tree": str(base),
        "runs": runs,
        "median_base": statistics.median(runs["base"]),
        "median_this": statistics.median(runs["this"]),
        "median_ratio": round(statistics.median(ratios), 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", type=Path, required=True, help="the other tree")
    parser.add_argument("--measure", choices=sorted(MEASURES), action="append", required=True)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from tests.support.cassandra_servers import CassandraNode
    from tests.support.servers import RedisServer

    server = RedisServer()
    node = None
    try:
        urls = {"redis": server.url}
        if any(MEASURES[m][0] == "cassandra" for m in args.measure):
            node = CassandraNode()
            urls["cassandra"] = f"cassandra://{node.hosts}/KEYSPACE?consistency=ONE"
            # a fresh node's first minutes run slower: 50,000 written, then a worker's round
            warm = "from bench.engine import bulk_enqueue; print(bulk_enqueue({url!r}, 50000, 5000)"
            run_once(
                HERE,
                (warm + "['per_second'])").format(
                    url=urls["cassandra"].replace("KEYSPACE", "warm")
                ),
            )
            run_once(HERE, MEASURES["noop-cassandra"][1].format(url=urls["cassandra"]))
        results = [pairs(args.base, m, args.pairs, urls) for m in args.measure]
    finally:
        server.stop()
        if node is not None:
            node.stop()
    report = {"machine": machine(), "pairs": args.pairs, "results": results}
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
