"""Tasks of the startup fault test: two periodic schedules that every worker installs at
start; each run appends ``NAME MESSAGE-ID`` to the file named by ``TICKWORK_TEST_RUNS``."""

from __future__ import annotations

import os
from datetime import timedelta

from tickwork.scheduler import App, current_run
from tickwork.triggers import Cron, Repeating

app = App()


def _record(name: str) -> None:
    with open(os.environ["TICKWORK_TEST_RUNS"], "a") as runs:
        runs.write(f"{name} {current_run().message_id}\n")


@app.periodic(Repeating(interval=timedelta(milliseconds=300)), key="often")
def often() -> None:
    _record("often")


@app.periodic(Cron("* * * * * ?"), key="each-second")
def each_second() -> None:
    _record("each-second")
