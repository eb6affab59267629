"""Tasks for the supervisor tests: each run says which worker process ran it."""

import os
import time

from tickwork.scheduler import App

app = App()


@app.task(keep_result=True)
def where(pause_s: float) -> int:
    """Sleeps ``pause_s`` and returns the pid of the worker process that ran it."""
    time.sleep(pause_s)
    return os.getpid()
