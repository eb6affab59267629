"""``tickwork emit`` and ``tickwork events ...``: emit an event, list the subscriptions
and the events delivered lately."""

from __future__ import annotations

import json

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
    pass_state,
)


@click.command()
@click.argument("name")
@click.argument("payload", required=False)
@click.option("--key", help="the event's key (what a wait for it matches on)")
@click.option("--id", "event_id", help="the event's id: emitting an id again delivers nothing")
@click.option("--queue", help="the queue its delivery runs from (default: the app's)")
@pass_state
@app_options
@clean_errors
def emit(
    state: State,
    name: str,
    payload: str | None,
    key: str | None,
    event_id: str | None,
    queue: str | None,
) -> None:
    """Emit event NAME with PAYLOAD (JSON) to every subscribed task and waiting step;
    prints the event's id."""
    value = None
    if payload is not None:
        try:
            value = json.loads(payload)
        except json.JSONDecodeError as err:
            fail(f"PAYLOAD is not valid JSON: {err}")
    app = state.app()
    click.echo(app.emit(name, value, key=key, event_id=event_id, queue=queue))
    if not any(subscription.wants(name) for subscription in app.events.subscriptions()):
        click.echo(
            f"tickwork: note: no task subscribes to {name!r}: the event is stored for "
            "steps that wait for it (wait_for), and reaches no subscriber",
            err=True,
        )


@click.group()
def events() -> None:
    """List event subscriptions and the events delivered lately."""


@events.command("subscriptions")
@json_option
@pass_state
@app_options
@clean_errors
def subscriptions(state: State, as_json: bool) -> None:
    """Every subscription stored in the backend: which task gets which events."""
    found = state.app(reading=True).events.subscriptions()
    if as_json:
        emit_json([s.model_dump(mode="json") for s in found])
        return
    table = Table("task", "events", "queue", "declared in")
    for s in found:
        table.add_row(s.task, " ".join(s.patterns), s.queue, s.owner)
    console().print(table)


@events.command("recent")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@json_option
@pass_state
@app_options
@clean_errors
def recent(state: State, limit: int, as_json: bool) -> None:
    """The newest events delivered, with whom each reached."""
    found = state.app(reading=True).events.recent(limit)
    if as_json:
        emit_json([d.model_dump(mode="json") for d in found])
        return
    table = Table("emitted", "event", "key", "id", "delivered to", "waits woken")
    for d in found:
        event = d.event
        reached = "(emitted before: nothing)" if d.duplicate else " ".join(d.subscribers) or "-"
        table.add_row(
            event.emitted_at.isoformat(timespec="milliseconds"),
            event.name,
            event.key or "-",
            event.id,
            reached,
            str(d.waiters),
        )
    console().print(table)
