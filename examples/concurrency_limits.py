"""Concurrency limits per key: at most two syncs of one customer run at once, across
every worker, however many are queued (Sidekiq Enterprise's concurrent limiter, Hatchet's
concurrency keys); a named limit is shared by the tasks that use it.

python -m examples.concurrency_limits    # runs a worker in this process: 6 syncs of
                                         # each of 2 customers, 8 handler threads; prints
                                         # the most that ran at once per customer

With workers in several processes or machines the limit holds across all of them: a
slot is stored in the backend, leased like the message, and given back when the run
ends (or when its lease runs out, if its worker died). Work over the limit waits stored,
not claimed and not counted as an attempt, and is woken when a slot comes free.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

from tickwork import App, ConcurrencyLimit, Worker, WorkerConfig

app = App()
_lock = threading.Lock()
_running: Counter[str] = Counter()
most: Counter[str] = Counter()

#: one partner API, five calls at a time in all, shared by every task that calls it
partner_api = ConcurrencyLimit(name="partner-api", capacity=5)


@app.task(concurrency_limit=2, limit_key="customer")
def sync_customer(customer: str, page: int) -> None:
    with _lock:
        _running[customer] += 1
        most[customer] = max(most[customer], _running[customer])
    time.sleep(0.1)  # the work: two of one customer at a time, whatever else is free
    with _lock:
        _running[customer] -= 1


@app.task(concurrency_limit=partner_api)
def push_invoice(invoice: int) -> None:
    time.sleep(0.01)


def main() -> None:
    for page in range(6):
        for customer in ("acme", "globex"):
            sync_customer.delay(customer, page)
    for invoice in range(10):
        push_invoice.delay(invoice)
    worker = Worker(app, WorkerConfig(concurrency=8, burst=True, poll_interval_s=0.1))
    stats = worker.run(duration_s=60)
    print(f"most at once per customer: {dict(most)} (limit 2)")
    print(f"sent back to wait for a slot: {stats.limited} time(s); acked: {stats.acked}")
    app.close()


if __name__ == "__main__":
    main()
