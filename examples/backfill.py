"""Backfilling a schedule: run each occurrence of a past range once, for a schedule added
late or a stretch its task got wrong (Temporal Schedules' backfill).

python -m examples.backfill      # installs "hourly-report" (cron, every hour), backfills
                                 # the last six hours, runs them, then asks again: nothing
                                 # is enqueued twice
tickwork schedules backfill hourly-report --start 2026-11-20T00:00 --end 2026-11-21T00:00

Each backfilled run is a one-off message scheduled at its occurrence's time (the handler
sees it as ``current_run().key``, ``hourly-report/backfill/<epoch ms>``), headed
``tickwork-origin: backfill``. It keeps that key for ``remember`` (30 days) after it
succeeds, so the same backfill asked again enqueues none of them twice; one that failed for
good frees its key and is enqueued again. More than ``limit`` (1,000) occurrences in the
range is one error, and nothing is enqueued.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tickwork import App, Cron, Worker, WorkerConfig, current_run

app = App()


@app.task
def hourly_report(region: str) -> None:
    print(f"  -> report for {region}, run {current_run().key}", flush=True)


def main() -> None:
    hourly_report.schedule(
        args=("emea",), trigger=Cron("0 * * * *"), key="hourly-report", on_conflict="replace"
    )
    now = datetime.now(UTC)
    start = now - timedelta(hours=6)
    done = app.schedules.backfill("hourly-report", start, now, spacing=timedelta(milliseconds=100))
    print(f"backfill: {len(done.occurrences)} occurrences, enqueued {done.enqueued}")
    Worker(app, WorkerConfig(burst=True, poll_interval_s=0.05)).run(duration_s=30)
    again = app.schedules.backfill("hourly-report", start, now)
    print(f"asked again: enqueued {again.enqueued}, {again.already} backfilled before")
    app.close()


if __name__ == "__main__":
    main()
