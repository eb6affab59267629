"""Keyed messages on a local Cassandra node: bulk enqueue, then claim + ack until empty.

    python -m bench.cassandra_keyed [--messages 3000]

Keyed messages cost extra reads of the key index at enqueue, claim and ack; this run
shows what reading them concurrently per batch buys.
"""

from __future__ import annotations

import argparse
import logging
import time
import uuid

from bench.common import emit, machine
from scheduler import open_backend
from scheduler.backends import Envelope
from tests.servers import CassandraNode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=3000)
    args = parser.parse_args()
    logging.getLogger("cassandra").setLevel(logging.ERROR)
    node = CassandraNode()
    try:
        backend = open_backend(f"cassandra://{node.hosts}/k{uuid.uuid4().hex[:6]}?consistency=ONE")
        now = backend.now_ms()
        envelopes = [
            Envelope(f"k{i}", "q", f"key-{i}", 0, now, 60_000, b"x" * 100)
            for i in range(args.messages)
        ]
        started = time.perf_counter()
        for start in range(0, len(envelopes), 1500):
            backend.enqueue(envelopes[start : start + 1500])
        enqueued = time.perf_counter() - started
        started, drained = time.perf_counter(), 0
        while claims := backend.claim("q", 100).claims:
            drained += len(claims)
            backend.ack([(c, None) for c in claims])
        drain = time.perf_counter() - started
        backend.close()
    finally:
        node.stop()
    emit(
        {
            "machine": machine(),
            "messages": args.messages,
            "keyed_enqueue_per_second": round(args.messages / enqueued),
            "keyed_claim_ack_per_second": round(drained / drain),
            "drained": drained,
        }
    )


if __name__ == "__main__":
    main()
