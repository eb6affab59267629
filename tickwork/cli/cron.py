"""``tickwork cron explain``: what a cron expression does, before it is scheduled."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from tickwork.cli.common import clean_errors, json_option
from tickwork.cli.schedules import print_occurrences
from triggers import Cron
from triggers.preview import preview


@click.group()
def cron() -> None:
    """Cron expressions."""


@cron.command("explain")
@click.argument("expr")
@click.option("--tz", default="UTC", show_default=True, help="IANA timezone.")
@click.option("-n", "count", type=click.IntRange(1, 1000), default=10, show_default=True)
@json_option
@clean_errors
def explain(expr: str, tz: str, count: int, as_json: bool) -> None:
    """The next fire times of EXPR in --tz, with what a DST change does to each."""
    trigger = Cron(expr, tz=tz)
    occurrences = preview(trigger, count, datetime.now(UTC))
    if not as_json:
        kind = (
            "interval schedule: elapsed time; wall times in a DST gap do not fire, "
            "repeated ones fire twice"
            if trigger.interval
            else "fixed-time schedule: once per local day; a wall time in a DST gap runs "
            "at the first instant after it, a repeated one on its first pass"
        )
        click.echo(f"cron {trigger.expr!r} in {tz}: {kind}")
    print_occurrences(occurrences, as_json)
