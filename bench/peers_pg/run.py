"""tickwork, Oban for Python and procrastinate side by side on one local PostgreSQL, each
with the same tasks (one that does one ``UPDATE``, one that does nothing, a delayed one
that records how late it started) and ``CONCURRENCY`` jobs at once; the scenarios of
``bench.peers_pg.measure`` run interleaved (each round visits the systems in a rotated
order), each on a fresh database; medians with min-max; JSON out.

python -m bench.peers_pg.run [--rounds 3] [--count 20000] [--delayed 1000]
                             [--systems tickwork,oban,procrastinate] [--out FILE.json]
(``make bench-peers-postgres``: makes the peers' environments and runs this)

Each system runs in its own environment: tickwork in this one; Oban for Python in
``.venv-oban`` and procrastinate in ``.venv-procrastinate`` (both need Python 3.12).
The peers are never dependencies of tickwork.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

from bench.peers.run import run

ROOT = Path(__file__).resolve().parents[2]
SYSTEMS = ("tickwork", "oban", "procrastinate")
PYTHON = {
    "tickwork": Path(sys.executable),
    "oban": ROOT / ".venv-oban/bin/python",
    "procrastinate": ROOT / ".venv-procrastinate/bin/python",
}
SCENARIOS = ("single", "bulk", "process", "process_noop", "lateness")
RATES = ("single", "bulk", "process", "process_noop")


def fresh_database(server_url: str, name: str) -> str:
    """An empty database ``name`` on the server (dropped first if it exists)."""
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + f"/{name}"


def measure_once(system: str, scenario: str, count: int, server_url: str) -> dict[str, Any]:
    url = fresh_database(server_url, f"bench_{system}")
    env = {**os.environ, "BENCH_PG_URL": url, "PYTHONPATH": str(ROOT)}
    command = [str(PYTHON[system]), "-m", "bench.peers_pg.measure", system, scenario]
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


def markdown(table: dict[str, dict[str, Any]]) -> str:
    """The summary as a Markdown table: medians with (min-max)."""

    def rate(cell: dict[str, Any]) -> str:
        if "error" in cell:
            return "failed"
        return f"{cell['median']:,.0f} ({cell['min']:,.0f}-{cell['max']:,.0f})"

    def late(cell: dict[str, Any]) -> str:
        if "error" in cell:
            return "failed"
        return f"{cell['p50_ms']['median']:,.1f} / {cell['p99_ms']['median']:,.1f}"

    lines = [
        "| system | single enqueue /s | bulk enqueue /s | jobs/s (one UPDATE) "
        "| jobs/s (no-op) | lateness p50 / p99 ms |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for system, cells in table.items():
        lines.append(
            f"| {system} | "
            + " | ".join(rate(cells[s]) for s in RATES)
            + f" | {late(cells['lateness'])} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--delayed", type=int, default=1000)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--out")
    args = parser.parse_args()
    systems = [s for s in args.systems.split(",") if s]
    missing = [s for s in systems if not PYTHON[s].exists()]
    if missing:
        sys.exit(f"no environment for {', '.join(missing)}: run `make bench-peers-postgres`")
    from bench.common import machine
    from tests.support.postgres_servers import PostgresServer

    server = PostgresServer()
    try:
        result = run(
            systems, args.rounds, args.count, args.delayed, server.url, measure_once, SCENARIOS
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
