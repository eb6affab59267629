"""``tickwork cron explain``: what a cron expression does, before it is scheduled: in
words (cron-descriptor), how a DST change treats it, and its next fire times."""

from __future__ import annotations

from datetime import UTC, datetime

import click
from cron_descriptor import FormatException, Options, get_description

from tickwork.cli.common import clean_errors, json_option
from tickwork.cli.schedules import print_occurrences
from tickwork.triggers import Cron
from tickwork.triggers.preview import preview

#: the DST options of ``cron explain`` and ``enqueue --cron``
dst_gap_option = click.option(
    "--dst-gap",
    type=click.Choice(["shift", "skip"]),
    help="A wall time in a spring-forward gap: shift it to the first instant after, or "
    "skip it [shift for fixed times, skip for intervals].",
)
dst_repeat_option = click.option(
    "--dst-repeat",
    type=click.Choice(["first", "last", "both"]),
    help="A wall time a fall-back repeats: run on the first pass, the last, or both "
    "[first for fixed times, both for intervals].",
)


def in_words(trigger: Cron) -> str:
    """The expression said in English (``At 09:00, Monday through Friday``); a form the
    describer does not know is said as the expression itself."""
    options = Options()
    options.use_24hour_time_format = True
    # Quartz's six or seven fields count weekdays from 1 (Sunday), the five fields from 0
    options.day_of_week_start_index_zero = len(trigger.expr.split()) == 5
    try:
        return str(get_description(trigger.expr, options))
    except (FormatException, ValueError, KeyError, IndexError):
        return trigger.expr


@click.group()
def cron() -> None:
    """Cron expressions."""


@cron.command("explain")
@click.argument("expr")
@click.option("--tz", default="UTC", show_default=True, help="IANA timezone.")
@dst_gap_option
@dst_repeat_option
@click.option("-n", "count", type=click.IntRange(1, 1000), default=10, show_default=True)
@json_option
@clean_errors
def explain(
    expr: str,
    tz: str,
    dst_gap: str | None,
    dst_repeat: str | None,
    count: int,
    as_json: bool,
) -> None:
    """EXPR in words (5 fields, 6 or 7 with seconds first as Quartz, or a nickname such as
    @daily), what a DST change does to it in --tz, and its next fire times."""
    trigger = Cron(expr, tz=tz, dst_gap=dst_gap, dst_repeat=dst_repeat)
    occurrences = preview(trigger, count, datetime.now(UTC))
    if not as_json:
        kind = "interval schedule (elapsed time)" if trigger.interval else "fixed-time schedule"
        gap = "skipped" if trigger.gap_policy == "skip" else "run at the first instant after it"
        repeat = trigger.repeat_policy
        passes = "on both passes" if repeat == "both" else f"on its {repeat} pass"
        click.echo(f"cron {trigger.expr!r} in {tz}: {in_words(trigger)}")
        click.echo(f"{kind}: a wall time in a DST gap is {gap}; a repeated one runs {passes}")
    print_occurrences(occurrences, as_json)
