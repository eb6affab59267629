"""Pausing a queue: workers stop claiming from it, enqueueing goes on, and due messages wait.

python -m examples.pause_resume
tickwork worker -A examples.pause_resume --duration 3   # runs nothing: "exports" is paused
tickwork queues list                                    # exports: paused, ready 3
tickwork queues resume exports
tickwork worker -A examples.pause_resume --duration 3   # now the three exports run

Every worker reads the paused queues once per poll interval (``poll_interval_s`` of
``WorkerConfig``, 1 s by default), so a pause takes effect within about a second
everywhere; running handlers finish. The pause is stored in the backend: it survives
worker restarts.
"""

from __future__ import annotations

from tickwork import App

app = App()


@app.task(queue="exports")
def export(report: str) -> None:
    print(f"  -> exported {report}", flush=True)


def main() -> None:
    app.queues.pause("exports")  # say, while the warehouse is in maintenance
    for report in ("sales", "stock", "returns"):
        export.delay(report)
    print("paused:", app.queues.paused())
    app.close()


if __name__ == "__main__":
    main()
