"""Tasks for the events fault test: two subscribers record ``{event id} {task} {pid}`` in
TICKWORK_TEST_DONE for each run (a rerun after a kill shows), and a hook records
``{message id} fanout {pid}`` as each event's fan-out starts, so the test can tell a
delivery done twice because the fan-out that wrote it was killed."""

import os
import time

from tickwork.scheduler import App
from tickwork.scheduler.events.fanout import EVENT_TASK
from tickwork.scheduler.hooks import Hook
from tickwork.scheduler.model.event_names import Event
from tickwork.scheduler.runs.context import RunInfo


def _record(line: str) -> None:
    with open(os.environ["TICKWORK_TEST_DONE"], "a") as done:
        done.write(line + "\n")


class FanOuts(Hook):
    """Records which process starts each event's fan-out."""

    def before_run(self, run: RunInfo) -> None:
        if run.task == EVENT_TASK:
            _record(f"{run.message_id} fanout {os.getpid()}")


app = App(hooks=[FanOuts()])


@app.task(on_events=["order.*"], timeout=2)
def ledger(event: Event) -> None:
    time.sleep(0.002)
    _record(f"{event.id} ledger {os.getpid()}")


@app.task(on_events=["**"], timeout=2)
def audit(event: Event) -> None:
    time.sleep(0.002)
    _record(f"{event.id} audit {os.getpid()}")
