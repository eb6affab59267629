"""Rate limits per key: at most five calls a second per customer start, across every
worker, however many are queued (Sidekiq Enterprise's window limiter, Celery's
``rate_limit`` made global, Hatchet's rate limits); a named rate is shared by the tasks
that use it.

python -m examples.rate_limits    # runs a worker in this process: 10 calls of each of 2
                                  # customers at 5 per second each; prints when each
                                  # started (five at once, five more a second later)

The starts are counted in the backend, on its clock, so the rate holds across workers in
any number of processes or machines. A message over the rate does not busy-wait: it goes
back to storage, due at the start the backend reserved for it, and runs then.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from datetime import timedelta

from tickwork import App, RateLimit, Worker, WorkerConfig

app = App()
_lock = threading.Lock()
started: dict[str, list[float]] = defaultdict(list)

#: one partner API: 20 calls per 10 seconds in all, shared by every task that calls it
partner_api = RateLimit(name="partner-api", count=20, period=timedelta(seconds=10))


@app.task(rate_limit="5/s", limit_key="customer")
def call_api(customer: str, page: int) -> None:
    with _lock:
        started[customer].append(time.monotonic())


@app.task(rate_limit=partner_api)
def push_invoice(invoice: int) -> None:
    time.sleep(0.01)


def main() -> None:
    for page in range(10):
        for customer in ("acme", "globex"):
            call_api.delay(customer, page)
    for invoice in range(10):
        push_invoice.delay(invoice)
    begin = time.monotonic()
    worker = Worker(app, WorkerConfig(concurrency=8, burst=True, poll_interval_s=0.1))
    stats = worker.run(duration_s=60)
    for customer, times in sorted(started.items()):
        offsets = ", ".join(f"{t - begin:.1f}" for t in times)
        print(f"{customer} started at (s): {offsets}")
    print(f"sent back to wait for their start: {stats.rate_limited}; acked: {stats.acked}")
    app.close()


if __name__ == "__main__":
    main()
