"""``tickwork calendars ...``: the named calendars schedules share (set, list, show,
history, delete)."""

from __future__ import annotations

from datetime import date, time

import click
from pydantic import ValidationError
from rich.table import Table

from tickwork.cli.common import (
    State,
    app_options,
    clean_errors,
    console,
    emit_json,
    fail,
    json_option,
    not_found,
    pass_state,
)
from tickwork.triggers import Exclusions, Window


@click.group()
def calendars() -> None:
    """Named calendars: dates, holidays and time windows shared by schedules."""


@calendars.command("set")
@click.argument("name")
@click.option("--date", "dates", multiple=True, metavar="YYYY-MM-DD", help="a date to skip")
@click.option(
    "--range", "ranges", multiple=True, metavar="FIRST..LAST", help="dates to skip, inclusive"
)
@click.option("--holidays", metavar="CODE", help="skip the public holidays of FR, US-CA, ...")
@click.option(
    "--window",
    "windows",
    multiple=True,
    metavar='"DAYS HH:MM-HH:MM"',
    help='run only inside it, e.g. "MON-FRI 09:00-17:00" (several: inside any)',
)
@click.option("--note", help="why (kept in the calendar's history)")
@pass_state
@app_options
@clean_errors
def set_calendar(
    state: State,
    name: str,
    dates: tuple[str, ...],
    ranges: tuple[str, ...],
    holidays: str | None,
    windows: tuple[str, ...],
    note: str | None,
) -> None:
    """Store calendar NAME (replacing it: every schedule naming it follows from its next
    occurrence on)."""
    try:
        rules = Exclusions(
            dates=tuple(_day(d) for d in dates),
            ranges=tuple(_range(r) for r in ranges),
            holidays=holidays,
            windows=tuple(_window(w) for w in windows),
        )
    except ValidationError as err:
        fail(f"bad calendar: {err.errors()[0]['msg']}")
    state.app().schedules.calendars.put(name, rules, note=note)
    click.echo(f"{name}: {rules.describe()}")


@calendars.command("list")
@json_option
@pass_state
@app_options
@clean_errors
def list_calendars(state: State, as_json: bool) -> None:
    """Every calendar stored, with what it does."""
    found = state.app(reading=True).schedules.calendars.all()
    if as_json:
        emit_json({name: rules.model_dump(mode="json") for name, rules in found.items()})
        return
    table = Table("calendar", "rules")
    for name, rules in found.items():
        table.add_row(name, rules.describe())
    console().print(table)


@calendars.command("show")
@click.argument("name")
@json_option
@pass_state
@app_options
@clean_errors
def show_calendar(state: State, name: str, as_json: bool) -> None:
    """Calendar NAME and the schedules that use it."""
    service = state.app(reading=True).schedules.calendars
    rules = service.get(name)
    if rules is None:
        not_found(f"no calendar named {name!r}")
    users = service.users(name)
    if as_json:
        emit_json(
            {
                "name": name,
                "rules": rules.model_dump(mode="json"),
                "used_by": [{"queue": q, "key": k} for q, k in users],
            }
        )
        return
    click.echo(f"{name}: {rules.describe()}")
    click.echo("used by: " + (", ".join(f"{k} ({q})" for q, k in users) or "no schedule"))


@calendars.command("history")
@click.argument("name")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@json_option
@pass_state
@app_options
@clean_errors
def calendar_history(state: State, name: str, limit: int, as_json: bool) -> None:
    """Who changed calendar NAME, when and why, newest first."""
    actions = state.app(reading=True).schedules.calendars.history(name, limit)
    if as_json:
        emit_json([a.model_dump(mode="json") for a in actions])
        return
    table = Table("at", "actor", "note", "rules")
    for a in actions:
        table.add_row(a.at.isoformat(timespec="seconds"), a.actor, a.note or "", a.detail or "")
    console().print(table)


@calendars.command("delete")
@click.argument("name")
@click.option("--note", help="why (kept in the calendar's history)")
@pass_state
@app_options
@clean_errors
def delete_calendar(state: State, name: str, note: str | None) -> None:
    """Remove calendar NAME (refused while a schedule names it)."""
    state.app(reading=True).schedules.calendars.delete(name, note=note)
    click.echo(f"{name}: deleted")


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        fail(f"{text!r} is not a date (YYYY-MM-DD)")


def _range(text: str) -> tuple[date, date]:
    first, sep, last = text.partition("..")
    if not sep:
        fail(f"{text!r} is not a range (FIRST..LAST)")
    return _day(first), _day(last)


def _window(text: str) -> Window:
    days, _, hours = text.strip().rpartition(" ")
    start, sep, end = hours.partition("-")
    if not sep:
        fail(f'{text!r} is not a window ("MON-FRI 09:00-17:00")')
    try:
        opens, closes = time.fromisoformat(start), time.fromisoformat(end.replace("24:00", "00:00"))
        return Window(opens, closes, days or "MON-SUN")
    except ValueError as err:
        fail(f"bad window {text!r}: {err}")
