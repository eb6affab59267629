"""``tickwork schedules history`` and ``tickwork history --id`` on a ledger written by a
real worker (SQLite), and the last outcome in ``tickwork schedules``."""

from __future__ import annotations

import json
from datetime import timedelta

from click.testing import CliRunner

from tests.support.helpers import running, wait_for
from tickwork.cli import cli
from tickwork.scheduler import App
from tickwork.triggers import Cron, Repeating


def run(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--backend", url, *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_history_of_a_schedule_and_of_a_message(sqlite_url: str) -> None:
    app = App(sqlite_url)

    @app.task
    def beat() -> None:
        pass

    @app.task(history=True)
    def once() -> None:
        raise ValueError("bad row 7")

    beat.schedule(trigger=Repeating(interval=timedelta(milliseconds=200)), key="beat")
    paris = Cron("0 9 * * *", tz="Europe/Paris")
    beat.schedule(trigger=paris, key="paris")
    app.schedules.trigger_now("paris")
    handle = once.delay()
    with running(app):
        wait_for(
            lambda: (
                len(app.schedules.history("beat")) >= 2 and len(app.schedules.history("paris")) == 1
            )
        )
        wait_for(lambda: len(app.run_history(handle.id)) == 1)
    app.close()

    code, out, _ = run(sqlite_url, "schedules", "history", "beat", "--json")
    assert code == 0
    rows = json.loads(out)
    assert len(rows) >= 2 and rows[0]["outcome"] == "succeeded"
    assert rows[0]["scheduled_at"].endswith("+00:00") and rows[0]["lateness_s"] >= 0
    code, out, _ = run(sqlite_url, "schedules", "history", "beat", "-n", "1", "--json")
    assert len(json.loads(out)) == 1
    code, out, _ = run(sqlite_url, "schedules", "history", "paris")
    assert code == 0 and "succeeded" in out and "manual" in out and "CET" in out
    code, out, _ = run(sqlite_url, "schedules", "history", "nothing")
    assert (code, out.strip()) == (0, "no history recorded")
    code, out, _ = run(sqlite_url, "history", "--id", handle.id, "--json")
    (attempt,) = json.loads(out)
    assert attempt["outcome"] == "poisoned" and attempt["error"] == "ValueError: bad row 7"
    listing = {row["key"]: row for row in json.loads(run(sqlite_url, "schedules", "--json")[1])}
    assert listing["beat"]["last_outcome"] == "succeeded"
    assert listing["paris"]["last_outcome"] == "succeeded"
    assert "last outcome" in run(sqlite_url, "schedules")[1]
