"""``tickwork workflow show``: a batch or a chain, step by step."""

from __future__ import annotations

import click

from tickwork.cli.common import (
    State,
    app_options,
    clean_errors,
    emit_json,
    fail,
    json_option,
    pass_state,
)
from tickwork.scheduler.views.runs import RunJournal
from tickwork.scheduler.workflows.graph_view import levels
from tickwork.scheduler.workflows.view import WorkflowView


@click.group()
def workflow() -> None:
    """Inspect batches, chains and graphs."""


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
@app_options
@clean_errors
def show(
    state: State,
    workflow_id: str | None,
    key: str | None,
    queue: str | None,
    max_steps: int,
    as_json: bool,
) -> None:
    """Show a batch (by its id) with each member and callback, a graph (by its id) level
    by level with what each step comes after, or a chain (by its first step's id, or by
    its --key: a recurring chain's current occurrence) with each step: state, attempts,
    timing, result or error; or a durable run (by its id) with each entry of its
    journal and what it waits for. Exit code 1 if none is stored."""
    if (key is None) == (workflow_id is None):
        fail("give exactly one of ID and --key")
    app = state.app(reading=True)
    journal = None if workflow_id is None else app.runs.journal(workflow_id)
    if journal is not None:
        _journal(journal, as_json)
        return
    view = app.batches.workflow(workflow_id, max_steps, key=key, queue=queue)
    if as_json:
        emit_json(view.model_dump(mode="json"))
        return
    click.echo(f"{view.kind} {view.id}: {view.state}; {view.summary}")
    if view.kind == "graph":
        _draw(view)
        return
    for step in view.steps:
        click.echo("  ".join([f"  {step.name:<12} {step.id}", *step.facts()]))


def _journal(journal: RunJournal, as_json: bool) -> None:
    """A durable run: its status, each entry of its journal, what it waits for."""
    if as_json:
        emit_json(journal.model_dump(mode="json"))
        return
    click.echo(f"durable run {journal.id}: {journal.status}; {len(journal.steps)} entries")
    for step in journal.steps:
        click.echo(
            "  ".join([f"  {step.position:>3} {step.kind:<5} {step.name:<16}", *step.facts()])
        )
    if journal.waiting_for is not None:
        click.echo(f"  waiting for {journal.waiting_for}")


def _draw(view: WorkflowView) -> None:
    """A graph level by level: each step under the level of its depth, with the steps it
    comes after."""
    depth = levels(view)
    for level in range(max(depth.values(), default=-1) + 1):
        click.echo(f"  level {level}")
        for step in view.steps:
            if depth[step.name] == level:
                after = f" <- {', '.join(step.after)}" if step.after else ""
                click.echo("  ".join([f"    {step.name}{after}", *step.facts()]))
