"""Tasks for the concurrency-slot crash test: one run per tenant at a time; each run
writes ``start n`` and ``end n`` lines to the file in TICKWORK_TEST_DONE and holds its slot
for TICKWORK_TEST_HOLD_S seconds."""

import os
import time

from tickwork.scheduler import App

app = App()


def _note(line: str) -> None:
    with open(os.environ["TICKWORK_TEST_DONE"], "a") as done:
        done.write(line + "\n")


@app.task(timeout=2, concurrency_limit=1, limit_key="tenant")
def hold(tenant: str, n: int) -> None:
    _note(f"start {n}")
    time.sleep(float(os.environ.get("TICKWORK_TEST_HOLD_S", "0.05")))
    _note(f"end {n}")
