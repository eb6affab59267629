"""Run the benchmark scenarios on several backends, side by side, in one run.

    python -m bench.run                                  # SQLite only
    python -m bench.run --backend sqlite:///bench.db --backend redis://127.0.0.1:6379/15

Prints one JSON document and, with ``--out``, writes it to a file.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench.common import emit, machine
from bench.engine import run_all


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", action="append", help="backend URL (repeatable)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply message counts")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        urls = args.backend or [f"sqlite:///{scratch}/bench.db"]
        result = {
            "machine": machine(),
            "scale": args.scale,
            "results": [run_all(url, args.scale) for url in urls],
        }
    emit(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
