"""A limit changed while the worker runs: exports run one at a time (the warehouse's
declared limit) until the export window opens and an operator allows three, without a
deploy or a restart.

python -m examples.live_limits   # twelve exports, one at a time; then three at once
                                 # once the capacity is set, within seconds

The same change from a shell: ``tickwork limits set warehouse 3 -A examples.live_limits``
(and ``tickwork limits clear warehouse`` to give back the declared one).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from tickwork import App, ConcurrencyLimit, Worker, WorkerConfig

app = App()
WAREHOUSE = ConcurrencyLimit(name="warehouse", capacity=1)

_lock = threading.Lock()
running = 0
most_at_once: list[int] = [0]
finished: list[int] = []


@app.task(concurrency_limit=WAREHOUSE)
def export(table: int) -> None:
    global running
    with _lock:
        running += 1
        most_at_once[0] = max(most_at_once[0], running)
    time.sleep(0.2)
    with _lock:
        running -= 1
        finished.append(table)


def wait_until(condition: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def main() -> None:
    for table in range(12):
        export.delay(table)
    worker = Worker(app, WorkerConfig(concurrency=4, poll_interval_s=0.05))
    worker.start()
    try:
        wait_until(lambda: len(finished) >= 3)
        print(f"declared: at most {most_at_once[0]} export at once")
        before = most_at_once[0]
        most_at_once[0] = running
        app.limits.set("warehouse", 3, note="the export window opened")
        started = time.monotonic()
        wait_until(lambda: most_at_once[0] >= 3)
        print(f"set to 3: {most_at_once[0]} at once, {time.monotonic() - started:.1f} s later")
        wait_until(lambda: len(finished) == 12)
    finally:
        worker.stop()
        worker.join(10)
    for view in app.limits.list():
        print(f"{view.name}: declared {view.declared}, in force {view.amount} ({view.note})")
    app.limits.clear("warehouse")
    app.close()
    if before != 1 or most_at_once[0] != 3 or len(finished) != 12:
        sys.exit("expected one export at once, then three")


if __name__ == "__main__":
    main()
