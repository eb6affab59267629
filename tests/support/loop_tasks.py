"""Tasks of the crash-loop fault test: each run appends one line naming what ran (``job N``
or ``tick MESSAGE-ID``) to the file named by ``TICKWORK_TEST_RUNS`` (small appends to a
file opened for appending land whole, whichever process writes)."""

from __future__ import annotations

import os
import time

from tickwork.scheduler import App, current_run

app = App()


def _record(line: str) -> None:
    with open(os.environ["TICKWORK_TEST_RUNS"], "a") as runs:
        runs.write(line + "\n")


@app.task(timeout=2)  # a short lease: work a killed worker held comes back within seconds
def job(n: int) -> None:
    time.sleep(0.01)  # long enough that kills land while runs are in progress
    _record(f"job {n}")


@app.task(timeout=2)
def tick() -> None:
    time.sleep(0.01)
    _record(f"tick {current_run().message_id}")


@app.task(timeout=1)  # leases of 1 s: a paused worker loses its lease quickly
def stall() -> None:
    time.sleep(0.3)
    _record(f"stall {current_run().message_id} {os.getpid()}")
