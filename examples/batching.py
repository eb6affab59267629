"""Batching into one run: a task's calls collected and handled together.

python -m examples.batching   # 230 notifications, sent by a bulk API 100 at a time

Each call asks for one notification, but the provider's bulk endpoint takes up to 100
at once, per tenant: the task has ``batch_size=100`` and ``batch_key="tenant"``, so the
worker runs its handler with up to 100 calls of one tenant (or with what came within a
second of the first). The handler reports on each call: an address the provider refuses
for good fails that call alone (to the poison store); one it cannot reach now is retried.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta

from tickwork import App, Worker, WorkerConfig
from tickwork.workflows import BatchedCall

app = App()
SENT: list[str] = []
SIZES: list[tuple[str, int]] = []


class Refused(Exception):
    """The provider will never deliver to this address."""


@app.task(batch_size=100, batch_timeout=timedelta(seconds=1), batch_key="tenant", retries=3)
def notify(calls: list[BatchedCall]) -> None:
    tenant = calls[0].key
    SIZES.append((str(tenant), len(calls)))
    print(f"  one bulk request for {tenant}: {len(calls)} notification(s)", flush=True)
    for call in calls:
        address = call.kwargs["address"]
        if address.endswith("@invalid"):
            call.fail(Refused(f"{address} does not exist"))
        elif address.startswith("busy") and call.attempt == 1:
            call.retry(TimeoutError(f"{address}: the mailbox is busy"), delay=0.2)
        else:
            SENT.append(address)


def main() -> None:
    app.enqueue_many(
        [notify.call(tenant="acme", address=f"user{n}@acme.example") for n in range(150)]
        + [notify.call(tenant="globex", address=f"user{n}@globex.example") for n in range(77)]
        + [notify.call(tenant="globex", address="busy@globex.example")]
        + [notify.call(tenant="acme", address=f"ghost{n}@invalid") for n in range(2)]
    )
    worker = Worker(app, WorkerConfig(poll_interval_s=0.05))
    worker.start()
    deadline = time.monotonic() + 30
    while len(SENT) < 228 and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.stop()
    worker.join(10)
    poisoned = app.poison.list()
    app.close()
    print(f"230 calls in {len(SIZES)} handler runs; {len(SENT)} sent, {len(poisoned)} refused")
    if len(SENT) != 228 or len(poisoned) != 2 or len(SIZES) > 6:
        sys.exit("expected 228 sent, 2 refused, in at most 6 runs")


if __name__ == "__main__":
    main()
