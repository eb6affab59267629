"""The demo ``make demo`` runs: every firing on one line, then one line that sums them up.

    python -m examples.demo [--seconds 16]

It enqueues a run-once message (now, and in 2 s), a repeating schedule (every 3 s, five
runs), a Quartz cron in Paris time (every 5 s) and a schedule it cancels by key before
it runs, then runs a worker in this process. A hook (``Firings``) prints each firing as it
starts: task, key, which occurrence of its schedule, when it was due, when it ran, and
how late. At the end: how many fired, the lateness (median and worst), how many ran early
(none should), and the command that opens the dashboard on the same database.
"""

from __future__ import annotations

import argparse
import statistics
import threading
from datetime import UTC, datetime, timedelta

from tickwork import App, Cron, Hook, Repeating, RunInfo, Worker, WorkerConfig


class Firings(Hook):
    """Prints each firing on one line (a lock: two never share a line) and keeps its
    lateness for the summary."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._occurrences: dict[str, int] = {}
        self.lateness_ms: list[int] = []

    def before_run(self, run: RunInfo) -> None:
        ran = datetime.now(UTC)
        due = ran - timedelta(milliseconds=run.lateness_ms)
        with self._lock:
            self.lateness_ms.append(run.lateness_ms)
            seen = self._occurrences.get(run.key or run.message_id, 0) + 1
            self._occurrences[run.key or run.message_id] = seen
            occurrence = f"#{seen}" if run.key else "once"
            print(
                f"fired {run.task.rsplit('.', 1)[-1]:<12} key={run.key or '-':<10} "
                f"{occurrence:<5} due {due:%H:%M:%S.%f}"[:-3]
                + f" ran {ran:%H:%M:%S.%f}"[:-3]
                + f" late {run.lateness_ms:>4} ms",
                flush=True,
            )


firings = Firings()
app = App(hooks=[firings])  # TICKWORK_BACKEND, else sqlite:///tickwork.db


@app.task
def send_report(customer_id: int, fmt: str = "pdf") -> None:
    """Pretend to build and send a report."""


@app.task
def heartbeat() -> None:
    """Say the worker is alive."""


def enqueue() -> None:
    """The demo's messages, each described on a line of its own."""
    send_report.delay(42)
    print("enqueued: a run-once now, and one in 2 s")
    send_report.schedule(args=(7,), delay=timedelta(seconds=2))
    every = Repeating(interval=timedelta(seconds=3), repeat_count=5)
    send_report.schedule(
        args=(42,), kwargs={"fmt": "csv"}, trigger=every, key="report:42", on_conflict="replace"
    )
    print(f"enqueued: report:42, {every.describe()}")
    paris = Cron("0/5 * * * * ?", tz="Europe/Paris")  # Quartz: seconds first
    heartbeat.schedule(trigger=paris, key="heartbeat", on_conflict="replace")
    print(f"enqueued: heartbeat, {paris.describe()}")
    later = Repeating(interval=timedelta(seconds=2), delay=timedelta(seconds=1))
    send_report.schedule(args=(5,), trigger=later, key="report:5", on_conflict="replace")
    cancelled = app.cancel(key="report:5")
    print(f"enqueued and cancelled by key: report:5 ({'cancelled' if cancelled else 'gone'})")


def summary(lateness_ms: list[int]) -> str:
    """One line: firings, lateness p50 and max, how many ran early."""
    if not lateness_ms:
        return "no firing"
    early = sum(1 for ms in lateness_ms if ms < 0)
    return (
        f"{len(lateness_ms)} firings; lateness p50 {statistics.median(lateness_ms):.0f} ms, "
        f"max {max(lateness_ms)} ms; early {early}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=16.0, help="how long the worker runs")
    seconds = parser.parse_args().seconds
    enqueue()
    print(f"running a worker for {seconds:g} s (times in UTC) ...", flush=True)
    Worker(app, WorkerConfig(concurrency=4)).run(duration_s=seconds)
    print(summary(firings.lateness_ms))
    print(f"see them in the dashboard: tickwork dashboard --backend {app.backend_url}")
    app.close()


if __name__ == "__main__":
    main()
