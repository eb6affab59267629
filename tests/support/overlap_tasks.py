"""Tasks for the overlap tests that run on the process pool (``TICKWORK_BACKEND`` names
the test's backend)."""

from __future__ import annotations

import time

from tickwork.scheduler import App

app = App()


@app.task
def deaf(marker: str) -> None:
    """Records its start, then sleeps in C: an abort's exception cannot reach it."""
    with open(marker, "a") as starts:
        starts.write("start\n")
    time.sleep(600)
