"""``tickwork limits ...``: the concurrency and rate limits, and their capacities changed
live (list, set, clear)."""

from __future__ import annotations

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
from tickwork.scheduler.limits.capacities import LimitKind
from tickwork.scheduler.views.limits import LimitView

_KIND = click.option(
    "--kind",
    type=click.Choice(["concurrency", "rate"]),
    help="which limit, when NAME is both a concurrency and a rate limit",
)


@click.group()
def limits() -> None:
    """Concurrency and rate limits: what is declared and what is in force."""


@limits.command("list")
@json_option
@pass_state
@app_options
@clean_errors
def list_limits(state: State, as_json: bool) -> None:
    """Every limit the app's tasks or a live worker's declare, with the capacity in force
    now (set live, or declared)."""
    views = state.app(reading=True).limits.list()
    if as_json:  # the same view as the API's GET /api/v1/limits
        emit_json([view.model_dump(mode="json") for view in views])
        return
    table = Table("limit", "kind", "in force", "declared", "set by", "tasks")
    for view in views:
        table.add_row(
            view.name,
            view.kind,
            _amount(view),
            "-" if view.declared is None else str(view.declared),
            "-" if view.set_at is None else f"{view.set_by} at {view.set_at:%Y-%m-%d %H:%M:%S}",
            ", ".join(view.tasks) or "-",
        )
    console().print(table)


@limits.command("set")
@click.argument("name")
@click.argument("amount", type=click.IntRange(min=1, max=1_000_000_000))
@_KIND
@click.option("--note", help="why (kept in the audit log)")
@pass_state
@app_options
@clean_errors
def set_limit(state: State, name: str, amount: int, kind: str | None, note: str | None) -> None:
    """Set limit NAME's capacity to AMOUNT (runs at once, or starts per its period) for
    every worker, within seconds, until it is cleared."""
    view = state.app().limits.set(name, amount, kind=_kind(kind), note=note)
    click.echo(f"{view.kind} limit {view.name}: {_amount(view)} (declared: {view.declared})")


@limits.command("clear")
@click.argument("name")
@_KIND
@click.option("--note", help="why (kept in the audit log)")
@pass_state
@app_options
@clean_errors
def clear_limit(state: State, name: str, kind: str | None, note: str | None) -> None:
    """Give limit NAME back the capacity its tasks declare."""
    cleared = state.app().limits.clear(name, kind=_kind(kind), note=note)
    click.echo(f"{name}: back to its declared capacity" if cleared else f"{name} was not set")


def _amount(view: LimitView) -> str:
    per = "" if view.period_s is None else f" per {view.period_s:g} s"
    return f"{view.amount}{per}"


def _kind(kind: str | None) -> LimitKind | None:
    if kind is None:
        return None
    return "rate" if kind == "rate" else "concurrency"
