"""Tasks of the clock-skew fault test: each run appends what ran, the real time it started
(``time.monotonic()``, which the skewed workers do not fake: the test converts it) and
the worker's own idea of the time to the file named by ``TICKWORK_TEST_RUNS``."""

from __future__ import annotations

import os
import time

from tickwork.scheduler import App, current_run

app = App()


def _record(what: str) -> None:
    line = f"{what} {time.monotonic():.4f} {time.time():.3f} {os.getpid()}\n"
    with open(os.environ["TICKWORK_TEST_RUNS"], "a") as runs:
        runs.write(line)


@app.task(timeout=5)
def job(n: int) -> None:
    _record(f"job {n}")


@app.task(timeout=5)
def tick() -> None:
    _record(f"tick {current_run().message_id}")
