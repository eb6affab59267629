"""Draws ``bench.peers.run``'s JSON as one PNG: processing jobs/s and lateness p50/p99 per
system (medians, with min-max bars). Runs where matplotlib is (``.venv-peers``).

python -m bench.peers.chart RESULTS.json OUT.png
"""

from __future__ import annotations

import json
import sys
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def draw(result: dict[str, Any], out: str) -> None:
    table = result["summary"]
    systems = [s for s in table if "error" not in table[s].get("process", {"error": 1})]
    fig, (rate, late) = plt.subplots(1, 2, figsize=(11, 4))
    cells = [table[s]["process"] for s in systems]
    medians = [c["median"] for c in cells]
    errors = [
        [m - c["min"] for m, c in zip(medians, cells, strict=True)],
        [c["max"] - m for m, c in zip(medians, cells, strict=True)],
    ]
    rate.bar(systems, medians, yerr=errors, color="#4c72b0", capsize=3)
    rate.set_title("processing: jobs/s, one worker process (INCR task)")
    rate.set_ylabel("jobs/s")
    lat = [s for s in systems if "error" not in table[s].get("lateness", {"error": 1})]
    p50 = [max(0.1, table[s]["lateness"]["p50_ms"]["median"]) for s in lat]
    p99 = [max(0.1, table[s]["lateness"]["p99_ms"]["median"]) for s in lat]
    x = range(len(lat))
    late.bar([i - 0.2 for i in x], p50, width=0.4, label="p50", color="#55a868")
    late.bar([i + 0.2 for i in x], p99, width=0.4, label="p99", color="#c44e52")
    for i, system in enumerate(lat):
        for offset, field in ((-0.2, "p50_ms"), (0.2, "p99_ms")):
            if table[system]["lateness"][field]["median"] < 0:
                late.annotate("early", (i + offset, 0.12), ha="center", fontsize=8)
    late.set_xticks(list(x), lat)
    late.set_yscale("log")
    late.set_title("lateness of 1,000 delayed jobs, ms (log; early: ran before due)")
    late.legend()
    fig.suptitle(f"tickwork and peers on one local Redis ({result['machine']['when']})")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    with open(sys.argv[1]) as results:
        draw(json.load(results), sys.argv[2])
