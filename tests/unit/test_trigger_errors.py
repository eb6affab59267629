"""A bad trigger, calendar, time window or argument shape is one ``TickworkError`` in
tickwork's words, naming the field and what it takes (issue 49, 10): no pydantic type
codes, no URLs, no bare ``TypeError``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

import pytest

from tickwork import App
from tickwork.errors import InvalidMessage, InvalidTrigger, TickworkError
from tickwork.triggers import Cron, Exclusions, Repeating, Specs, Window

CASES: list[tuple[Callable[[], object], str]] = [
    (
        lambda: Cron("0 25 * * *"),
        "Cron: expr: invalid cron expression '0 25 * * *': the hour field '25' takes 0-23",
    ),
    (
        lambda: Cron("0 0 9 * * MON#6"),
        "Cron: expr: invalid cron expression '0 0 9 * * MON#6': the day-of-week field "
        "'MON#6' takes 1-7 or SUN-SAT, nL, n#k",
    ),
    (lambda: Cron("0 9 * * *", tz="Mars/Base"), "Cron: tz: unknown timezone 'Mars/Base'"),
    (lambda: Repeating(interval=timedelta(0)), "Repeating: interval: must be positive"),
    (
        lambda: Repeating(interval=timedelta(hours=1), catch_up_window=timedelta(0)),
        "Repeating: catch_up_window: must be positive",
    ),
    (
        lambda: Repeating(interval=timedelta(hours=1), jitter=timedelta(seconds=-1)),
        "Repeating: jitter: must not be negative",
    ),
    (
        lambda: Repeating(interval=timedelta(hours=1), start=datetime(2030, 1, 1)),
        "Repeating: start: must be timezone-aware (got naive 2030-01-01T00:00:00)",
    ),
    (
        lambda: Repeating(interval=timedelta(hours=1), max_catch_up=0),
        "Repeating: max_catch_up: Input should be greater than or equal to 1",
    ),
    (
        lambda: Repeating(interval=timedelta(hours=1), every=5),  # type: ignore[call-arg]
        "Repeating: every: not a field of Repeating (a typo?)",
    ),
    (lambda: Window(time(17), time(9)), "Window: a window ends after it starts"),
    (lambda: Exclusions(holidays="XX"), "Exclusions: no holiday calendar for 'XX'"),
    (lambda: Specs(specs=(Cron("0 9 * * *"),), tz="Nowhere"), "Specs: tz: unknown timezone"),
]


@pytest.mark.parametrize(("make", "words"), CASES)
def test_a_bad_trigger_is_one_error_naming_its_field(
    make: Callable[[], object], words: str
) -> None:
    with pytest.raises(InvalidTrigger) as caught:
        make()
    error = caught.value
    assert isinstance(error, TickworkError) and isinstance(error, ValueError)
    assert str(error).startswith(words), str(error)
    assert "pydantic" not in str(error) and "type=" not in str(error)


def test_arguments_of_the_wrong_shape_are_named(tmp_path: Path) -> None:
    app = App(f"sqlite:///{tmp_path / 'shape.db'}")

    @app.task
    def send_report(n: int) -> None: ...

    with pytest.raises(InvalidMessage, match=r"args of task .* must be a list or tuple"):
        send_report.schedule(args=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage, match=r"kwargs of task .* must map its parameters"):
        send_report.schedule(kwargs=[1])  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage, match="not str 'ab'"):
        send_report.schedule(args="ab")
    assert send_report.schedule(args=(1,), at=datetime.now(UTC) + timedelta(hours=1))
    app.close()
