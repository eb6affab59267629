"""``tickwork schedules``: list keyed recurring messages, preview one's next fire times."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import click
from rich.table import Table

from scheduler import InvalidMessage
from tickwork.cli.common import (
    EXIT_NOT_FOUND,
    State,
    backend_option,
    clean_errors,
    console,
    emit_json,
    fail,
    json_option,
    pass_state,
)
from triggers.preview import Occurrence


@click.group(invoke_without_command=True)
@click.option("--queue", default=None)
@json_option
@click.pass_context
@pass_state
@backend_option
@clean_errors
def schedules(state: State, ctx: click.Context, queue: str | None, as_json: bool) -> None:
    """Keyed recurring messages: trigger, next run, last run, misfires (``preview``: the
    next fire times of one)."""
    if ctx.invoked_subcommand is not None:
        return
    rows = state.app().schedules(queue)
    if as_json:
        emit_json(
            [
                {
                    "queue": r.queue,
                    "key": r.key,
                    "task": r.task,
                    "trigger": r.trigger.model_dump(mode="json", exclude_defaults=True),
                    "trigger_text": r.trigger.describe(),
                    "timezone": r.trigger.zone,
                    "next_run": r.next_run.isoformat(),
                    "last_run": r.last_run and r.last_run.isoformat(),
                    "misfires": r.misfires,
                    "state": str(r.state),
                }
                for r in rows
            ]
        )
        return
    table = Table("queue", "key", "task", "trigger", "next run", "last run", "misfires", "state")
    for r in rows:
        zone = ZoneInfo(r.trigger.zone)  # times in the schedule's own timezone
        table.add_row(
            r.queue,
            r.key,
            r.task,
            r.trigger.describe(),
            _local(r.next_run, zone),
            _local(r.last_run, zone) if r.last_run else "-",
            str(r.misfires),
            str(r.state),
        )
    console().print(table)


def _local(moment: datetime, zone: ZoneInfo) -> str:
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z")


@schedules.command("preview")
@click.argument("key")
@click.option("-n", "count", type=click.IntRange(1, 1000), default=10, show_default=True)
@click.option("--queue", default=None, help="Queue of the key [default].")
@json_option
@pass_state
@backend_option
@clean_errors
def preview_schedule(state: State, key: str, count: int, queue: str | None, as_json: bool) -> None:
    """The next fire times of the schedule under KEY, in its timezone, with DST notes."""
    try:
        occurrences = state.app().preview(key, count, queue=queue)
    except InvalidMessage as err:
        fail(str(err), EXIT_NOT_FOUND)
    print_occurrences(occurrences, as_json)


def print_occurrences(occurrences: list[Occurrence], as_json: bool) -> None:
    """Fire times as a table (wall time, UTC, note) or as JSON."""
    if as_json:
        emit_json(
            [
                {
                    "occurrence": o.occurrence,
                    "at": o.at.isoformat(),
                    "wall": o.wall.isoformat(),
                    "note": o.note,
                }
                for o in occurrences
            ]
        )
        return
    table = Table("#", "wall time", "UTC", "note")
    for o in occurrences:
        table.add_row(
            str(o.occurrence),
            o.wall.strftime("%a %Y-%m-%d %H:%M:%S %Z"),
            o.at.strftime("%Y-%m-%d %H:%M:%S"),
            o.note or "",
        )
    console().print(table)
