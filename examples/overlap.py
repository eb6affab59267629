"""Overlapping runs: a schedule whose runs may take longer than its interval.

python -m examples.overlap     # installs two schedules every second whose task takes
                               # 1.5 s, runs a worker for 3.5 seconds, prints when each
                               # run started and the two histories
tickwork schedules history export-serial

``overlap="serial"`` (the default) never starts an occurrence while the one before it
runs: the next is planned when a run ends, and the occurrences that passed meanwhile are
coalesced (recorded as ``skipped_overlap``). ``overlap="allow"`` starts every occurrence
on time, each as its own message (keyed ``KEY/run/<epoch ms>``), however many still run.
"""

from __future__ import annotations

import time
from datetime import timedelta

from tickwork import App, Repeating, Worker, WorkerConfig
from tickwork.triggers import Overlap

app = App()
_started = time.monotonic()


@app.task
def export(kind: str) -> None:
    print(f"  {time.monotonic() - _started:5.1f}s  export ({kind}) starts", flush=True)
    time.sleep(1.5)


def main() -> None:
    for overlap in (Overlap.SERIAL, Overlap.ALLOW):
        export.schedule(
            args=(overlap.value,),
            trigger=Repeating(interval=timedelta(seconds=1), overlap=overlap),
            key=f"export-{overlap.value}",
            on_conflict="replace",
        )
    Worker(app, WorkerConfig(concurrency=8, poll_interval_s=0.05)).run(duration_s=3.5)
    for overlap in (Overlap.SERIAL, Overlap.ALLOW):
        outcomes = [
            h.outcome.value for h in reversed(app.schedules.history(f"export-{overlap.value}"))
        ]
        print(f"{overlap.value}: {', '.join(outcomes)}")
    app.close()


if __name__ == "__main__":
    main()
