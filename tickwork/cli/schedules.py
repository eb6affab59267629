"""``tickwork schedules``: list keyed recurring messages, preview one's next fire times,
steer one (pause, resume, trigger, backfill); ``history`` is in ``history.py``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import click
from rich.table import Table

from tickwork.cli.common import (
    State,
    app_options,
    clean_errors,
    console,
    emit_json,
    json_option,
    pass_state,
)
from tickwork.scheduler.views.schedules import ScheduleView
from tickwork.triggers import Misfire
from tickwork.triggers.preview import Occurrence


@click.group(invoke_without_command=True)
@click.option("--queue", default=None)
@json_option
@click.pass_context
@pass_state
@app_options
@clean_errors
def schedules(state: State, ctx: click.Context, queue: str | None, as_json: bool) -> None:
    """Keyed recurring messages: trigger, next run, last run, last outcome, misfires,
    state; ``history`` of one, ``preview`` its next fire times, ``pause``/``resume`` it,
    ``trigger`` one run now, ``backfill`` a past range."""
    if ctx.invoked_subcommand is not None:
        return
    rows = state.app(reading=True).schedules.list(queue)
    if as_json:
        emit_json([ScheduleView.of(r).model_dump(mode="json") for r in rows])
        return
    table = Table(
        "queue",
        "key",
        "task",
        "trigger",
        "next run",
        "last run",
        "last success",
        "last outcome",
        "misfires",
        "state",
    )
    for r in rows:
        zone = ZoneInfo(r.trigger.zone)  # times in the schedule's own timezone
        table.add_row(
            r.queue,
            r.key,
            r.task,
            r.trigger.describe(),
            local_time(r.next_run, zone),
            local_time(r.last_run, zone) if r.last_run else "-",
            local_time(r.last_success, zone) if r.last_success else "-",
            r.last_outcome or "-",
            str(r.misfires),
            "paused" if r.paused_at else str(r.state),
        )
    console().print(table)


def local_time(moment: datetime, zone: ZoneInfo) -> str:
    """``moment`` as a wall time in ``zone``, with the zone's abbreviation."""
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z")


@schedules.command("preview")
@click.argument("key")
@click.option("-n", "count", type=click.IntRange(1, 1000), default=10, show_default=True)
@click.option("--queue", default=None, help="Queue of the key [default].")
@json_option
@pass_state
@app_options
@clean_errors
def preview_schedule(state: State, key: str, count: int, queue: str | None, as_json: bool) -> None:
    """The next fire times of the schedule under KEY, in its timezone, with DST notes,
    under what its trigger is and how its runs overlap."""
    app = state.app(reading=True)
    occurrences = app.preview(key, count, queue=queue)
    found = app.get(key=key, queue=queue)
    if not as_json and found is not None and found.message.trigger is not None:
        trigger = found.message.trigger
        click.echo(f"{trigger.describe()}; overlap: {trigger.overlap.meaning}")
    print_occurrences(occurrences, as_json)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """``90``, ``90s``, ``5m``, ``2h``, ``1d`` (a number, then an optional unit)."""
    value, unit = (text[:-1], text[-1]) if text[-1:].lower() in _UNITS else (text, "s")
    try:
        seconds = float(value) * _UNITS[unit.lower()]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a duration (90, 90s, 5m, 2h, 1d)") from None
    if seconds < 0:
        raise click.BadParameter("a duration must not be negative")
    return timedelta(seconds=seconds)


@schedules.command("check")
@click.option("--max-late", required=True, metavar="DURATION", help="Margin: 90s, 5m, 2h, 1d.")
@click.option("--queue", default=None, help="Only this queue [all].")
@json_option
@pass_state
@app_options
@clean_errors
def check_schedules(state: State, max_late: str, queue: str | None, as_json: bool) -> None:
    """A dead man's check: exit 1 naming every schedule with no successful run within
    its period plus --max-late (paused ones are not checked); exit 0 when all are on time."""
    margin = parse_duration(max_late)
    app = state.app(reading=True)
    late = app.schedules.overdue(margin, queue)
    if as_json:
        emit_json(
            [
                {
                    "queue": o.schedule.queue,
                    "key": o.schedule.key,
                    "last_success": o.schedule.last_success and o.schedule.last_success.isoformat(),
                    "expected_by": o.expected_by.isoformat(),
                    "last_outcome": o.schedule.last_outcome,
                }
                for o in late
            ]
        )
    else:
        for o in late:
            since = o.schedule.last_success.isoformat() if o.schedule.last_success else "never"
            waiting = (
                f"; waiting for a worker that knows its task {o.schedule.task!r} (its last "
                "run was given back by workers that do not: a rolling deploy?)"
                if o.schedule.last_outcome == "deferred"
                else ""
            )
            click.echo(
                f"overdue: {o.schedule.key} (queue {o.schedule.queue}): last success {since}, "
                f"a success was expected by {o.expected_by.isoformat()}{waiting}"
            )
        if not late:
            click.echo(f"all {len(app.schedules.list(queue))} schedules on time")
    if late:
        raise SystemExit(1)


