"""``tickwork schedules history KEY`` and ``tickwork history --id ID``: the occurrence
ledger of a schedule (or the attempts of a one-off message that keeps history), newest
first, times in the schedule's own timezone (UTC in ``--json``)."""

from __future__ import annotations

from datetime import timedelta
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
from tickwork.cli.schedules import local_time, schedules
from tickwork.scheduler.errors import DecodeError
from tickwork.scheduler.schedules.actions import Action
from tickwork.scheduler.schedules.ledger import HistoryEntry


@schedules.command("history")
@click.argument("key")
@click.option("--queue", default=None, help="Queue of the key [default].")
@click.option("-n", "limit", type=click.IntRange(1, 10_000), default=None,
              help="At most N records [all kept: the setting history_keep].")  # fmt: skip
@click.option(
    "--actions",
    is_flag=True,
    help="Who steered it instead: pauses, resumes, runs now, backfills, cancels.",
)
@json_option
@pass_state
@app_options
@clean_errors
def schedule_history(
    state: State, key: str, queue: str | None, limit: int | None, actions: bool, as_json: bool
) -> None:
    """What happened to each occurrence of the schedule under KEY, newest first: runs
    (succeeded, retried, poisoned, aborted) with their times, lateness, attempts, worker
    and error, and occurrences that did not run (missed, coalesced, skipped by overlap or
    in a pause, excluded, cancelled). With --actions: who paused, resumed, ran, backfilled
    or cancelled it, when, and why."""
    app = state.app(reading=True)
    zone = _zone_of(state, key, queue)
    if actions:
        print_actions(app.schedules.actions(key, queue=queue, limit=limit), as_json, zone)
        return
    entries = app.schedules.history(key, queue=queue, limit=limit)
    print_history(entries, as_json, zone)


def print_actions(actions: list[Action], as_json: bool, zone: ZoneInfo) -> None:
    """Steering actions as a table (times in ``zone``) or as JSON (UTC)."""
    if as_json:
        emit_json([action.model_dump(mode="json", exclude_none=True) for action in actions])
        return
    if not actions:
        click.echo("no action recorded")
        return
    table = Table("when", "action", "actor", "note", "detail")
    for action in actions:
        when = local_time(action.at, zone)
        table.add_row(when, action.action, action.actor, action.note or "", action.detail or "")
    console().print(table)


@click.command("history")
@click.option("--id", "message_id", required=True, help="The message's id.")
@click.option("--queue", default=None, help="Its queue [default].")
@json_option
@pass_state
@app_options
@clean_errors
def message_history(state: State, message_id: str, queue: str | None, as_json: bool) -> None:
    """The attempts of a one-off message whose task keeps history (history=True)."""
    print_history(
        state.app(reading=True).run_history(message_id, queue=queue), as_json, ZoneInfo("UTC")
    )


def _zone_of(state: State, key: str, queue: str | None) -> ZoneInfo:
    """The schedule's timezone (UTC once it is cancelled, or if it cannot be read)."""
    try:
        found = state.app(reading=True).get(key=key, queue=queue)
    except DecodeError:
        found = None
    trigger = found.message.trigger if found is not None else None
    return ZoneInfo(trigger.zone if trigger is not None else "UTC")


def print_history(entries: list[HistoryEntry], as_json: bool, zone: ZoneInfo) -> None:
    """Records as a table (times in ``zone``) or as JSON (UTC)."""
    if as_json:
        emit_json([entry.as_json() for entry in entries])
        return
    if not entries:
        click.echo("no history recorded")
        return
    table = Table("scheduled", "outcome", "origin", "started", "late", "took", "try", "worker",
                  "error / note")  # fmt: skip
    for e in entries:
        outcome = e.outcome.value if e.count == 1 else f"{e.outcome.value} x{e.count}"
        scheduled = local_time(e.scheduled_at, zone)
        if e.last_at is not None:
            scheduled += f" … {local_time(e.last_at, zone)}"
        table.add_row(
            scheduled,
            outcome,
            e.origin,
            local_time(e.started_at, zone) if e.started_at else "-",
            _seconds(e.lateness),
            _seconds(e.duration),
            str(e.attempts) if e.attempts else "-",
            e.worker or "-",
            e.error or e.note or "",
        )
    console().print(table)


def _seconds(value: timedelta | None) -> str:
    return "-" if value is None else f"{value.total_seconds():.3f}s"
