"""A schedule's history: what happened to each occurrence (the occurrence ledger).

python -m examples.schedule_history   # installs "sync" every half second, runs a worker
                                      # for 3.5 seconds, prints the schedule's history
tickwork schedules history sync       # the same, in the schedule's timezone
tickwork schedules                    # each schedule's last outcome
tickwork history --id ID              # a one-off message of a task with history=True

The task fails on its second call (a retry then succeeds) and sleeps through a few
occurrences on its fourth, so the history shows runs that succeeded, an attempt that was
retried with its error, and the occurrences skipped while a run overlapped them. Each
record is written in the same atomic step as the ack or retry it describes.
"""

from __future__ import annotations

import time
from datetime import timedelta

from tickwork import App, Repeating, Worker, WorkerConfig

app = App()
_calls: list[float] = []


@app.task(retries=1)
def sync(source: str) -> None:
    _calls.append(time.monotonic())
    if len(_calls) == 2:
        raise ConnectionError(f"{source} reset the connection")
    if len(_calls) == 4:
        time.sleep(1.2)  # longer than the interval: the next occurrences are skipped


def main() -> None:
    sync.schedule(
        args=("crm",),
        trigger=Repeating(interval=timedelta(milliseconds=500)),
        key="sync",
        on_conflict="replace",
    )
    Worker(app, WorkerConfig(poll_interval_s=0.05)).run(duration_s=3.5)
    print(f"{'scheduled':>12}  {'outcome':<16} {'late':>7} {'took':>6}  try  error")
    for h in reversed(app.schedules.history("sync")):
        late = f"{h.lateness.total_seconds():.2f}s" if h.lateness is not None else "-"
        took = f"{h.duration.total_seconds():.2f}s" if h.duration is not None else "-"
        outcome = h.outcome.value + (f" x{h.count}" if h.count > 1 else "")
        print(
            f"{h.scheduled_at:%H:%M:%S.%f}"[:12],
            f" {outcome:<16} {late:>7} {took:>6}  {h.attempts or '-':>3}  {h.error or ''}",
        )
    app.close()


if __name__ == "__main__":
    main()
