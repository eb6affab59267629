"""The activity log's records and the arithmetic of its charts (no backend)."""

from __future__ import annotations

import pytest

from tickwork.scheduler.views.activity import (
    LATENESS_BUCKETS,
    RUN_BUCKETS,
    Interval,
    Minute,
    quantile,
)


def interval(worker: str = "w1", succeeded: int = 3, late: list[int] | None = None) -> Interval:
    lateness = late or [0] * (len(LATENESS_BUCKETS) + 1)
    return Interval(
        worker, 1_000, 16_000, {"succeeded": succeeded, "retried": 1}, lateness, 0.5,
        [0] * (len(RUN_BUCKETS) + 1), 0.0,
    )  # fmt: skip


def test_an_interval_survives_its_stored_form_and_garbage_reads_as_none() -> None:
    one = interval()
    assert Interval.decode(one.encode()) == one
    assert Interval.decode(b"{not json") is None
    assert Interval.decode(b'{"w": "x"}') is None
    short = one.encode().replace(b'"l":[0,', b'"l":[')  # a histogram of the wrong length
    assert Interval.decode(short) is None


def test_a_minute_adds_the_intervals_of_every_worker() -> None:
    minute = Minute(0)
    late = [0] * (len(LATENESS_BUCKETS) + 1)
    late[2] = 4
    minute.add(interval("w1", late=late))
    minute.add(interval("w2", succeeded=5))
    assert minute.counts["succeeded"] == 8 and minute.failed == 2 and minute.finished == 10
    assert minute.workers == {"w1", "w2"} and minute.lateness[2] == 4


def test_quantiles_interpolate_inside_the_bucket_as_prometheus_does() -> None:
    bounds = (1.0, 2.0, 4.0)
    assert quantile([0, 0, 0, 0], bounds, 0.5) is None
    assert quantile([10, 0, 0, 0], bounds, 0.5) == pytest.approx(0.5)
    assert quantile([0, 10, 0, 0], bounds, 0.95) == pytest.approx(1.95)
    assert quantile([5, 0, 5, 0], bounds, 0.75) == pytest.approx(3.0)
    assert quantile([0, 0, 0, 3], bounds, 0.5) == 4.0  # past the last bound: the last bound
