"""Quickstart: a task, a run-once, a repeating and a Quartz cron schedule.

Enqueue, then run a worker (``make demo`` does both, on the embedded SQLite default)::

    python -m examples.quickstart
    tickwork worker -A examples.quickstart --duration 20
"""

from __future__ import annotations

from datetime import timedelta

from tickwork import App, Cron, Repeating

app = App()  # TICKWORK_BACKEND, else sqlite:///tickwork.db


@app.task(queue="default", retries=3, timeout=30)
def send_report(customer_id: int, fmt: str = "pdf") -> None:
    """Pretend to build and send a report."""
    print(f"  -> report for customer {customer_id} as {fmt}", flush=True)


@app.periodic(Cron("*/5 * * * * ?"))  # Quartz: every 5 seconds, installed at worker start
def heartbeat() -> None:
    print("  -> heartbeat", flush=True)


def main() -> None:
    print("run-once now:     ", send_report.delay(42))
    print("run-once in 3 s:  ", send_report.schedule(args=(7,), delay=timedelta(seconds=3)))
    repeating = Repeating(interval=timedelta(seconds=4), repeat_count=4)
    print(
        "every 4 s, 4 runs:",
        send_report.schedule(
            args=(42,),
            kwargs={"fmt": "csv"},
            trigger=repeating,
            key="report:42",
            on_conflict="replace",
        ),
    )
    quartz = Cron("0/10 * * * * ?", tz="Europe/Paris")  # seconds 0, 10, 20, ... in Paris time
    print(
        "Quartz cron /10 s:",
        send_report.schedule(args=(99,), trigger=quartz, key="report:99", on_conflict="replace"),
    )
    app.close()


if __name__ == "__main__":
    main()
