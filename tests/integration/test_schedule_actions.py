"""The action log, on every backend: each steering action on a schedule (pause, resume,
run now, backfill, replace, cancel) is recorded with its time, actor and note, newest first,
readable after the schedule is gone; the command line records its user and host and
shows the log; the dashboard records itself (or its host's signed-in user); with the
ledger off nothing is recorded and nothing fails."""

from __future__ import annotations

import itertools
import json
import re
from datetime import timedelta

from click.testing import CliRunner
from starlette.testclient import TestClient

from tickwork.cli import cli
from tickwork.dashboard import create_dashboard
from tickwork.scheduler import App, Settings
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.schedules.actions import NOTE_MOST, default_actor
from tickwork.triggers import Cron, Repeating


def test_every_steering_action_is_recorded_with_its_actor_and_note(app: App) -> None:
    @app.task
    def report() -> None: ...

    report.schedule(trigger=Cron("0 * * * *"), key="report")
    assert app.schedules.pause("report", note="  the CRM is\n down ", actor="ada")
    assert not app.schedules.pause("report", actor="ada"), "paused already: nothing done"
    assert app.schedules.resume("report", actor="bob") is not None
    run = app.schedules.trigger_now("report", note="rerun for finance")
    now = to_datetime(app.backend.now_ms())
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    filled = app.schedules.backfill("report", start, now, actor="ops-bot")
    report.schedule(trigger=Cron("30 * * * *"), key="report", on_conflict="replace")
    assert app.cancel(key="report", note="replaced by the v2 report", actor="ada")
    actions = app.schedules.actions("report")
    verbs = ["cancel", "replace", "backfill", "run_now", "resume", "pause"]
    assert [a.action for a in actions] == verbs
    actors = ["ada", default_actor(), "ops-bot", default_actor(), "bob", "ada"]
    assert [a.actor for a in actions] == actors
    cancel, replace, backfill, run_now, resume, pause = actions
    assert replace.detail == "cron 30 * * * * UTC"
    assert pause.note == "the CRM is down" and cancel.note == "replaced by the v2 report"
    assert run_now.detail == f"run {run}" and run_now.note == "rerun for finance"
    assert f"{filled.enqueued} enqueued" in (backfill.detail or "")
    assert resume.detail == "misfire skip"
    assert all(earlier.at >= later.at for earlier, later in itertools.pairwise(actions))
    assert app.get(key="report") is None and len(app.schedules.actions("report", limit=2)) == 2


def test_a_long_note_is_kept_as_one_bounded_line(sqlite_app: App) -> None:
    app = sqlite_app

    @app.task
    def tick() -> None: ...

    tick.schedule(trigger=Repeating(interval=timedelta(hours=1)), key="tick")
    app.schedules.pause("tick", note="why\n" * 1000)
    (pause,) = app.schedules.actions("tick")
    assert pause.note is not None and len(pause.note) == NOTE_MOST and "\n" not in pause.note


def test_the_command_line_records_its_user_and_shows_the_log(sqlite_app: App) -> None:
    app = sqlite_app
    url = app.settings.backend

    @app.task
    def tick() -> None: ...

    tick.schedule(trigger=Repeating(interval=timedelta(hours=1)), key="tick")
    runner = CliRunner()
    paused = runner.invoke(
        cli, ["--backend", url, "schedules", "pause", "tick", "--note", "deploy"]
    )
    assert paused.exit_code == 0, paused.output
    cancelled = runner.invoke(cli, ["--backend", url, "cancel", "--key", "tick", "--note", "done"])
    assert cancelled.exit_code == 0, cancelled.output
    shown = runner.invoke(
        cli, ["--backend", url, "--json", "schedules", "history", "tick", "--actions"]
    )
    assert shown.exit_code == 0, shown.output
    log = json.loads(shown.output)
    assert [(a["action"], a["actor"], a["note"]) for a in log] == [
        ("cancel", default_actor(), "done"),
        ("pause", default_actor(), "deploy"),
    ]
    table = runner.invoke(cli, ["--backend", url, "schedules", "history", "tick", "--actions"])
    assert table.exit_code == 0 and "deploy" in table.output and "pause" in table.output


def test_the_dashboard_records_itself_as_the_actor(sqlite_app: App) -> None:
    app = sqlite_app

    @app.task
    def tick() -> None: ...

    tick.schedule(trigger=Repeating(interval=timedelta(hours=1)), key="tick")
    client = TestClient(create_dashboard(app))
    page = client.get("/schedules")
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None
    done = client.post(
        "/schedules/default/tick/pause", data={"csrf": found.group(1), "next": "/schedules"}
    )
    assert done.status_code == 200 and "paused tick" in done.text
    (pause,) = app.schedules.actions("tick")
    assert (pause.action, pause.actor) == ("pause", "dashboard")
    shown = client.get("/history", params={"key": "tick"})
    assert 'id="actions"' in shown.text and "<td>dashboard</td>" in shown.text


def test_with_the_ledger_off_nothing_is_recorded(sqlite_app: App) -> None:
    off = App(settings=Settings.load(backend=sqlite_app.settings.backend, history_keep=0))

    @off.task
    def tick() -> None: ...

    tick.schedule(trigger=Repeating(interval=timedelta(hours=1)), key="quiet")
    assert off.schedules.pause("quiet", note="nobody will read this")
    assert off.schedules.actions("quiet") == []
    off.close()
