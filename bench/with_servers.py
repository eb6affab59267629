"""Run ``bench.run`` with a Redis server started here (as the test harness does).

python -m bench.with_servers --out bench/results/latest.json [--scale 1.0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.common import on_sqlite_and_redis
from bench.engine import run_all


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    on_sqlite_and_redis(lambda url: run_all(url, args.scale), {"scale": args.scale}, args.out, None)


if __name__ == "__main__":
    main()
