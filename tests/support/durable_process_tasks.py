"""Durable tasks for the process pool's test: each step's body appends ``{name} {pid}``
to TICKWORK_TEST_DONE."""

import os

from tickwork.scheduler import App, RetryPolicy, current_run

app = App()


def body(name: str) -> str:
    with open(os.environ["TICKWORK_TEST_DONE"], "a") as done:
        done.write(f"{name} {os.getpid()}\n")
    return name


@app.task(keep_result=True)
def child(n: int) -> int:
    return n * 10


@app.task(durable=True, keep_result=True, retry=RetryPolicy(retries=3, base_s=0.05))
def pipeline(label: str) -> list[object]:
    run = current_run()
    first = run.step("first", body, f"{label} first")
    if run.attempt == 1:
        raise ConnectionError("lost after the first step")
    run.sleep(0.3)
    kids = run.gather([run.spawn(child.call(n)) for n in (1, 2)])
    return [first, run.step("second", body, f"{label} second"), kids, run.now().year > 2000]
