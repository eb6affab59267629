"""``tickwork stats``: what the queues hold; ``tickwork workers``: who consumes them."""

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
    iso,
    json_option,
    pass_state,
)
from tickwork.scheduler.backends.records import COUNTERS
from tickwork.scheduler.views.queues import QueueView


@click.command()
@json_option
@pass_state
@app_options
@clean_errors
def stats(state: State, as_json: bool) -> None:
    """Per queue: ready, scheduled, in flight, poison, fill of its bound, next due time
    and counters."""
    rows = state.app(reading=True).queues.stats()
    if as_json:  # the API's queue view, with the shards of a sharded backend
        emit_json([{**QueueView.of(s).model_dump(mode="json"), "shards": s.shards} for s in rows])
        return
    # two tables of at most nine columns each: they fit an 80-column terminal
    table = Table("queue", "paused", "ready", "scheduled", "in flight", "poisoned", "fill")
    table.add_column("next due")
    for s in rows:
        table.add_row(
            s.queue,
            "paused" if s.paused else "-",
            str(s.ready),
            str(s.scheduled),
            str(s.in_flight),
            str(s.poison),
            fill(s),
            iso(s.next_due_ms),
        )
    console().print(table)
    counted = Table("queue", *(name.replace("_", " ") for name in COUNTERS), title="counters")
    for s in rows:
        counted.add_row(s.queue, *(str(s.counters.get(name, 0)) for name in COUNTERS))
    console().print(counted)


@click.command("workers")
@json_option
@pass_state
@app_options
@clean_errors
def workers(state: State, as_json: bool) -> None:
    """The workers in the registry: host, pid, queues, pool, what they hold, last seen; a
    worker not seen for three of its heartbeats is shown as gone."""
    rows = state.app(reading=True).workers.live()
    if as_json:
        emit_json([row.model_dump(mode="json") for row in rows])
        return
    table = Table("worker", "state", "queues", "pool", "held", "acked", "started", "last seen")
    for w in rows:
        pool = f"{w.pool} x{w.concurrency}"
        if w.async_concurrency:
            pool += f" + async x{w.async_concurrency}"
        table.add_row(
            w.id,
            "alive" if w.alive else "gone",
            ",".join(w.queues),
            f"{w.pool} x{w.concurrency}"
            + (f" + async x{w.async_concurrency}" if w.async_concurrency else ""),
            str(w.held),
            str(w.stats.get("acked", 0)),
            w.started_at.strftime("%Y-%m-%d %H:%M:%S"),
            w.last_seen.strftime("%H:%M:%S"),
        )
    console().print(table)
