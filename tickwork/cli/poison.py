"""``tickwork poison ...``: the poison queue."""

from __future__ import annotations

from typing import Any

import click
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
from tickwork.scheduler.views import poison as poisoned


@click.group()
def poison() -> None:
    """Inspect, replay or purge messages that failed for good."""


@poison.command("list")
@click.option("--queue", default=None)
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@json_option
@pass_state
@app_options
@clean_errors
def poison_list(state: State, queue: str | None, limit: int, as_json: bool) -> None:
    """List poisoned messages, oldest first."""
    records = state.app(reading=True).poison.list(queue, limit)
    if as_json:
        emit_json([record.model_dump(mode="json") for record in records])
        return
    table = Table("id", "queue", "key", "attempts", "failed at", "error")
    for r in records:
        table.add_row(
            r.id,
            r.queue,
            r.key or "-",
            str(r.attempts),
            r.failed_at.isoformat(timespec="milliseconds"),
            f"{r.error_type}: {r.error}"[:80],
        )
    console().print(table)


@poison.command("show")
@click.argument("message_id")
@pass_state
@app_options
@clean_errors
def poison_show(state: State, message_id: str) -> None:
    """Show one poisoned message whole: its error, traceback and body."""
    record = state.app(reading=True).poison.get(message_id)
    if record is None:
        not_found(f"no poisoned message with id {message_id!r}")
    emit_json(record.model_dump(mode="json"))


def _filter_options(command: Any) -> Any:
    for option in reversed(
        (
            click.option("--queue", default=None, help="Only messages of this queue."),
            click.option("--reason", default=None, help="Only this reason (exception, ...)."),
            click.option("--task", default=None, help="Only messages of this task."),
            click.option("--match", "text", default=None, help="Only errors containing this."),
        )
    ):
        command = option(command)
    return command


@poison.command("replay")
@click.argument("message_ids", nargs=-1)
@click.option(
    "--all", "replay_all", is_flag=True, help="Replay every poisoned message the filter takes."
)
@_filter_options
@pass_state
@app_options
@clean_errors
def poison_replay(
    state: State,
    message_ids: tuple[str, ...],
    replay_all: bool,
    queue: str | None,
    reason: str | None,
    task: str | None,
    text: str | None,
) -> None:
    """Move poisoned messages (by id, or --all that the filter options match) back to
    their queue, due now, with fresh attempts."""
    service = state.app(reading=True).poison
    if bool(message_ids) == replay_all:
        fail("give message ids or --all")
    chosen = poisoned.PoisonFilter(queue, reason, task, text)
    if replay_all:
        moved = service.replay(chosen=chosen)
    else:
        moved = service.replay(message_ids, chosen=poisoned.PoisonFilter(queue))
        if moved == 0:
            not_found(f"no replayable poisoned message among {', '.join(message_ids)}")
    click.echo(f"replayed {moved}")


@poison.command("purge")
@click.argument("message_ids", nargs=-1)
@_filter_options
@pass_state
@app_options
@clean_errors
def poison_purge(
    state: State,
    message_ids: tuple[str, ...],
    queue: str | None,
    reason: str | None,
    task: str | None,
    text: str | None,
) -> None:
    """Delete poisoned messages: these ids, or every one the filter options match (all
    of them without options)."""
    service = state.app(reading=True).poison
    if message_ids:
        click.echo(f"purged {service.purge(message_ids, chosen=poisoned.PoisonFilter(queue))}")
        return
    click.echo(f"purged {service.purge(chosen=poisoned.PoisonFilter(queue, reason, task, text))}")
