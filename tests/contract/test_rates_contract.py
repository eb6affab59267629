"""The rate-limit part of the backend contract (reserving starts in a sliding window on the
backend's clock), run against every backend."""

from __future__ import annotations

import uuid

from tests.support.backends import BackendHarness
from tickwork.scheduler.backends import RateRequest


def _limit() -> str:
    return f"api:{uuid.uuid4().hex[:8]}"  # limits are global to a backend: one per test


def _request(limit: str, member: str, count: int = 2, period_ms: int = 60_000) -> RateRequest:
    return RateRequest(limit, count, period_ms, member)


def test_starts_up_to_the_rate_run_now_and_the_next_ones_get_spaced_reservations(
    harness: BackendHarness,
) -> None:
    b, limit = harness.backend, _limit()
    before = b.now_ms()
    answers = b.rates.reserve([_request(limit, f"m{i}") for i in range(5)])
    after = b.now_ms()
    assert answers[:2] == [None, None], "two starts a minute: the first two start now"
    third, fourth, fifth = answers[2:]
    assert third is not None and fourth is not None and fifth is not None
    assert before + 60_000 <= third <= after + 60_000, "a period after the first start"
    assert before + 60_000 <= fourth <= after + 60_000, "a period after the second start"
    assert fifth - third >= 60_000, "a period after the third reservation"
    assert b.rates.usage([limit], 60_000) == {limit: (2, 3)}
    other = _limit()
    assert b.rates.reserve([_request(other, "m3")]) == [None], "limits do not share starts"


def test_a_reservation_is_kept_for_its_member_and_honoured_when_it_comes_due(
    harness: BackendHarness,
) -> None:
    b, limit = harness.backend, _limit()
    assert b.rates.reserve([_request(limit, "a", count=1, period_ms=400)]) == [None]
    (reserved,) = b.rates.reserve([_request(limit, "b", count=1, period_ms=400)])
    assert reserved is not None
    assert b.rates.reserve([_request(limit, "b", count=1, period_ms=400)]) == [reserved], (
        "asking again before its time gives the same reservation, not a new one"
    )
    assert b.rates.reserve([_request(limit, "a", count=1, period_ms=400)]) == [None], (
        "a member that started may ask again (a redelivery) and starts"
    )
    (later,) = b.rates.reserve([_request(limit, "c", count=1, period_ms=400)])
    assert later is not None and later >= reserved + 400
    harness.advance(reserved - b.now_ms() + 50)  # sleeps on a server, moves the clock on SQLite
    assert b.rates.reserve([_request(limit, "b", count=1, period_ms=400)]) == [None]
    assert b.rates.reserve([_request(limit, "c", count=1, period_ms=400)]) == [later], (
        "c still waits for its own time"
    )


def test_starts_older_than_the_period_no_longer_count(harness: BackendHarness) -> None:
    b, limit = harness.backend, _limit()
    assert b.rates.reserve([_request(limit, "a", count=1, period_ms=300)]) == [None]
    assert b.rates.reserve([_request(limit, "b", count=1, period_ms=300)])[0] is not None
    harness.advance(700)
    assert b.rates.usage([limit], 300) == {limit: (0, 0)}, "b's reservation is in the past too"
    assert b.rates.reserve([_request(limit, "c", count=1, period_ms=300)]) == [None]
    assert b.rates.usage([limit], 300) == {limit: (1, 0)}


def test_a_batch_over_several_limits_keeps_each_order(harness: BackendHarness) -> None:
    b, first, second = harness.backend, _limit(), _limit()
    requests = [
        _request(first, "f1", count=1),
        _request(second, "s1", count=1),
        _request(first, "f2", count=1),
        _request(second, "s2", count=1),
        _request(first, "f3", count=1),
    ]
    f1, s1, f2, s2, f3 = b.rates.reserve(requests)
    assert f1 is None and s1 is None
    assert f2 is not None and s2 is not None and f3 is not None
    assert f3 - f2 >= 60_000, "each reservation of a limit a period after the one before"
    assert b.rates.usage([first, second], 60_000) == {first: (1, 2), second: (1, 1)}
    assert b.rates.reserve([]) == []


def test_a_reservation_stands_when_the_rate_is_not_reached_by_the_count_asked(
    harness: BackendHarness,
) -> None:
    b, limit = harness.backend, _limit()
    assert b.rates.reserve([_request(limit, "a", count=1)]) == [None]
    (reserved,) = b.rates.reserve([_request(limit, "b", count=1)])
    assert reserved is not None
    # a worker registered with a higher rate asks for b's start: b keeps its time
    assert b.rates.reserve([_request(limit, "b", count=5)]) == [reserved]
    assert b.rates.reserve([_request(limit, "c", count=5)]) == [None]
    assert b.rates.usage([limit], 60_000) == {limit: (2, 1)}


def test_a_start_of_several_units_counts_each_of_them(harness: BackendHarness) -> None:
    b, limit = harness.backend, _limit()
    ten = RateRequest(limit, 10, 60_000, "a", units=6)
    assert b.rates.reserve([ten]) == [None], "6 of 10 units: starts now"
    assert b.rates.reserve([RateRequest(limit, 10, 60_000, "b", units=4)]) == [None]
    assert b.rates.usage([limit], 60_000) == {limit: (10, 0)}, "the units, not the starts"
    before = b.now_ms()
    (reserved,) = b.rates.reserve([RateRequest(limit, 10, 60_000, "c", units=5)])
    assert reserved is not None and reserved >= before + 60_000 - 1_000, (
        "5 more units need 5 of the window's 10 to have left it: a period after a's start"
    )
    assert b.rates.reserve([RateRequest(limit, 10, 60_000, "c", units=5)]) == [reserved]
    assert b.rates.usage([limit], 60_000) == {limit: (10, 5)}
    assert b.rates.reserve([ten]) == [None], "a's own start found again, not counted twice"
    assert b.rates.usage([limit], 60_000) == {limit: (10, 5)}


def test_a_start_that_may_not_wait_is_refused_and_not_recorded(harness: BackendHarness) -> None:
    b, limit = harness.backend, _limit()

    def only_now(member: str, units: int = 1) -> RateRequest:
        return RateRequest(limit, 3, 60_000, member, units=units, reserve=False)

    assert b.rates.reserve([only_now("a"), only_now("b", units=2)]) == [None, None]
    before = b.now_ms()
    (refused,) = b.rates.reserve([only_now("c")])
    assert refused is not None and refused >= before + 60_000 - 1_000, (
        "the time it would have had, a period after a's start"
    )
    assert b.rates.usage([limit], 60_000) == {limit: (3, 0)}, "the refused start is not counted"
    assert b.rates.reserve([only_now("c")]) == [refused], "refused again: nothing was kept"
    assert b.rates.reserve([only_now("a")]) == [None], "a start granted is found again"
    assert b.rates.usage([limit], 60_000) == {limit: (3, 0)}
