"""``tickwork stats`` and ``schedules``: what the queues hold."""

from __future__ import annotations

import json

import click
from rich.table import Table

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
        "enqueued",
        "claimed",
        "acked",
        "redelivered",
        "retried",
        "poisoned",
        "empty polls",
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
            *(
                str(c.get(n, 0))
                for n in (
                    "enqueued",
                    "claimed",
                    "acked",
                    "redelivered",
                    "retried",
                    "poisoned",
                    "empty_polls",
                )
            ),
        )
    console().print(table)


@click.command()
@click.option("--queue", default=None)
@json_option
@pass_state
@backend_option
@clean_errors
def schedules(state: State, queue: str | None, as_json: bool) -> None:
    """Keyed recurring messages: trigger, next run, last run, misfires."""
    rows = state.app().schedules(queue)
    if as_json:
        emit_json(
            [
                {
                    "queue": r.queue,
                    "key": r.key,
                    "task": r.task,
                    "trigger": r.trigger.model_dump(mode="json", exclude_defaults=True),
                    "next_run": r.next_run.isoformat(),
                    "last_run": r.last_run and r.last_run.isoformat(),
                    "misfires": r.misfires,
                    "state": str(r.state),
                }
                for r in rows
            ]
        )
        return
    table = Table("queue", "key", "task", "trigger", "next run", "last run", "misfires", "state")
    for r in rows:
        trigger = json.dumps(r.trigger.model_dump(mode="json", exclude_defaults=True))
        table.add_row(
            r.queue,
            r.key,
            r.task,
            trigger,
            r.next_run.isoformat(timespec="seconds"),
            r.last_run.isoformat(timespec="seconds") if r.last_run else "-",
            str(r.misfires),
            str(r.state),
        )
    console().print(table)
