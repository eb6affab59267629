"""tickwork, Celery, RQ, Dramatiq, Huey and arq side by side on one local Redis, each
with the same task semantics (a no-op that does one ``INCR``; a delayed task that records
how late it started), the measurements of ``bench.peers.measure`` run interleaved
(each round visits the systems in a rotated order, so the machine's drift hits all
alike); medians with min-max; JSON out.

python -m bench.peers.run [--rounds 3] [--count 20000] [--delayed 1000]
                          [--systems tickwork,celery,...] [--scenarios single,...]
                          [--out FILE.json]
(``make bench-peers``: makes the peers' environments, runs this, draws the chart)

Each system runs in its own environment: tickwork in this one; Celery, RQ, Dramatiq and
Huey in ``.venv-peers``; arq in ``.venv-arq`` (it pins ``redis<6``, which Celery's
``kombu`` refuses). The peers are never dependencies of tickwork.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SYSTEMS = ("tickwork", "celery", "rq", "dramatiq", "huey", "arq")
PYTHON = {
    "tickwork": Path(sys.executable),
    "celery": ROOT / ".venv-peers/bin/python",
    "rq": ROOT / ".venv-peers/bin/python",
    "dramatiq": ROOT / ".venv-peers/bin/python",
    "huey": ROOT / ".venv-peers/bin/python",
    "arq": ROOT / ".venv-arq/bin/python",
}
SCENARIOS = ("single", "asingle", "bulk", "process", "lateness")
#: the systems with an asyncio producer (``asingle``: tickwork's ``adelay``, arq's
#: ``enqueue_job``); the others have none to measure
ASYNC_PRODUCERS = ("tickwork", "arq")


def measure_once(system: str, scenario: str, count: int, url: str) -> dict[str, Any]:
    env = {**os.environ, "BENCH_REDIS_URL": url, "PYTHONPATH": str(ROOT)}
    command = [str(PYTHON[system]), "-m", "bench.peers.measure", system, scenario]
    done = subprocess.run(
        [*command, "--count", str(count)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


Measure = Callable[[str, str, int, str], dict[str, Any]]


def run(
    systems: list[str],
    rounds: int,
    count: int,
    delayed: int,
    url: str,
    measure: Measure = measure_once,
    scenarios: Sequence[str] = SCENARIOS,
) -> dict[str, Any]:
    """Every scenario of every system, ``rounds`` times, interleaved; the medians (min
    and max) of what each ``measure(system, scenario, count, url)`` returned."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {s: {} for s in systems}
    for round_ in range(rounds):
        order = systems[round_ % len(systems) :] + systems[: round_ % len(systems)]
        for scenario in scenarios:
            for system in order:
                if scenario == "asingle" and system not in ASYNC_PRODUCERS:
                    continue
                n = delayed if scenario == "lateness" else count
                result = measure(system, scenario, n, url)
                print(json.dumps({"round": round_, **result}), file=sys.stderr, flush=True)
                runs[system].setdefault(scenario, []).append(result)
    table: dict[str, dict[str, Any]] = {}
    for system, scenarios in runs.items():
        table[system] = {}
        for scenario, results in scenarios.items():
            good = [r for r in results if "error" not in r]
            if not good:
                table[system][scenario] = {"error": results[-1]["error"]}
            elif scenario == "lateness":
                table[system][scenario] = {
                    field: summary([r[field] for r in good])
                    for field in ("p50_ms", "p99_ms", "max_ms", "min_ms")
                }
            else:
                table[system][scenario] = summary([r["per_second"] for r in good])
    return {"summary": table, "runs": runs}


def markdown(table: dict[str, dict[str, Any]]) -> str:
    """The summary as a Markdown table: medians with (min-max); "-" for a scenario not
    measured (a system without an asyncio producer, or one left out by ``--scenarios``)."""

    def rate(cell: dict[str, Any] | None) -> str:
        if cell is None:
            return "-"
        if "error" in cell:
            return "failed"
        return f"{cell['median']:,.0f} ({cell['min']:,.0f}-{cell['max']:,.0f})"

    def late(cell: dict[str, Any] | None) -> str:
        if cell is None:
            return "-"
        if "error" in cell:
            return "failed"
        p50, p99, low = cell["p50_ms"], cell["p99_ms"], cell["min_ms"]
        return f"{p50['median']:,.1f} / {p99['median']:,.1f} (earliest {low['median']:,.0f})"

    lines = [
        "| system | single enqueue /s | asyncio single /s | bulk enqueue /s "
        "| processing jobs/s | lateness p50 / p99 ms |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for system, cells in table.items():
        lines.append(
            f"| {system} | {rate(cells.get('single'))} | {rate(cells.get('asingle'))} | "
            f"{rate(cells.get('bulk'))} | {rate(cells.get('process'))} | "
            f"{late(cells.get('lateness'))} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--delayed", type=int, default=1000)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--out")
    args = parser.parse_args()
    systems = [s for s in args.systems.split(",") if s]
    missing = [s for s in systems if not PYTHON[s].exists()]
    if missing:
        sys.exit(f"no environment for {', '.join(missing)}: run `make bench-peers`")
    from bench.common import machine
    from tests.support.servers import RedisServer

    server = RedisServer()
    try:
        scenarios = [s for s in args.scenarios.split(",") if s]
        result = run(
            systems, args.rounds, args.count, args.delayed, server.url, scenarios=scenarios
        )
    finally:
        server.stop()
    settings = {"rounds": args.rounds, "count": args.count, "delayed": args.delayed}
    output = {"machine": machine(), **settings, **result}
    print(markdown(result["summary"]))
    if args.out:
        Path(args.out).write_text(json.dumps(output, indent=2) + "\n")


if __name__ == "__main__":
    main()
