"""Tasks for the batched crash test: one task with ``batch_size``; each call passes the
gate, records its number in TICKWORK_TEST_DONE, and reports its outcome (every 97th
fails for good, every 89th is retried once); each handler call appends its size to
TICKWORK_TEST_CALLS."""

import os
from datetime import timedelta

from tests.support.gate import pass_gate
from tickwork.scheduler import App
from tickwork.scheduler.model.batching import BatchedCall

app = App()
SIZE = 100


@app.task(batch_size=SIZE, batch_timeout=timedelta(seconds=2), timeout=3, retries=3)
def batched(calls: list[BatchedCall]) -> None:
    with open(os.environ["TICKWORK_TEST_CALLS"], "a") as sizes:
        sizes.write(f"{len(calls)}\n")
    for call in calls:
        n = call.args[0]
        pass_gate()
        with open(os.environ["TICKWORK_TEST_DONE"], "a") as done:
            done.write(f"{n}\n")
        if n % 97 == 0:
            call.fail(ValueError(f"call {n} fails for good"))
        elif n % 89 == 0 and call.attempt == 1:
            call.retry(ConnectionError(f"call {n}: once more"), delay=0.1)
