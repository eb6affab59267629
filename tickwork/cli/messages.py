"""``tickwork enqueue``, ``show``, ``cancel`` and ``abort``: one message at a time."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import click

from tickwork.cli.common import (
    State,
    app_options,
    clean_errors,
    emit_json,
    fail,
    json_option,
    not_found,
    one_of,
    parse_json,
    pass_state,
)
from tickwork.cli.cron import dst_gap_option, dst_repeat_option
from tickwork.scheduler import (
    AbortResult,
    Call,
    OnConflict,
)
from tickwork.triggers import Cron, Repeating, Trigger


@click.command()
@click.argument("task")
@click.option("--args", "args_json", metavar="JSON", help="Positional arguments, a JSON array.")
@click.option("--kwargs", "kwargs_json", metavar="JSON", help="Keyword arguments, a JSON object.")
@click.option("--key", help="Key to read, replace or cancel the message by.")
@click.option("--queue", help="Queue [the task's].")
@click.option("--priority", type=int, help="Higher runs first among due messages.")
@click.option("--at", "at", metavar="ISO8601", help="Run once at this aware time.")
@click.option(
    "--delay", type=click.FloatRange(min=0), metavar="SECONDS", help="Run once after S seconds."
)
@click.option(
    "--every", type=click.FloatRange(min=0.001), metavar="SECONDS", help="Repeat every S seconds."
)
@click.option("--times", type=click.IntRange(min=1), help="With --every: total number of runs.")
@click.option(
    "--cron",
    metavar="EXPR",
    help="Cron expression (5 fields, 6 or 7 with seconds first, or @hourly, @daily, ...).",
)
@click.option("--tz", default="UTC", show_default=True, help="With --cron: IANA timezone.")
@dst_gap_option
@dst_repeat_option
@click.option(
    "--calendar",
    metavar="NAME",
    help="With --every or --cron: a named calendar it follows (tickwork calendars set).",
)
@click.option(
    "--on-conflict",
    type=click.Choice([m.value for m in OnConflict]),
    default="error",
    show_default=True,
)
@click.option(
    "--block-timeout",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="While a bounded queue is full, wait this long for room [enqueue_block_s: 60].",
)
@click.option("--no-block", is_flag=True, help="Fail at once if the queue is full.")
@pass_state
@app_options
@clean_errors
def enqueue(
    state: State,
    task: str,
    args_json: str | None,
    kwargs_json: str | None,
    key: str | None,
    queue: str | None,
    priority: int | None,
    at: str | None,
    delay: float | None,
    every: float | None,
    times: int | None,
    cron: str | None,
    tz: str,
    dst_gap: str | None,
    dst_repeat: str | None,
    calendar: str | None,
    on_conflict: str,
    block_timeout: float | None,
    no_block: bool,
) -> None:
    """Enqueue TASK; prints the message id."""
    chosen = [
        name
        for name, v in (("--at", at), ("--delay", delay), ("--every", every), ("--cron", cron))
        if v is not None
    ]
    if len(chosen) > 1:
        fail(f"give at most one of --at, --delay, --every, --cron (got {', '.join(chosen)})")
    if times is not None and every is None:
        fail("--times needs --every")
    if (dst_gap is not None or dst_repeat is not None) and cron is None:
        fail("--dst-gap and --dst-repeat need --cron")
    if calendar is not None and every is None and cron is None:
        fail("--calendar needs --every or --cron")
    if state.module is None:
        fail("enqueue needs the app that defines TASK: -A/--app MODULE (or $TICKWORK_APP)")
    app = state.app()
    when: datetime | None = None
    if at is not None:
        try:
            when = datetime.fromisoformat(at)
        except ValueError:
            fail(f"--at {at!r} is not an ISO 8601 time")
        if when.tzinfo is None:
            fail(f"--at {at!r} has no timezone; add one, e.g. {at}+00:00 or {at}Z")
    trigger: Trigger | None = None
    if every is not None:
        trigger = Repeating(
            interval=timedelta(seconds=every), repeat_count=times, calendar=calendar
        )
    elif cron is not None:
        trigger = Cron(cron, tz=tz, dst_gap=dst_gap, dst_repeat=dst_repeat, calendar=calendar)
    call = Call(
        task,
        parse_json(args_json, list, "--args"),
        parse_json(kwargs_json, dict, "--kwargs"),
        key=key,
        at=when,
        delay_by=None if delay is None else timedelta(seconds=delay),
        trigger=trigger,
        queue=queue,
        priority=priority,
    )
    message_id = app.enqueue(
        call, on_conflict=on_conflict, block=not no_block, block_timeout=block_timeout
    )
    click.echo(message_id)
    app.close()


@click.command()
@click.option("--key")
@click.option("--id", "message_id")
@click.option("--queue", default=None, help="Queue of the key [default].")
@click.option("--note", default=None, help="Why (kept in a schedule's action log).")
@pass_state
@app_options
@clean_errors
def cancel(
    state: State, key: str | None, message_id: str | None, queue: str | None, note: str | None
) -> None:
    """Cancel a message by key or id (a running one finishes but does not reschedule)."""
    one_of(key, message_id)
    app = state.app(reading=True)
    if not app.cancel(id=message_id, key=key, queue=queue, note=note):
        not_found(
            f"nothing to cancel for {'key ' + repr(key) if key else 'id ' + repr(message_id)}"
        )
    click.echo("cancelled")


@click.command()
@click.option("--key")
@click.option("--id", "message_id")
@click.option("--queue", default=None, help="Queue of the key [default].")
@click.option(
    "--end-chain",
    is_flag=True,
    help="A recurring chain ends with the aborted run [default: its next occurrence runs].",
)
@pass_state
@app_options
@clean_errors
def abort(
    state: State, key: str | None, message_id: str | None, queue: str | None, end_chain: bool
) -> None:
    """Abort a message by key or id: a running handler is asked to stop (no retry; the run
    goes to the poison store as aborted); a pending message is cancelled."""
    one_of(key, message_id)
    result = state.app(reading=True).abort(
        id=message_id, key=key, queue=queue, continue_chain=not end_chain
    )
    if result is AbortResult.NOT_FOUND:
        not_found(f"nothing to abort for {'key ' + repr(key) if key else 'id ' + repr(message_id)}")
    click.echo(
        "abort requested: the worker running it stops it"
        if result is AbortResult.REQUESTED
        else "cancelled: it was not running"
    )


@click.command()
@click.option("--key")
@click.option("--id", "message_id")
@click.option("--queue", default=None, help="Queue of the key [default].")
@json_option
@pass_state
@app_options
@clean_errors
def show(
    state: State, key: str | None, message_id: str | None, queue: str | None, as_json: bool
) -> None:
    """Show a scheduled or running message by key or id; by id, also what its run
    returned or why it failed, and its progress, when its task keeps results."""
    one_of(key, message_id)
    app = state.app(reading=True)
    found = app.get(id=message_id, key=key, queue=queue)
    run = app.result(message_id) if message_id is not None else None
    if run is not None and run.updated_at is None:  # no record kept: nothing to add
        run = None
    if found is None and run is None:
        not_found(f"no message with {'key ' + repr(key) if key else 'id ' + repr(message_id)}")
    data = found.as_dict() if found is not None else {"id": message_id}
    if run is not None:
        data["status"] = str(run.status)
        kept = run.model_dump(mode="json", exclude={"id", "status"}, exclude_none=True)
        data.update({f"result_{name}": value for name, value in kept.items()})
    if as_json:
        emit_json(data)
        return
    for name, value in data.items():
        click.echo(f"{name:>13}: {json.dumps(value) if isinstance(value, list | dict) else value}")
