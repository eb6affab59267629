"""The table ``make faults`` prints (and ``docs/reliability.md`` quotes): one row per
fault-test run from the JSON lines the tests wrote (``TICKWORK_FAULTS_OUT``). Exits 1 when
a run failed its checks or a file is missing.

python -m tests.faults.report bench/results/faults.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def table(lines: list[dict[str, object]]) -> str:
    """A Markdown table of the runs."""
    head = (
        "| test | backend | seconds | kills | must run | cancelled | lost | unexpected "
        "| duplicates (bound) | fires | fired twice | fires after the last kill | ok |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )
    rows = []
    for r in lines:
        fires = r.get("fires") or {}
        twice = r.get("fired_twice") or {}
        after = r.get("after_last_kill") or {}
        assert isinstance(fires, dict) and isinstance(twice, dict) and isinstance(after, dict)
        rows.append(
            f"| {r['test']} | {r['backend']} | {r['seconds']} | {r['kills']} | "
            f"{r['enqueued']} | {r['cancelled']} | {r['lost']} | {r['unexpected']} | "
            f"{r['duplicates']} ({r['duplicate_bound']}) | "
            f"{', '.join(f'{k} {v}' for k, v in fires.items())} | "
            f"{', '.join(f'{k} {v}' for k, v in twice.items())} | "
            f"{', '.join(f'{k} {v}' for k, v in after.items())} | "
            f"{'yes' if r['ok'] else 'NO'} |"
        )
    return head + "\n".join(rows) + "\n"


def main() -> None:
    path = Path(sys.argv[1])
    if not path.exists():
        print(f"{path}: no results (did the fault tests run?)", file=sys.stderr)
        raise SystemExit(1)
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    print(table(lines), end="")
    if not all(r["ok"] for r in lines):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
