"""What the dashboard shows: a steady mix of work with some failures (the queues page's
charts of the last hour), a concurrency limit per customer (the queues-and-limits page)
and a schedule (the schedules page, with backfill).

python -m examples.dashboard
tickwork worker -A examples.dashboard --duration 60 &
tickwork dashboard            # http://127.0.0.1:8080/ (no -A needed: workers publish
                              # their limits in the registry)

Each worker appends what it did per queue to the activity log every 15 s (and when it
stops); ``app.queues.activity()`` reads it back per minute, as this module's ``summary`` does.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta

from tickwork import App, Repeating, RetryPolicy

app = App()


@app.task(concurrency_limit=2, limit_key="customer")
def sync_customer(customer: str) -> None:
    time.sleep(0.2)


@app.task(retry=RetryPolicy(retries=0))
def charge(order: int) -> None:
    if order % 7 == 0:
        raise ConnectionError(f"payment service refused order {order}")


@app.task
def heartbeat() -> None: ...


def summary(minutes: int = 5) -> str:
    """One line per minute that saw work: runs finished, failed, lateness p95."""
    lines = []
    for minute in app.queues.activity(minutes).total:
        if minute.finished:
            p95 = minute.lateness_quantile(0.95) or 0.0
            start = datetime.fromtimestamp(minute.start_ms / 1000, UTC)
            lines.append(
                f"{start:%H:%M} UTC: {minute.finished} finished, "
                f"{minute.failed} failed, lateness p95 {p95 * 1000:.0f} ms"
            )
    return "\n".join(lines) or "no activity logged yet: run a worker"


def main() -> None:
    for order in range(60):
        charge.delay(order)
    for customer in random.choices(["acme", "globex", "initech"], k=12):
        sync_customer.delay(customer)
    heartbeat.schedule(key="heartbeat", trigger=Repeating(interval=timedelta(seconds=10)),
                       on_conflict="replace")  # fmt: skip
    print(summary())
    app.close()


if __name__ == "__main__":
    main()
