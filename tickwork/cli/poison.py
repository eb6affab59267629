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
    iso,
    json_option,
    not_found,
    pass_state,
)
from tickwork.scheduler import (
    TickworkError,
)
from tickwork.scheduler.backends.codec import shown
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.views import poison as poisoned


@click.group()
def poison() -> None:
    """Inspect, replay or purge messages that failed for good."""


def poison_dict(record: Any) -> dict[str, Any]:
    try:
        body: Any = Message.decode(record.envelope.body).model_dump(
            mode="json", exclude_defaults=True
        )
    except TickworkError:
        body = record.envelope.body.decode("utf-8", "replace")
    return {
        "id": record.envelope.id,
        "queue": record.envelope.queue,
        "key": record.envelope.key,
        "attempts": record.attempts,
        "failed_at": iso(record.failed_at_ms),
        "reason": record.failure.reason,
        "error_type": record.failure.error_type,
        "error": shown(record.failure.message),
        "traceback": shown(record.failure.traceback),
        "message": body,
    }


@poison.command("list")
@click.option("--queue", default=None)
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@json_option
@pass_state
@app_options
@clean_errors
def poison_list(state: State, queue: str | None, limit: int, as_json: bool) -> None:
    """List poisoned messages, oldest first."""
    records = [poison_dict(r) for r in state.app(reading=True).backend.poison.list(queue, limit)]
    if as_json:
        emit_json(records)
        return
    table = Table("id", "queue", "key", "attempts", "failed at", "error")
    for r in records:
        table.add_row(
            r["id"],
            r["queue"],
            r["key"] or "-",
            str(r["attempts"]),
            r["failed_at"],
            f"{r['error_type']}: {r['error']}"[:80],
        )
    console().print(table)


@poison.command("show")
@click.argument("message_id")
@pass_state
@app_options
@clean_errors
def poison_show(state: State, message_id: str) -> None:
    """Show one poisoned message with its error and traceback."""
    record = state.app(reading=True).backend.poison.get(message_id)
    if record is None:
        not_found(f"no poisoned message with id {message_id!r}")
    emit_json(poison_dict(record))


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
    backend = state.app(reading=True).backend
    if bool(message_ids) == replay_all:
        fail("give message ids or --all")
    if replay_all:
        moved = poisoned.replay(backend, poisoned.PoisonFilter(queue, reason, task, text))
    else:
        moved = backend.poison.replay(list(message_ids), queue)
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
    backend = state.app(reading=True).backend
    if message_ids:
        click.echo(f"purged {backend.poison.purge(queue, list(message_ids))}")
        return
    chosen = poisoned.PoisonFilter(queue, reason, task, text)
    click.echo(f"purged {poisoned.purge(backend, chosen)}")
