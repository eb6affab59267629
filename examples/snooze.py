"""Snooze: a handler that is not ready yet returns ``Snooze(seconds)`` and runs again
later, without it counting as a failed attempt (Oban's snooze).

python -m examples.snooze   # enqueues an export, runs a worker until it is ready, then
                            # prints the run's history: two snoozes, then the success

Here a report is "built" by a partner that needs a moment: the task asks for it, and
while it is not ready it snoozes for a second instead of failing (a task without retries
can snooze as often as it needs). Each snooze is in the run's history.
"""

from __future__ import annotations

import time

from tickwork import App, Snooze, Worker, WorkerConfig

app = App()
READY_AT = time.monotonic() + 1.5  # the partner's report is ready in 1.5 s


@app.task(retries=0, history=True, keep_result=True)
def fetch_report(report_id: str) -> str | Snooze:
    if time.monotonic() < READY_AT:
        print(f"  {report_id} is not ready: snoozing for 1 s", flush=True)
        return Snooze(1)
    print(f"  {report_id} is ready", flush=True)
    return f"{report_id}.csv"


def main() -> None:
    handle = fetch_report.delay("sales-2026-11")
    worker = Worker(app, WorkerConfig(poll_interval_s=0.05))
    worker.start()
    try:
        print(f"result: {handle.result(timeout=30)}")
    finally:
        worker.stop()
        worker.join(10)
    for entry in reversed(app.run_history(handle)):
        print(f"  {entry.outcome}: attempt {entry.attempts} {entry.error or ''}")
    app.close()


if __name__ == "__main__":
    main()
