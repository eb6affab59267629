"""Tasks for the time-limit tests, importable by pool processes (``TICKWORK_BACKEND``
names the test's backend). Each leaves marker files so a test sees what ran."""

from __future__ import annotations

import time
from pathlib import Path

from tickwork.scheduler import App, SoftTimeLimitExceeded, current_run

app = App()


@app.task(time_limit=1)
def spins(marker: str) -> None:
    """Pure Python for ever: stopped at its limit by the exception raised in it."""
    Path(marker + ".started").touch()
    while True:
        pass


@app.task(time_limit=1)
def swallows(marker: str) -> None:
    """Catches everything, and ``TimeLimitExceeded`` with it (a ``BaseException``):
    only abandoning its thread or killing its process stops it."""
    Path(marker + ".started").touch()
    while True:
        try:
            time.sleep(0.05)
        except BaseException:
            Path(marker + ".swallowed").touch()


@app.task(time_limit=1, retries=1)
def spins_twice(marker: str) -> None:
    with open(marker + ".runs", "a") as runs:
        runs.write("run\n")
    while True:
        pass


@app.task(time_limit=30)
def measures(marker: str) -> None:
    left = current_run().time_left()
    Path(marker + ".left").write_text(repr(left))


@app.task
def unlimited(marker: str) -> None:
    Path(marker + ".left").write_text(repr(current_run().time_left()))
    while not Path(marker + ".stop").exists():
        time.sleep(0.02)


@app.task
def quick(marker: str) -> None:
    with open(marker + ".runs", "a") as runs:
        runs.write("run\n")


@app.task(soft_time_limit=0.5, time_limit=10)
def cleans_up(marker: str) -> str:
    """Warned at its soft limit, it stops cleanly, well before its time limit."""
    try:
        while True:
            pass
    except SoftTimeLimitExceeded:
        Path(marker + ".warned").touch()
        return "stopped cleanly"


@app.task(soft_time_limit=0.5)
def ignores_the_warning(marker: str) -> None:
    """No time limit: the warning, not caught, fails the run."""
    Path(marker + ".started").touch()
    while True:
        pass
