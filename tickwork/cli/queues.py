"""``tickwork queues ...``: list queues, pause and resume them, set or remove their bounds,
weigh their fair-share keys."""

from __future__ import annotations

import click
from rich.table import Table

from tickwork.cli.common import (
    State,
    app_options,
    clean_errors,
    console,
    emit_json,
    fill,
    json_option,
    not_found,
    pass_state,
)


@click.group()
def queues() -> None:
    """List, pause, resume and bound queues."""


@queues.command("list")
@json_option
@pass_state
@app_options
@clean_errors
def list_queues(state: State, as_json: bool) -> None:
    """Every known queue, whether it is paused, what it holds and its bound."""
    app = state.app(reading=True)
    if as_json:  # the same view as the API's GET /api/v1/queues
        emit_json([view.model_dump(mode="json") for view in app.queues.list()])
        return
    rows = app.queues.stats()
    table = Table("queue", "state", "ready", "scheduled", "in flight", "fill")
    for s in rows:
        state_name = "paused" if s.paused else "active"
        table.add_row(
            s.queue, state_name, str(s.ready), str(s.scheduled), str(s.in_flight), fill(s)
        )
    console().print(table)


@queues.command("set")
@click.argument("queue")
@click.option(
    "--max-pending",
    type=click.IntRange(min=1),
    help="bound QUEUE to this many messages waiting or leased; producers wait while full",
)
@click.option("--unbounded", is_flag=True, help="remove QUEUE's bound")
@pass_state
@app_options
@clean_errors
def set_queue(state: State, queue: str, max_pending: int | None, unbounded: bool) -> None:
    """Set (or remove) QUEUE's bound, stored in the backend for every producer."""
    if (max_pending is None) == (not unbounded):
        raise click.UsageError("give exactly one of --max-pending N and --unbounded")
    state.app().queues.configure(queue, max_pending=max_pending)
    click.echo(f"{queue}: at most {max_pending} pending" if max_pending else f"{queue}: unbounded")


@queues.command("pause")
@click.argument("queue")
@pass_state
@app_options
@clean_errors
def pause(state: State, queue: str) -> None:
    """Stop every worker claiming from QUEUE (within its poll interval)."""
    changed = state.app().queues.pause(queue)
    click.echo(f"paused {queue}" if changed else f"{queue} was already paused")


@queues.command("resume")
@click.argument("queue")
@pass_state
@app_options
@clean_errors
def resume(state: State, queue: str) -> None:
    """Let workers claim from QUEUE again."""
    if not state.app(reading=True).queues.resume(queue):
        not_found(f"{queue} is not paused")
    click.echo(f"resumed {queue}")


@queues.command("weigh")
@click.argument("queue")
@click.argument("key")
@click.argument("weight", type=click.IntRange(min=1, max=1000))
@pass_state
@app_options
@clean_errors
def weigh(state: State, queue: str, key: str, weight: int) -> None:
    """Give the fair-share KEY of QUEUE WEIGHT turns for one of a key of weight 1 (1: back
    to even), from the next messages made ready on."""
    weights = state.app().queues.weigh(queue, key, weight).weights
    click.echo(f"{queue}: {key} has weight {weights.get(key, 1)}")


@queues.command("weights")
@click.argument("queue")
@json_option
@pass_state
@app_options
@clean_errors
def weights(state: State, queue: str, as_json: bool) -> None:
    """The fair-share weights set in QUEUE (keys not listed have weight 1)."""
    view = state.app(reading=True).queues.weights(queue)
    if as_json:  # the same view as the API's GET /api/v1/queues/{queue}/weights
        emit_json(view.model_dump(mode="json"))
        return
    if not view.weights:
        click.echo(f"{queue}: every fair-share key has weight 1")
        return
    table = Table("key", "weight")
    for key, weight in view.weights.items():
        table.add_row(key, str(weight))
    console().print(table)
