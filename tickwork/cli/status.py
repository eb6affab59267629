"""``tickwork stats``: what the queues hold."""

from __future__ import annotations

import click
from rich.table import Table

from scheduler.backends.base import COUNTERS
from tickwork.cli.common import (
    State,
    backend_option,
    clean_errors,
    console,
    emit_json,
    iso,
    json_option,
    pass_state,
)


@click.command()
@json_option
@pass_state
@backend_option
@clean_errors
def stats(state: State, as_json: bool) -> None:
    """Per queue: ready, scheduled, in flight, poison, next due time and counters."""
    rows = state.app().backend.stats()
    if as_json:
        emit_json(
            [
                {
                    "queue": s.queue,
                    "ready": s.ready,
                    "scheduled": s.scheduled,
                    "in_flight": s.in_flight,
                    "poison": s.poison,
                    "next_due": iso(s.next_due_ms),
                    "counters": s.counters,
                    "shards": s.shards,
                    "paused": s.paused,
                }
                for s in rows
            ]
        )
        return
    table = Table(
        "queue",
        "paused",
        "ready",
        "scheduled",
        "in flight",
        "poison",
        "next due",
        *(name.replace("_", " ") for name in COUNTERS),
    )
    for s in rows:
        c = s.counters
        table.add_row(
            s.queue,
            "paused" if s.paused else "-",
            str(s.ready),
            str(s.scheduled),
            str(s.in_flight),
            str(s.poison),
            iso(s.next_due_ms),
            *(str(c.get(name, 0)) for name in COUNTERS),
        )
    console().print(table)
