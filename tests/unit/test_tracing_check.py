"""Whether a tracer provider is set is asked once a second at most until one is (the
question reads the environment), and at once when a worker starts. OpenTelemetry sets
its global provider once a process, so each case runs in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_CASE = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from tickwork.scheduler.runs import tracing
tracing.RECHECK_S = 3600.0
assert not tracing.configured()
trace.set_tracer_provider(TracerProvider())
assert not tracing.configured(), "asked again sooner than RECHECK_S"
{then}
assert tracing.configured(), "the provider set is seen"
"""


def _run(then: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CASE.format(then=then)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_a_provider_set_later_is_seen_once_the_recheck_interval_passed() -> None:
    _run("tracing.RECHECK_S = 0.0  # the interval has passed")


def test_a_provider_is_looked_for_at_once_when_asked() -> None:
    _run("tracing.look_for_provider()")
