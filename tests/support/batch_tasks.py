"""Tasks for the batch fault test: members record their number in TICKWORK_TEST_DONE and
return it (every 97th fails for good); the callback appends the batch's outcome, as one
JSON line, to TICKWORK_TEST_CALLBACKS."""

import json
import os
import time

from tests.support.gate import pass_gate
from tickwork.scheduler import App, BatchOutcome

app = App()


@app.task(timeout=2)
def member(n: int) -> int:
    time.sleep(0.003)
    pass_gate()
    with open(os.environ["TICKWORK_TEST_DONE"], "a") as done:
        done.write(f"{n}\n")
    if n % 97 == 0:
        raise ValueError(f"member {n} fails")
    return n


@app.task(timeout=10)
def summary(outcome: BatchOutcome) -> None:
    with open(os.environ["TICKWORK_TEST_CALLBACKS"], "a") as out:
        out.write(json.dumps(outcome) + "\n")
