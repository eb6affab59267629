"""The Cassandra backend alone on a local node: bulk enqueue, then claim + ack until empty,
for plain and for keyed messages (keys cost reads of the key index at every step), the
same messages enqueued again (all duplicates), and extend and release of 1,000 leases.

    python -m bench.cassandra_backend [--messages 10000] [--batch 500] [--out FILE]

A first round on a queue of its own warms the node up (a fresh JVM runs the first
minute's requests several times slower) and is not reported.
"""

from __future__ import annotations

import argparse
import logging
import time
import uuid
from pathlib import Path
from typing import Any

from bench.common import report
from tests.support.cassandra_servers import CassandraNode
from tickwork.scheduler import open_backend
from tickwork.scheduler.backends import Backend, Envelope, OnConflict


def _run(backend: Backend, messages: int, batch: int, keyed: bool, queue: str) -> dict[str, Any]:
    now = backend.now_ms()
    envelopes = [
        Envelope(f"{queue}{i}", queue, f"key-{i}" if keyed else None, 0, now, 60_000, b"x" * 100)
        for i in range(messages)
    ]
    started = time.perf_counter()
    for start in range(0, len(envelopes), 1000):
        backend.messages.enqueue(envelopes[start : start + 1000])
    enqueued = time.perf_counter() - started
    started = time.perf_counter()  # the same messages again: all duplicates
    for start in range(0, len(envelopes), 1000):
        backend.messages.enqueue(envelopes[start : start + 1000], OnConflict.IGNORE)
    again = time.perf_counter() - started
    claiming = acking = 0.0
    drained = 0
    while True:
        started = time.perf_counter()
        claims = backend.leases.claim(queue, batch).claims
        claiming += time.perf_counter() - started
        if not claims:
            break
        started = time.perf_counter()
        backend.leases.ack([(c, None) for c in claims])
        acking += time.perf_counter() - started
        drained += len(claims)
    return {
        "messages": messages,
        "claim_batch": batch,
        "drained": drained,
        "enqueue_per_second": round(messages / enqueued),
        "enqueue_again_per_second": round(messages / again),
        "claim_per_second": round(drained / claiming),
        "ack_per_second": round(drained / acking),
        "claim_and_ack_per_second": round(drained / (claiming + acking)),
    }


def _lease_calls(backend: Backend, messages: int) -> dict[str, Any]:
    """Extend, then release, the leases of one claim of ``messages``."""
    now = backend.now_ms()
    backend.messages.enqueue(
        [Envelope(f"l{i}", "leases", None, 0, now, 60_000, b"x") for i in range(messages)]
    )
    claims = backend.leases.claim("leases", messages).claims
    started = time.perf_counter()
    backend.leases.extend(claims, 60_000)
    extended = time.perf_counter() - started
    started = time.perf_counter()
    released = backend.leases.release(claims)
    releasing = time.perf_counter() - started
    return {
        "leases": len(claims),
        "extend_per_second": round(len(claims) / extended),
        "release_per_second": round(released / releasing),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.getLogger("cassandra").setLevel(logging.ERROR)
    node = CassandraNode()
    try:
        url = f"cassandra://{node.hosts}/b{uuid.uuid4().hex[:6]}?consistency=ONE"
        backend = open_backend(url)
        _run(backend, args.messages, args.batch, keyed=False, queue="warm-up")  # the JIT
        results = {
            "plain": _run(backend, args.messages, args.batch, keyed=False, queue="plain"),
            "keyed": _run(backend, args.messages, args.batch, keyed=True, queue="keyed"),
            "leases": _lease_calls(backend, 1000),
        }
        backend.close()
    finally:
        node.stop()
    report("cassandra", results, args.out)


if __name__ == "__main__":
    main()
