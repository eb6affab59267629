"""Time limits: a handler that would run for ever is stopped at its task's limit, the run
fails (retried or poisoned by its policy) and the worker goes on with the next message.

    python -m examples.time_limits
    tickwork worker -A examples.time_limits --duration 5
    tickwork poison list            # the stuck run, as TimeLimitExceeded

A long loop can look at how long it has left and stop cleanly first, or be warned at a
soft limit (``SoftTimeLimitExceeded``, raised once) and wrap up there.
"""

from __future__ import annotations

import time

from tickwork import App, current_run
from tickwork.errors import SoftTimeLimitExceeded

app = App()  # TICKWORK_BACKEND, else sqlite:///tickwork.db


@app.task(time_limit=2)
def stuck_report() -> None:
    """A bug: this loop never ends. At 2 s, TimeLimitExceeded is raised in it."""
    while True:
        pass


@app.task(time_limit=3)
def careful_export(rows: int) -> int:
    """Works in steps while it has time, and says how far it got."""
    done = 0
    while done < rows:
        left = current_run().time_left()
        if left is not None and left < 0.5:
            print(f"  -> export stops cleanly after {done} rows, {left:.1f} s before its limit")
            return done
        time.sleep(0.01)  # one row
        done += 1
    print(f"  -> export finished: {done} rows")
    return done


@app.task(soft_time_limit=1, time_limit=5)
def reindex(documents: int) -> int:
    """Warned at 1 s, it saves what it has and stops, well before its 5 s limit."""
    done = 0
    try:
        while done < documents:
            time.sleep(0.001)  # one document
            done += 1
    except SoftTimeLimitExceeded:
        print(f"  -> reindex warned at its soft limit: saved {done} documents")
    return done


@app.task
def hello(name: str) -> None:
    print(f"  -> hello {name}: the worker goes on serving", flush=True)


def main() -> None:
    print("stuck report:   ", stuck_report.delay())
    print("careful export: ", careful_export.delay(10_000))
    print("reindex:        ", reindex.delay(1_000_000))
    print("hello:          ", hello.delay("ada"))


if __name__ == "__main__":
    main()
