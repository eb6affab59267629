"""Tasks for the crash test: each run appends its number to the file in TICKWORK_TEST_DONE."""

import os
import time

from tickwork.scheduler import App

app = App()


@app.task(timeout=2)
def record(n: int, pad: str = "") -> None:
    """Record ``n``; ``pad`` makes a message as large as a test needs."""
    time.sleep(0.002)
    with open(os.environ["TICKWORK_TEST_DONE"], "a") as done:
        done.write(f"{n}\n")
