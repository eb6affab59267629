"""``tickwork workflow show``: a batch or a chain, step by step."""

from __future__ import annotations

import json

import click

from tickwork.cli.common import (
    State,
    backend_option,
    clean_errors,
    emit_json,
    fail,
    json_option,
    pass_state,
)


@click.group()
def workflow() -> None:
    """Inspect batches and chains."""


@workflow.command()
@click.argument("workflow_id", metavar="ID", required=False)
@click.option("--key", help="Show the chain holding this key (instead of an ID).")
@click.option("--queue", help="Queue of the key [default].")
@click.option(
    "--max-steps",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="For a chain: how many step ids to look through for its live step.",
)
@json_option
@pass_state
@backend_option
@clean_errors
def show(
    state: State,
    workflow_id: str | None,
    key: str | None,
    queue: str | None,
    max_steps: int,
    as_json: bool,
) -> None:
    """Show a batch (by its id) with each member and callback, or a chain (by its first
    step's id, or by its --key: a recurring chain's current occurrence) with each step:
    state, attempts, timing, result or error. Exit code 1 if none is stored."""
    if (key is None) == (workflow_id is None):
        fail("give exactly one of ID and --key")
    view = state.app().batches.workflow(workflow_id, max_steps, key=key, queue=queue)
    if as_json:
        emit_json(view.model_dump(mode="json"))
        return
    click.echo(f"{view.kind} {view.id}: {view.state}; {view.summary}")
    for step in view.steps:
        parts = [f"  {step.name:<12} {step.id}", step.state]
        if step.task:
            parts.append(step.task)
        if step.attempt:
            parts.append(f"attempt {step.attempt}")
        if step.at is not None:
            parts.append(step.at.isoformat(timespec="milliseconds"))
        if step.error:
            parts.append(step.error)
        elif step.value is not None:
            parts.append(f"-> {json.dumps(step.value)}")
        click.echo("  ".join(parts))
