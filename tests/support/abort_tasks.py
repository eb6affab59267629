"""Tasks for the process-pool abort tests (imported by each pool process). Each writes
marker files so the test, in another process, sees what ran."""

import time
from pathlib import Path

from tickwork.scheduler import Aborted, App

app = App()


@app.task(retries=3)
def sleeper(marker: str) -> None:
    """Pure Python: the abort signal interrupts the sleep."""
    Path(marker + ".started").touch()
    time.sleep(60)
    Path(marker + ".finished").touch()


@app.task(retries=3)
def stubborn(marker: str) -> None:
    """Swallows the abort: only killing its process stops it."""
    Path(marker + ".started").touch()
    try:
        time.sleep(60)
    except Aborted:
        Path(marker + ".ignored").touch()
        time.sleep(60)


@app.task(retries=3)
def bystander(marker: str) -> None:
    """Runs next to an aborted handler; counts its runs."""
    with open(marker + ".runs", "a") as runs:
        runs.write("run\n")
    time.sleep(1.0)
