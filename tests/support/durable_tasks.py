"""Tasks for the durable fault test: ``order(n, steps)`` runs ``steps`` journaled steps;
each step's body appends ``{n} {step} {pid}`` to TICKWORK_TEST_DONE (one line per time
the body runs, so a step run again after a kill shows) and returns its number. The body
that records a round's last allowed run holds there (``hold_at_quota``): a kill of its
worker lands after the body ran and before its journal write, so the step runs again."""

import os
import time

from tests.support.gate import hold_at_quota, pass_gate
from tickwork.scheduler import App, RetryPolicy, current_run

app = App()


def body(n: int, index: int) -> int:
    time.sleep(0.002)
    pass_gate()
    with open(os.environ["TICKWORK_TEST_DONE"], "a") as done:
        done.write(f"{n} {index} {os.getpid()}\n")
    hold_at_quota()
    return n * 1000 + index


# every kill redelivers the run, a counted attempt: enough of them for the kill loop
@app.task(durable=True, keep_result=True, timeout=2, retry=RetryPolicy(retries=100, base_s=0.05))
def order(n: int, steps: int) -> int:
    run = current_run()
    return sum(run.step(f"step {index}", body, n, index) for index in range(steps))
