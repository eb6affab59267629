"""What OpenTelemetry costs a worker once the application set a provider: end-to-end
throughput of no-op handlers with a meter provider set (the worker's histograms recorded
per run through the SDK, an in-memory reader nobody collects from) or a tracer provider
set (a producer span per enqueue and a consumer span per run, batched to an exporter
that drops them; ``traces-sampled``: one trace in a hundred kept), against the same
run with neither, in pairs that alternate, each run in a fresh process (a process sets
its providers once), quoting the median ratio.

python -m bench.otel_pairs [--feature metrics|traces|traces-sampled] [--pairs 6] [--messages 20000]
                           [--only sqlite|redis] [--out FILE.json]
(starts a Redis server; SQLite in a scratch directory)
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import alternate, on_sqlite_and_redis

ROOT = Path(__file__).resolve().parents[1]


def _set_providers(feature: str) -> None:
    if feature == "metrics":
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    elif feature in ("traces", "traces-sampled"):
        from opentelemetry import trace
        from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

        class Dropped(SpanExporter):
            def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        sampled = feature == "traces-sampled"  # one trace in a hundred kept
        provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.01)) if sampled else None)
        provider.add_span_processor(BatchSpanProcessor(Dropped()))
        trace.set_tracer_provider(provider)


def one_run(url: str, feature: str, count: int) -> float:
    """In this process: the providers of ``feature`` ("none": none), then one worker
    drains ``count`` no-ops (enqueued after the providers are set: traced too)."""
    from bench.engine import end_to_end

    _set_providers(feature)
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    return float(end_to_end(url, count, 8, None, 100, activity_interval_s=0)["per_second"])


def _in_a_process(url: str, feature: str, count: int) -> float:
    done = subprocess.run(
        [sys.executable, "-m", "bench.otel_pairs", "--one", url, feature, str(count)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def pairs(url: str, count: int, rounds: int, feature: str) -> dict[str, Any]:
    return {
        "backend": url.split("://")[0],
        "messages": count,
        "feature": feature,
        **alternate(
            rounds,
            "none",
            lambda: _in_a_process(url, "none", count),
            feature,
            lambda: _in_a_process(url, feature, count),
        ),
    }


def main() -> None:
    if sys.argv[1:2] == ["--one"]:
        url, feature, count = sys.argv[2], sys.argv[3], int(sys.argv[4])
        print(json.dumps(one_run(url, feature, count)))
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--feature", choices=("metrics", "traces", "traces-sampled"), default="metrics"
    )
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--only", choices=("sqlite", "redis"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    on_sqlite_and_redis(
        lambda url: pairs(url, args.messages, args.pairs, args.feature), {}, args.out, args.only
    )


if __name__ == "__main__":
    main()
