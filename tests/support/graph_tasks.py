"""Tasks for the graph fault test: a step records ``{number} {pid}`` in
TICKWORK_TEST_DONE (one line per run, so a rerun after a kill shows) and returns its
number; the last step appends the results it got, as one JSON line, to
TICKWORK_TEST_CALLBACKS."""

import json
import os
import time

from tests.support.gate import pass_gate
from tickwork.scheduler import App

app = App()


@app.task(timeout=2)
def step(n: int) -> int:
    time.sleep(0.003)
    pass_gate()
    with open(os.environ["TICKWORK_TEST_DONE"], "a") as done:
        done.write(f"{n} {os.getpid()}\n")
    return n


@app.task(timeout=10)
def last(parents: dict[str, int]) -> None:
    with open(os.environ["TICKWORK_TEST_CALLBACKS"], "a") as out:
        out.write(json.dumps(parents) + "\n")
