"""Draws a peer benchmark's JSON (``bench.peers.run`` on Redis, ``bench.peers_pg.run`` on
PostgreSQL) as one PNG: the rates of every scenario the run measured (single and bulk
enqueue, processing; medians with min-max bars, log scale) and lateness p50/p99 per
system. Runs where matplotlib is (``.venv-chart``).

python -m bench.peers.chart RESULTS.json OUT.png [WHERE]
"""

from __future__ import annotations

import json
import sys
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

#: the rate scenarios a run may hold, in the order drawn, with their labels
RATES = {
    "single": "single enqueue",
    "asingle": "single enqueue (asyncio)",
    "bulk": "bulk enqueue",
    "process": "processing (the task)",
    "process_noop": "processing (no-op)",
}
COLORS = ("#4c72b0", "#8172b2", "#55a868", "#ccb974")


def measured(cell: dict[str, Any] | None) -> bool:
    return cell is not None and "error" not in cell


def draw(result: dict[str, Any], out: str, where: str = "Redis") -> None:
    table = result["summary"]
    systems = list(table)
    scenarios = [s for s in RATES if any(measured(table[n].get(s)) for n in systems)]
    fig, (rate, late) = plt.subplots(1, 2, figsize=(12, 4.2))
    width = 0.8 / len(scenarios)
    for k, scenario in enumerate(scenarios):
        xs, medians, below, above = [], [], [], []
        for i, system in enumerate(systems):
            cell = table[system].get(scenario)
            if not measured(cell):
                continue
            assert cell is not None
            xs.append(i - 0.4 + width * (k + 0.5))
            medians.append(cell["median"])
            below.append(cell["median"] - cell["min"])
            above.append(cell["max"] - cell["median"])
        rate.bar(
            xs,
            medians,
            width=width,
            yerr=[below, above],
            capsize=2,
            label=RATES[scenario],
            color=COLORS[k % len(COLORS)],
        )
    rate.set_xticks(list(range(len(systems))), systems)
    rate.set_yscale("log")
    rate.set_ylabel("messages/s (log)")
    rate.set_title("rates, one producer / one worker process")
    rate.legend(fontsize=8)
    lat = [s for s in systems if measured(table[s].get("lateness"))]
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
    fig.suptitle(f"tickwork and peers on one local {where} ({result['machine']['when']})")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    with open(sys.argv[1]) as results:
        draw(json.load(results), sys.argv[2], *sys.argv[3:4])
