"""Tasks for the snooze tests, importable by pool processes (``TICKWORK_BACKEND`` names
the test's backend): a task that snoozes until it has run a given number of times,
counting its runs in a marker file."""

from __future__ import annotations

from pathlib import Path

from tickwork.scheduler import App, Snooze, current_run

app = App()


@app.task(retries=0)
def not_ready(marker: str, runs_before_ready: int) -> str | Snooze:
    path = Path(marker)
    with path.open("a") as runs:
        runs.write(f"{current_run().attempt}\n")
    if len(path.read_text().splitlines()) < runs_before_ready:
        return Snooze(0.2)
    return "ready"
