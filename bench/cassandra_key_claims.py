"""What claiming a free key costs on Cassandra (``key_claims.py``): keyed messages written
to keys nobody holds under ``error`` (one call a message, as ``schedule(key=...)``) and
under ``ignore`` (1,000 in one call, as a keyed bulk write), against the same writes under
``replace``, which claims nothing (replacing a free key writes it as new), alternating,
on a local Cassandra node started here (as the tests do).

    python -m bench.cassandra_key_claims [--rounds 6] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from tests.support.backends import BackendHarness
from tests.support.cassandra_servers import CassandraNode
from tests.support.contract import env
from tickwork.scheduler.backends import OnConflict, open_backend


def _one_at_a_time(h: BackendHarness, mode: OnConflict, tag: str, count: int = 100) -> float:
    """Milliseconds per keyed write of one message to a free key."""
    started = time.perf_counter()
    for i in range(count):
        h.backend.messages.enqueue([env(h, f"{tag}.{i}", key=f"{tag}-{i}")], mode)
    return (time.perf_counter() - started) / count * 1000


def _in_one_call(h: BackendHarness, mode: OnConflict, tag: str, count: int = 1000) -> float:
    """Seconds for one call writing ``count`` messages to free keys."""
    batch = [env(h, f"{tag}.{i}", key=f"{tag}-{i}") for i in range(count)]
    started = time.perf_counter()
    h.backend.messages.enqueue(batch, mode)
    return time.perf_counter() - started


def measure(rounds: int) -> dict[str, Any]:
    runs: dict[str, list[float]] = {}
    node = CassandraNode()  # stopped below: a node left running holds 4 GiB
    try:
        url = f"cassandra://{node.hosts}/claims{uuid.uuid4().hex[:6]}?consistency=ONE"
        h = BackendHarness("cassandra", url, open_backend(url), None)
        _rounds(h, rounds, runs)
        h.backend.close()
    finally:
        node.stop()
    medians = {name: round(statistics.median(values), 3) for name, values in runs.items()}
    return {
        "rounds": rounds,
        "medians": medians,
        "one_ratio": round(medians["one_claimed_ms"] / medians["one_unclaimed_ms"], 2),
        "bulk_ratio": round(medians["bulk_claimed_s"] / medians["bulk_unclaimed_s"], 2),
        "runs": runs,
    }


def _rounds(h: BackendHarness, rounds: int, runs: dict[str, list[float]]) -> None:
    for round_ in range(rounds):
        for name, mode in (("claimed", OnConflict.ERROR), ("unclaimed", OnConflict.REPLACE)):
            tag = f"{name}{round_}"
            runs.setdefault(f"one_{name}_ms", []).append(_one_at_a_time(h, mode, tag))
        for name, mode in (("claimed", OnConflict.IGNORE), ("unclaimed", OnConflict.REPLACE)):
            tag = f"bulk-{name}{round_}"
            runs.setdefault(f"bulk_{name}_s", []).append(_in_one_call(h, mode, tag))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = measure(args.rounds)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
