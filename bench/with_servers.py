"""Run ``bench.run`` with a Redis server started here (as the test harness does).

python -m bench.with_servers --out bench/results/latest.json [--scale 1.0]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench.common import emit, machine
from bench.engine import run_all
from tests.support.servers import RedisServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    server = RedisServer()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            urls = [f"sqlite:///{scratch}/bench.db", server.url]
            result = {
                "machine": machine(),
                "scale": args.scale,
                "results": [run_all(url, args.scale) for url in urls],
            }
    finally:
        server.stop()
    emit(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
