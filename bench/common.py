"""Shared benchmark helpers: timing, percentiles, JSON output."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def machine() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def summary_ms(values_s: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values_s]
    return {
        "p50_ms": round(percentile(ms, 50), 3),
        "p90_ms": round(percentile(ms, 90), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "max_ms": round(max(ms), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
        "min_ms": round(min(ms), 3),
    }


def emit(result: dict[str, Any]) -> None:
    print(json.dumps(result, indent=2))


def report(backend: str, results: dict[str, Any], out: Path | None) -> None:
    """Print one run's results with the machine's facts, and write them to ``out``."""
    result = {"machine": machine(), "backend": backend, "results": results}
    emit(result)
    if out:
        out.write_text(json.dumps(result, indent=2) + "\n")