#: why, in the schedule's action log (the actor is this command's user@host)
note_option = click.option("--note", default=None, help="Why, kept in its action log.")


@schedules.command("pause")
@click.argument("key")
@click.option("--queue", default=None, help="Queue of the key [default].")
@note_option
@pass_state
@app_options
@clean_errors
def pause_schedule(state: State, key: str, queue: str | None, note: str | None) -> None:
    """Pause the schedule under KEY on every worker until it is resumed."""
    paused = state.app(reading=True).schedules.pause(key, queue=queue, note=note)
    click.echo("paused" if paused else "already paused")


@schedules.command("resume")
@click.argument("key")
@click.option("--queue", default=None, help="Queue of the key [default].")
@click.option(
    "--misfire",
    type=click.Choice([m.value for m in Misfire]),
    default=Misfire.SKIP.value,
    show_default=True,
    help="What fell in the pause: skip it, run it once now, or run each (catch_up).",
)
@click.option("--limit", type=click.IntRange(min=0), help="catch_up: at most N runs.")
@click.option(
    "--spacing",
    type=click.FloatRange(min=0),
    default=0.0,
    metavar="SECONDS",
    help="catch_up: seconds between the runs.",
)
@note_option
@pass_state
@app_options
@clean_errors
def resume_schedule(
    state: State,
    key: str,
    queue: str | None,
    misfire: str,
    limit: int | None,
    spacing: float,
    note: str | None,
) -> None:
    """Resume the paused schedule under KEY."""
    resumed = state.app(reading=True).schedules.resume(
        key,
        queue=queue,
        misfire=misfire,
        limit=limit,
        spacing=timedelta(seconds=spacing),
        note=note,
    )
    if resumed is None:
        click.echo("not paused")
        return
    next_run = resumed.next_run.isoformat() if resumed.next_run else "none: the schedule ended"
    click.echo(
        f"resumed: next run {next_run}; skipped {resumed.skipped}, caught up {resumed.caught_up}"
    )


@schedules.command("trigger")
@click.argument("key")
@click.option("--queue", default=None, help="Queue of the key [default].")
@note_option
@pass_state
@app_options
@clean_errors
def trigger_schedule(state: State, key: str, queue: str | None, note: str | None) -> None:
    """Run the task of the schedule under KEY once now (the schedule does not move);
    prints the run's message id."""
    click.echo(state.app(reading=True).schedules.trigger_now(key, queue=queue, note=note))


def _instant(_ctx: click.Context, param: click.Parameter, value: str) -> datetime:
    """An ISO 8601 time; without an offset it is UTC."""
    try:
        at = datetime.fromisoformat(value)
    except ValueError as err:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 time: {err}") from err
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


@schedules.command("backfill")
@click.argument("key")
@click.option("--start", required=True, callback=_instant, help="ISO 8601 time (UTC if bare).")
@click.option("--end", required=True, callback=_instant, help="ISO 8601 time; at most now.")
@click.option("--queue", default=None, help="Queue of the key [default].")
@click.option("--limit", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Refuse a range with more occurrences than this.")  # fmt: skip
@click.option("--spacing", type=click.FloatRange(min=0), default=0.0, metavar="SECONDS",
              help="Seconds between the runs.")  # fmt: skip
@note_option
@json_option
@pass_state
@app_options
@clean_errors
def backfill_schedule(
    state: State,
    key: str,
    start: datetime,
    end: datetime,
    queue: str | None,
    limit: int,
    spacing: float,
    note: str | None,
    as_json: bool,
) -> None:
    """Run each occurrence of the schedule under KEY from START to END once (asked again,
    it enqueues none twice)."""
    done = state.app(reading=True).schedules.backfill(
        key, start, end, queue=queue, limit=limit, spacing=timedelta(seconds=spacing), note=note
    )
    if as_json:
        emit_json(
            {
                "occurrences": [at.isoformat() for at in done.occurrences],
                "enqueued": done.enqueued,
                "already": done.already,
            }
        )
        return
    click.echo(
        f"{len(done.occurrences)} occurrence(s) in the range: enqueued {done.enqueued}, "
        f"{done.already} backfilled before"
    )


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
