"""Debounce: many calls for one customer within a quiet period become one run, with the
last call's arguments; a run waits at most ``max`` after the first call of its period.

python -m examples.debounce   # 20 edits of two customers' profiles in half a second,
                              # two syncs to the CRM, each with the last edit

Here each edit of a customer's profile asks for a sync to a CRM; syncing after every
keystroke would be wasteful, so the task is debounced per customer: one sync, a second
after the last edit (and at most five seconds after the first, while edits keep coming).
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta

from tickwork import App, Debounce, Worker, WorkerConfig

app = App()
SYNCED: list[tuple[str, int]] = []


@app.task(debounce=Debounce(timedelta(seconds=1), max=timedelta(seconds=5), key="customer"))
def sync_to_crm(customer: str, edit: int) -> None:
    print(f"  syncing {customer} at edit {edit}", flush=True)
    SYNCED.append((customer, edit))


def main() -> None:
    for edit in range(1, 11):
        sync_to_crm.delay("acme", edit)
        sync_to_crm.delay("globex", edit)
        time.sleep(0.05)
    worker = Worker(app, WorkerConfig(poll_interval_s=0.05))
    worker.start()
    deadline = time.monotonic() + 30
    while len(SYNCED) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.stop()
    worker.join(10)
    app.close()
    print(f"20 calls, {len(SYNCED)} syncs: {sorted(SYNCED)}")
    if sorted(SYNCED) != [("acme", 10), ("globex", 10)]:
        sys.exit("expected one sync per customer, with its last edit")


if __name__ == "__main__":
    main()
