"""``tickwork queues ...``: list queues, pause and resume them."""

from __future__ import annotations

import click
from rich.table import Table

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


@click.group()
def queues() -> None:
    """List, pause and resume queues."""


@queues.command("list")
@json_option
@pass_state
@backend_option
@clean_errors
def list_queues(state: State, as_json: bool) -> None:
    """Every known queue, whether it is paused, and what it holds."""
    rows = state.app().backend.stats()
    if as_json:
        emit_json(
            [
                {"queue": s.queue, "paused": s.paused, "ready": s.ready, "in_flight": s.in_flight}
                for s in rows
            ]
        )
        return
    table = Table("queue", "state", "ready", "scheduled", "in flight")
    for s in rows:
        state_name = "paused" if s.paused else "active"
        table.add_row(s.queue, state_name, str(s.ready), str(s.scheduled), str(s.in_flight))
    console().print(table)


@queues.command("pause")
@click.argument("queue")
@pass_state
@backend_option
@clean_errors
def pause(state: State, queue: str) -> None:
    """Stop every worker claiming from QUEUE (within its poll interval)."""
    changed = state.app().pause(queue)
    click.echo(f"paused {queue}" if changed else f"{queue} was already paused")


@queues.command("resume")
@click.argument("queue")
@pass_state
@backend_option
@clean_errors
def resume(state: State, queue: str) -> None:
    """Let workers claim from QUEUE again."""
    if not state.app().resume(queue):
        fail(f"{queue} is not paused", EXIT_NOT_FOUND)
    click.echo(f"resumed {queue}")
