"""The tombstone check on a local Cassandra node: a million messages pass through one
queue, then the current bucket is read again.

    python -m bench.cassandra_tombstones [--messages 1000000] [--out FILE]

One producer enqueues in batches of 1,000 (due now) while two consumers, each with its
own connection like two workers, claim 500 at a time and ack. Every few seconds the run
samples the node's own metric ``system_views.tombstones_per_read`` (tombstone cells
scanned per read, per table); at the end it counts the node's ``tombstone_warn_threshold``
warnings (1,000 cells) in its log, and times claims of the same queue with 10,000 fresh
messages pending, its partitions now holding a million tombstones.
"""

from __future__ import annotations

import argparse
import logging
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench.common import report, summary_ms
from tests.support.cassandra_servers import CassandraNode
from tickwork.scheduler import open_backend
from tickwork.scheduler.backends import Envelope
from tickwork.scheduler.backends.cassandra import CassandraBackend

QUEUE = "q"
TABLES = ("queue_messages", "lease_deadlines", "leases", "message_index")
_WARNING = re.compile(
    r"Read (\d+) live rows and (\d+) tombstone cells for query .*? FROM \w+\.(\w+)"
)


def _connect(url: str) -> CassandraBackend:
    backend = open_backend(url)
    assert isinstance(backend, CassandraBackend)
    return backend


def _tombstone_metric(backend: CassandraBackend) -> dict[str, dict[str, float]]:
    rows = backend.store.session.execute(
        "SELECT table_name, count, max, p99th, p50th FROM system_views.tombstones_per_read "
        "WHERE keyspace_name = %s",
        (backend.store.ks,),
    )
    return {
        r.table_name: {"reads": r.count, "max": r.max, "p99": r.p99th, "p50": r.p50th}
        for r in rows
        if r.table_name in TABLES
    }


def _produce(url: str, total: int, done: threading.Event, errors: list[str]) -> None:
    backend = _connect(url)
    try:
        for start in range(0, total, 1000):
            now = backend.now_ms()
            ids = range(start, min(total, start + 1000))
            backend.messages.enqueue(
                [Envelope(f"t{i}", QUEUE, None, 0, now, 60_000, b"x" * 100) for i in ids]
            )
    except Exception as err:  # reported in the result, not swallowed
        errors.append(f"producer: {err!r}")
    finally:
        done.set()
        backend.close()


def _consume(
    url: str,
    total: int,
    seen: set[str],
    counter: list[int],
    lock: threading.Lock,
    errors: list[str],
) -> None:
    backend = _connect(url)
    try:
        while True:
            with lock:
                if len(seen) >= total or errors:
                    return
            claims = backend.leases.claim(QUEUE, 500).claims
            if not claims:
                time.sleep(0.05)
                continue
            backend.leases.ack([(c, None) for c in claims])
            with lock:
                counter[0] += len(claims)
                seen.update(c.id for c in claims)
    except Exception as err:
        errors.append(f"consumer: {err!r}")
    finally:
        backend.close()


def _pass_through(url: str, total: int) -> dict[str, Any]:
    """Run producer and consumers; sample the tombstone metric while they run."""
    observer = _connect(url)
    done, lock = threading.Event(), threading.Lock()
    counter: list[int] = [0]
    errors: list[str] = []
    seen: set[str] = set()
    threads = [threading.Thread(target=_produce, args=(url, total, done, errors))]
    threads += [
        threading.Thread(target=_consume, args=(url, total, seen, counter, lock, errors))
        for _ in range(2)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    worst: dict[str, float] = {}
    samples = []
    while any(t.is_alive() for t in threads):
        time.sleep(5)
        metric = _tombstone_metric(observer)
        for table, values in metric.items():
            worst[table] = max(worst.get(table, 0.0), values["max"])
        with lock:
            passed = counter[0]
        samples.append(
            {
                "seconds": round(time.perf_counter() - started),
                "passed": passed,
                "queue_messages_max": metric.get("queue_messages", {}).get("max"),
            }
        )
    elapsed = time.perf_counter() - started
    observer.close()
    return {
        "messages": total,
        "passed": len(seen),
        "claims": counter[0],
        "delivered_twice": counter[0] - len(seen),
        "seconds": round(elapsed, 1),
        "per_second": round(counter[0] / elapsed),
        "errors": errors,
        "worst_tombstones_per_read": worst,
        "samples": samples,
    }


def _current_bucket_claims(url: str, pending: int, samples: int) -> dict[str, Any]:
    """Claim latency on the queue the million went through, ``pending`` fresh messages."""
    backend = _connect(url)
    now = backend.now_ms()
    for start in range(0, pending, 1000):
        ids = range(start, min(pending, start + 1000))
        backend.messages.enqueue(
            [Envelope(f"f{i}", QUEUE, None, 0, now, 60_000, b"x" * 100) for i in ids]
        )
    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        claims = backend.leases.claim(QUEUE, 100).claims
        timings.append(time.perf_counter() - started)
        backend.leases.ack([(c, None) for c in claims])
    after = _tombstone_metric(backend)
    backend.close()
    return {"pending": pending, "claim_batch": 100, **summary_ms(timings), "metric_after": after}


def _log_warnings(node: CassandraNode) -> dict[str, Any]:
    """The node's tombstone warnings, per table: how many, and the most cells in one."""
    text = (node.folder / "logs" / "system.log").read_text(errors="replace")
    tables: dict[str, dict[str, int]] = {}
    for match in _WARNING.finditer(text):
        found = tables.setdefault(match.group(3), {"warnings": 0, "largest_cells": 0})
        found["warnings"] += 1
        found["largest_cells"] = max(found["largest_cells"], int(match.group(2)))
    return tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.getLogger("cassandra").setLevel(logging.ERROR)
    node = CassandraNode()
    try:
        url = f"cassandra://{node.hosts}/tomb{uuid.uuid4().hex[:6]}?consistency=ONE"
        results = {
            "pass_through": _pass_through(url, args.messages),
            "claims_after": _current_bucket_claims(url, 10_000, 200),
            "node_log": _log_warnings(node),
        }
    finally:
        node.stop()
    report("cassandra", results, args.out)


if __name__ == "__main__":
    main()
