"""Named calendars on every backend: stored once and shared by the schedules that name
them; a change reaches the schedules' next occurrences (in a worker too); each change is
in the calendar's action log; an unknown calendar is refused at enqueue with nothing
stored; a calendar in use cannot be deleted."""

from __future__ import annotations

import json
import threading
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from tests.support.helpers import running, wait_for
from tickwork.cli import cli
from tickwork.dashboard import create_dashboard
from tickwork.errors import CalendarNotFound
from tickwork.scheduler import App, InvalidMessage
from tickwork.scheduler.schedules import calendars as shared
from tickwork.triggers import Cron, Exclusions, Repeating, Window

PARIS = ZoneInfo("Europe/Paris")


def _walls(app: App, key: str, count: int = 6) -> list[datetime]:
    """The wall times of ``key``'s next runs (not those listed as "not run")."""
    runs = [o for o in app.preview(key, count) if not (o.note or "").startswith("not run")]
    return [o.at.astimezone(PARIS) for o in runs]


def test_schedules_share_a_calendar_and_follow_its_changes(app: App) -> None:
    @app.task
    def report() -> None: ...

    @app.task
    def backup() -> None: ...

    hours = Window(start=time(9), end=time(12), days="MON-FRI")
    app.schedules.calendars.put(
        "ops", Exclusions(windows=(hours,)), note="office hours", actor="ann"
    )
    for task, key in ((report, "report"), (backup, "backup")):
        task.schedule(trigger=Cron("0 * * * *", tz="Europe/Paris", calendar="ops"), key=key)
    for key in ("report", "backup"):
        walls = _walls(app, key)
        assert {w.hour for w in walls} <= {9, 10, 11} and all(w.weekday() < 5 for w in walls)
    assert app.schedules.calendars.users("ops") == [("default", "backup"), ("default", "report")]
    # updated once: both schedules follow (from their next occurrence on)
    first_day = _walls(app, "report")[0].date()
    app.schedules.calendars.put(
        "ops", Exclusions(windows=(hours,), dates=(first_day,)), note="a strike", actor="bob"
    )
    assert all(w.date() != first_day for w in _walls(app, "report"))
    assert all(w.date() != first_day for w in _walls(app, "backup"))
    newest, oldest = app.schedules.calendars.history("ops")
    assert (newest.action, newest.actor, newest.note) == ("calendar", "bob", "a strike")
    assert oldest.actor == "ann" and "within 09:00-12:00" in (oldest.detail or "")
    assert list(app.schedules.calendars.all()) == ["ops"]
    page = TestClient(create_dashboard(App(app.backend))).get("/calendars").text
    assert 'data-calendar="ops"' in page and "within 09:00-12:00" in page
    assert ">backup</a>" in page and ">report</a>" in page and "bob: a strike" in page
    with pytest.raises(InvalidMessage, match="used by 2 schedule"):
        app.schedules.calendars.delete("ops")
    app.cancel(key="report")
    app.cancel(key="backup")
    assert app.schedules.calendars.delete("ops", note="not needed")
    assert app.schedules.calendars.get("ops") is None
    with pytest.raises(CalendarNotFound, match="no calendar is named 'ops'"):
        app.schedules.calendars.delete("ops")  # steering what does not exist is an error


def test_an_unknown_calendar_is_refused_with_nothing_stored(app: App) -> None:
    @app.task
    def report() -> None: ...

    with pytest.raises(InvalidMessage, match="no calendar named 'nope'"):
        report.schedule(trigger=Cron("0 9 * * *", calendar="nope"), key="report")
    assert app.get(key="report") is None
    with pytest.raises(InvalidMessage, match="name"):
        app.schedules.calendars.put("", Exclusions())


def test_a_worker_plans_with_the_calendar_as_it_changes(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared, "REFRESH_S", 0.2)  # the worker reads changes quickly
    runs: list[int] = []
    lock = threading.Lock()

    @app.task
    def tick() -> None:
        with lock:
            runs.append(1)

    @app.task
    def sentinel() -> None:
        with lock:
            ended.append(1)

    ended: list[int] = []
    app.schedules.calendars.put("maintenance", Exclusions())
    every = Repeating(interval=timedelta(milliseconds=200), calendar="maintenance")
    tick.schedule(trigger=every, key="tick")
    today = datetime.now(UTC).date()
    with running(app):
        wait_for(lambda: len(runs) >= 3, timeout_s=20)
        # today and tomorrow (UTC, the trigger's zone) become a maintenance window
        days = (today, today + timedelta(days=1))
        app.schedules.calendars.put("maintenance", Exclusions(dates=days), note="upgrade")
        wait_for(lambda: _next_day(app, "tick") > days[-1], timeout_s=20)
        settled = len(runs)  # the run whose ack moved the schedule has ended
        # no run in the window: a sentinel due after three more occurrences would have
        # been runs once they would have run (the queue is claimed in due order)
        sentinel.schedule(delay=timedelta(milliseconds=600))
        wait_for(lambda: ended == [1], timeout_s=20)
        assert len(runs) == settled
    assert _next_day(app, "tick") == today + timedelta(days=2)


def _next_day(app: App, key: str) -> date:
    found = app.get(key=key)
    assert found is not None
    return found.message.scheduled_at.astimezone(UTC).date()


def test_calendars_from_the_command_line(sqlite_url: str) -> None:
    runner = CliRunner()

    def invoke(*args: str) -> tuple[int, str]:
        result = runner.invoke(cli, ["--backend", sqlite_url, *args])
        return result.exit_code, result.output

    code, out = invoke(
        "calendars", "set", "ops", "--window", "MON-FRI 09:00-17:00", "--date", "2030-12-24",
        "--range", "2030-08-01..2030-08-15", "--note", "office",
    )  # fmt: skip
    assert code == 0 and "within 09:00-17:00 MON,TUE,WED,THU,FRI" in out, out
    code, out = invoke("calendars", "set", "bad", "--window", "09:00")
    assert code != 0 and "is not a window" in out
    code, out = invoke("calendars", "set", "bad", "--range", "2030-08-15..2030-08-01")
    assert code != 0 and "ends before it starts" in out
    code, out = invoke(
        "enqueue", "tests.support.crash_tasks.record", "-A", "tests.support.crash_tasks",
        "--args", "[1]", "--cron", "0 * * * *", "--calendar", "ops", "--key", "hourly",
    )  # fmt: skip
    assert code == 0, out
    code, out = invoke("--json", "calendars", "show", "ops")
    shown = json.loads(out)
    assert shown["used_by"] == [{"queue": "default", "key": "hourly"}]
    assert shown["rules"]["dates"] == ["2030-12-24"]
    code, out = invoke("calendars", "delete", "ops")
    assert code != 0 and "used by 1 schedule" in out
    code, out = invoke("calendars", "delete", "no-such")
    assert code == 1 and "no calendar is named 'no-such' in " in out
    code, out = invoke("calendars", "history", "ops", "--json")
    (changed,) = json.loads(out)
    assert changed["note"] == "office" and changed["action"] == "calendar"
    code, out = invoke("calendars", "list")
    assert code == 0 and "ops" in out
    code, out = invoke("enqueue", "x", "--every", "5", "--calendar", "nope")
    assert code != 0
