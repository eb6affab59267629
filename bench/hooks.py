"""What hooks cost when used: end-to-end no-ops with no hook, with a hook that counts
outcomes (``after_run``), and with that hook and a zlib body codec, alternating in one
run on SQLite (a scratch file per run).

python -m bench.hooks [--messages 20000] [--rounds 3] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import machine
from bench.engine import fresh_app
from tickwork.scheduler.hooks import Hook
from tickwork.scheduler.runs.context import RunInfo
from tickwork.workers import Worker, WorkerConfig


class CountOutcomes(Hook):
    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()

    def after_run(self, run: RunInfo, outcome: str, duration_ms: float) -> None:
        self.seen[outcome] += 1


class Compress(Hook):
    def encode_body(self, body: bytes) -> bytes:
        return zlib.compress(body, 1)

    def decode_body(self, body: bytes) -> bytes:
        return zlib.decompress(body)


CONFIGS = {
    "none": lambda: [],
    "counter": lambda: [CountOutcomes()],
    "codec+counter": lambda: [Compress(), CountOutcomes()],
}


def drain(url: str, messages: int, hooks: list[Hook]) -> float:
    """Messages a second: ``messages`` no-ops enqueued, then one worker (defaults) drains
    them."""
    app, tasks = fresh_app(url)
    for hook in hooks:
        app.add_hook(hook)
    app.enqueue_many((tasks.noop.call(i) for i in range(messages)), batch_size=5000)
    config = WorkerConfig(queues=("bench",), burst=True, install_periodic=False)
    started = time.perf_counter()
    stats = Worker(app, config).run()
    elapsed = time.perf_counter() - started
    assert stats.acked == messages, stats
    app.close()
    app.hooks = type(app.hooks)()  # the module's app is reused by the next run
    return messages / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs: dict[str, list[float]] = {name: [] for name in CONFIGS}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            for name, make in CONFIGS.items():
                url = f"sqlite:///{scratch}/{name}-{round_}.db"
                runs[name].append(round(drain(url, args.messages, make())))
    base = statistics.median(runs["none"])
    report: dict[str, Any] = {
        "machine": machine(),
        "messages": args.messages,
        "runs": runs,
        "median": {name: statistics.median(r) for name, r in runs.items()},
        "ratio_to_none": {name: round(statistics.median(r) / base, 3) for name, r in runs.items()},
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
