"""Durable runs (issue 50): steps a second for durable tasks of 100 no-op steps (``--runs``
of them at once, against as many plain no-op messages as they have steps), and the cost
of replaying a run whose journal holds 1,000 steps (the time from its handler's start
to past its last journaled step, when it resumes after a sleep). One in-process worker
per run; SQLite and Redis side by side, or PostgreSQL or Cassandra alone (``--only``).

python -m bench.durable [--steps 100] [--runs 20] [--replay 1000] [--concurrency 8]
                        [--only sqlite|redis|postgres|cassandra] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

from bench.common import on_backends
from bench.engine import fresh_app
from bench.workflows import _until_finished, _worker, plain_run


def steps_run(url: str, steps: int, runs: int, concurrency: int) -> dict[str, Any]:
    """``runs`` durable runs of ``steps`` no-op steps, from the worker's start to the last
    run's end."""
    app, tasks = fresh_app(url, "bench.durable_tasks")
    tasks.expected[0] = runs
    for _ in range(runs):
        tasks.steps.delay(steps)
    worker = _worker(app, concurrency)
    started = time.perf_counter()
    completion_s = _until_finished(tasks, worker, started, 1800)
    app.close()
    return {
        "runs": runs,
        "steps_each": steps,
        "completion_s": round(completion_s, 3),
        "steps_per_second": round(runs * steps / completion_s),
    }


def replay_run(url: str, steps: int) -> dict[str, Any]:
    """One run journaling ``steps`` steps, then its replay of them after a short sleep."""
    app, tasks = fresh_app(url, "bench.durable_tasks")
    tasks.replays_s.clear()
    tasks.replay.delay(steps)
    worker = _worker(app, 1)
    _until_finished(tasks, worker, time.perf_counter(), 1800)
    app.close()
    (replay_s,) = tasks.replays_s
    return {
        "journaled_steps": steps,
        "replay_ms": round(replay_s * 1000, 1),
        "per_step_us": round(replay_s / steps * 1e6, 1),
    }


def measure(url: str, steps: int, runs: int, replay: int, concurrency: int) -> dict[str, Any]:
    durable = steps_run(url, steps, runs, concurrency)
    plain = plain_run(url, steps * runs, concurrency)
    return {
        "backend": url.split("://")[0],
        "durable": durable,
        "plain": plain,
        "step_vs_plain_message_time": round(durable["completion_s"] / plain["completion_s"], 3),
        "replay": replay_run(url, replay),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--replay", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--only", choices=("sqlite", "redis", "postgres", "cassandra"))
    parser.add_argument("--out")
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    logging.getLogger("cassandra").setLevel(logging.ERROR)
    extra = {"steps": args.steps, "runs": args.runs, "concurrency": args.concurrency}
    out = None if args.out is None else Path(args.out)

    def run(url: str) -> dict[str, Any]:
        return measure(url, args.steps, args.runs, args.replay, args.concurrency)

    on_backends(run, extra, out, args.only)


if __name__ == "__main__":
    main()
