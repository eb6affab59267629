"""The timing wheel, permits, the timer and the heartbeat, on a clock the test moves.

Nothing here sleeps to wait for time: the wheel takes the time as an argument, and the
timer and heartbeat read a ``ManualClock``.
"""

from __future__ import annotations

import random
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tickwork.scheduler.backends import Backend, Claim, Envelope
from tickwork.scheduler.backends.sqlite import SQLiteBackend
from tickwork.scheduler.clock import ManualClock
from tickwork.scheduler.model.message import Message
from tickwork.workers.intake.flow import LENT_PER_PERMIT, Pace, Permits
from tickwork.workers.intake.heartbeat import Heartbeat
from tickwork.workers.intake.holdings import Holdings, Work
from tickwork.workers.intake.timer import Timer
from tickwork.workers.intake.timing_wheel import TimingWheel

START = 1_800_000_000_000

# -- TimingWheel -----------------------------------------------------------------------------


def test_an_item_fires_at_its_due_time_not_before() -> None:
    wheel: TimingWheel[str] = TimingWheel(1, 20, START)
    assert wheel.add("a", START + 7)
    assert wheel.advance(START + 6) == []
    assert wheel.advance(START + 7) == ["a"]
    assert wheel.size == 0


def test_an_item_already_due_is_refused_and_not_kept() -> None:
    wheel: TimingWheel[str] = TimingWheel(1, 20, START)
    assert not wheel.add("late", START)
    assert not wheel.add("later", START - 5)
    assert wheel.size == 0 and wheel.next_expiration() is None


def test_the_docstring_example_cascades_through_level_one() -> None:
    wheel: TimingWheel[str] = TimingWheel(1, 20, 1000)
    assert wheel.add("near", 1007) and wheel.add("far", 1150)
    assert wheel.next_expiration() == 1007
    assert wheel.advance(1007) == ["near"]
    assert wheel.next_expiration() == 1140  # the level-1 bucket [1140, 1160)
    assert wheel.advance(1149) == []  # re-added into level 0 at 1140, not yet due
    assert wheel.next_expiration() == 1150
    assert wheel.advance(1150) == ["far"]


def test_many_items_over_several_levels_fire_in_due_order_exactly_once() -> None:
    rng = random.Random(7)
    wheel: TimingWheel[int] = TimingWheel(1, 8, START)
    dues = {i: START + rng.randrange(1, 100_000) for i in range(2_000)}
    for item, due in dues.items():
        assert wheel.add(item, due)
    fired: list[tuple[int, int]] = []  # (now, item)
    now = START
    while wheel.size:
        nxt = wheel.next_expiration()
        assert nxt is not None and nxt >= now
        now = nxt
        fired += [(now, item) for item in wheel.advance(now)]
    assert sorted(item for _, item in fired) == sorted(dues)
    for at, item in fired:
        assert at == dues[item], "fired exactly at its due time with a 1 ms tick"


def test_a_jump_in_time_fires_everything_due_in_order() -> None:
    wheel: TimingWheel[str] = TimingWheel(1, 20, START)
    for name, offset in (("c", 5_000), ("a", 3), ("b", 400)):
        wheel.add(name, START + offset)
    assert wheel.advance(START + 10_000) == ["a", "b", "c"]


def test_drain_returns_every_parked_item() -> None:
    wheel: TimingWheel[str] = TimingWheel(1, 20, START)
    wheel.add("a", START + 5)
    wheel.add("b", START + 50_000)
    assert sorted(wheel.drain()) == ["a", "b"]
    assert wheel.size == 0 and wheel.next_expiration() is None
    assert wheel.advance(START + 100_000) == []


def test_bad_geometry_is_refused() -> None:
    with pytest.raises(ValueError, match="tick_ms"):
        TimingWheel(0, 20, START)
    with pytest.raises(ValueError, match="wheel_size"):
        TimingWheel(1, 1, START)


# -- Permits ---------------------------------------------------------------------------------


def test_permits_are_taken_up_to_what_is_free_and_given_back() -> None:
    permits = Permits(4)
    assert permits.take(3, timeout_s=0) == 3
    assert permits.take(3, timeout_s=0) == 1
    assert permits.take(1, timeout_s=0) == 0
    permits.give(2)
    assert permits.take(5, timeout_s=0) == 2


def test_a_fired_timer_may_overdraw_and_the_debt_is_paid_first() -> None:
    permits = Permits(2)
    assert permits.take(2, timeout_s=0) == 2
    permits.force(1)  # three held with two permits
    permits.give(1)
    assert permits.take(1, timeout_s=0) == 0, "still in debt"
    permits.give(1)
    assert permits.take(1, timeout_s=0) == 1


def test_finished_runs_lend_their_permits_up_to_a_bound_until_settled() -> None:
    permits = Permits(2)
    bound = LENT_PER_PERMIT * 2
    held = permits.take(2, timeout_s=0)
    for _ in range(bound):  # a run finishes, its permit is lent, the next one is claimed
        assert permits.lend() is True
        assert permits.take(1, timeout_s=0) == 1
        held += 1
    assert held == bound + 2, "runs awaiting their ack are held on top of the permits"
    assert permits.lend() is False, "no more lent: the next run waits for its ack"
    assert permits.take(1, timeout_s=0) == 0
    permits.repaid(1)  # an ack was written
    assert permits.lend() is True and permits.take(1, timeout_s=0) == 1


def test_resizing_permits_keeps_what_is_held_and_may_go_into_debt() -> None:
    permits = Permits(4)
    assert permits.take(4, timeout_s=0) == 4
    permits.resize(10)
    assert permits.take(10, timeout_s=0) == 6
    permits.resize(2)  # 10 held with 2 permits: 8 must leave before one is free
    permits.give(8)
    assert permits.take(1, timeout_s=0) == 0
    permits.give(1)
    assert permits.take(5, timeout_s=0) == 1


def test_the_prefetch_follows_the_handlers_pace_within_its_bounds() -> None:
    permits = Permits(8 + 16)
    pace = Pace(permits, concurrency=8, runners=8)
    for _ in range(Pace.EVERY - 1):
        pace.ran(0.01)
    assert pace.prefetch == 16 and permits.total == 24, "no look before EVERY runs"
    pace.ran(0.01)  # 10 µs runs: 8 handlers would get through thousands in 20 ms
    assert pace.prefetch == 100 and permits.total == 108, "capped at HIGH x concurrency"
    for _ in range(Pace.EVERY):
        pace.ran(4.0)  # 4 ms runs: 8 x 20 / 4 = 40 claimed beyond the running ones
    assert pace.prefetch == 40 and permits.total == 48
    for _ in range(Pace.EVERY):
        pace.ran(4.3)  # 37: within an eighth of where it is, so left alone
    assert pace.prefetch == 40
    for _ in range(Pace.EVERY):
        pace.ran(41.0)  # 8 x 20 / 41 = 3.9: slow handlers keep 2 x concurrency
    assert pace.prefetch == 16 and permits.total == 24


def test_a_slow_claim_round_trip_asks_for_a_larger_prefetch() -> None:
    """Over a slow network the next claim comes back a round trip later: the prefetch
    covers the handlers' pace over that too (else each claim brings back only what ran
    during the last one, and the worker idles between round trips)."""
    permits = Permits(8 + 16)
    pace = Pace(permits, concurrency=8, runners=8)
    for _ in range(40):
        pace.claimed(0.2)  # 100 ms each way
    for _ in range(Pace.EVERY):
        pace.ran(41.0)  # alone, 8 x 20 / 41 = 3.9: 2 x concurrency
    # 8 x (20 + ~200) / 41 = ~42 claimed beyond the running ones
    assert 38 <= pace.prefetch <= 43 and permits.total == 8 + pace.prefetch


def test_async_runners_count_in_the_pace_but_not_in_the_bounds() -> None:
    permits = Permits(8 + 100 + 16)  # 8 threads, 100 coroutines, the first prefetch
    pace = Pace(permits, concurrency=8, runners=108)
    for _ in range(Pace.EVERY):
        pace.ran(40.0)  # 108 x 20 / 40 = 54 (8 threads alone would keep 16)
    assert pace.prefetch == 54 and permits.total == 8 + 100 + 54


def test_a_waiting_taker_is_woken_by_a_give() -> None:
    permits = Permits(1)
    assert permits.take(1, timeout_s=0) == 1
    got: list[int] = []
    taker = threading.Thread(target=lambda: got.append(permits.take(1, timeout_s=30)))
    taker.start()
    permits.give(1)
    taker.join(30)
    assert got == [1]


def test_linger_waits_for_a_bulk_refill_and_settles_for_less_when_none_comes() -> None:
    permits = Permits(8)
    assert permits.take(8, timeout_s=0) == 8
    permits.give(1)
    got: list[int] = []
    lingering = threading.Event()

    def take() -> None:
        lingering.set()
        got.append(permits.take(8, timeout_s=30, linger_s=30))

    taker = threading.Thread(target=take)
    taker.start()
    lingering.wait(30)
    permits.give(3)  # half of all permits (4) now free: the linger ends with all four
    taker.join(30)
    assert got == [4]
    assert permits.take(8, timeout_s=0, linger_s=0) == 0


# -- Timer and Heartbeat on a manual clock ---------------------------------------------------


def _work(message_id: str, due_ms: int, timeout_ms: int = 10_000) -> Work:
    when = datetime.fromtimestamp(due_ms / 1000, tz=UTC)
    message = Message(
        id=message_id,
        queue="q",
        task="t",
        chain=message_id,
        scheduled_at=when,
        enqueued_at=when,
    )
    claim = Claim(message_id, "q", None, b"", "token", 1, due_ms, due_ms + timeout_ms, timeout_ms)
    return Work(claim, message)


def _timer(clock: ManualClock, capacity: int = 10) -> tuple[Timer, list[Work], Permits]:
    submitted: list[Work] = []
    permits = Permits(4)
    timer = Timer(
        clock.now_ms, permits, submitted.extend, lambda _: None, threading.Event(), capacity
    )
    return timer, submitted, permits


def test_the_timer_fires_a_parked_claim_when_the_clock_reaches_its_due_time() -> None:
    clock = ManualClock(START)
    timer, _, _ = _timer(clock)
    early, late = _work("early", START + 30), _work("late", START + 900)
    assert timer.park(late, START + 900) and timer.park(early, START + 30)
    assert not timer.park(_work("due", START), START), "an already due claim is not parked"
    clock.advance(29)
    assert timer.fire_due() == []
    clock.advance(1)
    assert timer.fire_due() == [early]
    clock.advance(10_000)
    assert timer.fire_due() == [late]


def test_the_timer_has_room_for_its_capacity_only() -> None:
    clock = ManualClock(START)
    timer, _, _ = _timer(clock, capacity=2)
    timer.park(_work("a", START + 10), START + 10)
    assert timer.has_room()
    timer.park(_work("b", START + 20), START + 20)
    assert not timer.has_room()
    clock.advance(10)
    timer.fire_due()
    assert timer.has_room()


def test_the_timer_thread_submits_on_time_with_a_forced_permit_and_releases_on_stop() -> None:
    clock = ManualClock(START)
    submitted: list[Work] = []
    released: list[Work] = []
    permits = Permits(1)
    permits.take(1, timeout_s=0)  # every slot busy: the fired claim must still run
    stopping = threading.Event()
    fired = threading.Event()

    def submit(works: list[Work]) -> None:
        submitted.extend(works)
        fired.set()

    timer = Timer(clock.now_ms, permits, submit, released.extend, stopping, 10)
    soon, never = _work("soon", START + 50), _work("never", START + 3_600_000)
    soon.holds_permit = never.holds_permit = False
    timer.park(soon, START + 50)
    timer.park(never, START + 3_600_000)
    thread = threading.Thread(target=timer.run)
    thread.start()
    clock.advance(50)
    timer.wake()
    assert fired.wait(30)
    assert submitted == [soon] and soon.holds_permit
    permits.give(1)
    assert permits.take(1, timeout_s=0) == 0, "the fired claim's permit was forced into debt"
    stopping.set()
    timer.wake()
    thread.join(30)
    assert released == [never] and submitted == [soon]
    late = _work("late", START + 3_600_000)
    assert not timer.park(late, START + 3_600_000), (
        "after the last drain a claim is not parked (it would be held until the grace ends); "
        "the consumer hands it to the pool, which releases it"
    )


@pytest.fixture
def backend(tmp_path: Path) -> Backend:
    return SQLiteBackend(str(tmp_path / "hb.db"), clock=ManualClock(START))


def test_the_heartbeat_extends_only_leases_past_half_their_length(backend: Backend) -> None:
    clock = backend.store._clock  # type: ignore[attr-defined]
    assert isinstance(clock, ManualClock)
    backend.messages.enqueue(
        [
            Envelope(f"m{i}", "q", None, 0, START, timeout, b"{}")
            for i, timeout in ((1, 1000), (2, 60_000))
        ]
    )
    claims = {c.id: c for c in backend.leases.claim("q", 10).claims}
    holdings = Holdings()
    works = {i: Work(c, _work(i, START).message) for i, c in claims.items()}
    for work in works.values():
        holdings.add(work)
    beat = Heartbeat(backend, holdings, clock.now_ms)
    clock.advance(400)
    beat.beat()
    assert holdings.deadline(works["m1"]) == START + 1000, "not yet half way: left alone"
    clock.advance(200)  # 600 ms into a 1 s lease
    beat.beat()
    assert holdings.deadline(works["m1"]) == START + 600 + 1000
    assert holdings.deadline(works["m2"]) == START + 60_000
    clock.advance(900)  # the old deadline has passed; the extended one has not
    assert backend.leases.requeue_expired("q") == 0
    assert backend.leases.ack([(works["m1"].claim, None)]) == [True]


def test_the_heartbeat_forgets_nothing_when_a_lease_was_lost(backend: Backend) -> None:
    clock = backend.store._clock  # type: ignore[attr-defined]
    backend.messages.enqueue([Envelope("m", "q", None, 0, START, 1000, b"{}")])
    (claim,) = backend.leases.claim("q", 10).claims
    assert backend.messages.delete("m", "q")
    holdings = Holdings()
    work = Work(claim, _work("m", START).message)
    holdings.add(work)
    clock.advance(700)
    beat = Heartbeat(backend, holdings, clock.now_ms)
    beat.beat()
    assert holdings.deadline(work) == START + 1000, "a lost lease is not recorded as extended"
    beat.beat()  # still held a beat later: lost
    assert holdings.expiring(clock.now_ms()) == [], "a lost lease is not extended again"
    assert not holdings.empty(), "the settle, refused by the fence, removes it"


def test_an_extension_refused_because_the_ack_came_first_is_no_lost_lease(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """Over a slow network an ack may be on its way as the heartbeat extends the same
    lease: the backend refuses the extension (the message is gone), and the settler then
    removes the work. That is not a lost lease."""
    clock = backend.store._clock  # type: ignore[attr-defined]
    backend.messages.enqueue([Envelope("m", "q", None, 0, START, 1000, b"{}")])
    (claim,) = backend.leases.claim("q", 10).claims
    holdings = Holdings()
    work = Work(claim, _work("m", START).message)
    holdings.add(work)
    clock.advance(700)
    assert backend.leases.ack([(claim, None)]) == [True]  # it reaches the backend first
    beat = Heartbeat(backend, holdings, clock.now_ms)
    with caplog.at_level("WARNING", logger="tickwork.worker"):
        beat.beat()  # refused
        holdings.remove([work])  # the ack's answer reaches the settler
        beat.beat()
    assert "was lost" not in caplog.text


def test_the_heartbeat_extends_earlier_when_extensions_are_slow(backend: Backend) -> None:
    """Over a slow network an extension takes a while: leases are then extended while
    less than three of those (and a beat) remain, even if more than half is left."""
    clock = backend.store._clock  # type: ignore[attr-defined]
    backend.messages.enqueue([Envelope("m1", "q", None, 0, START, 2000, b"{}")])
    (first,) = backend.leases.claim("q", 10).claims
    holdings = Holdings()
    holdings.add(Work(first, _work("m1", START).message))
    extend = backend.leases.extend

    def slow_extend(claims: Any, lease_ms: int) -> list[bool]:
        time.sleep(0.3)  # a round trip of a slow network, in real time
        return extend(claims, lease_ms)

    backend.leases.extend = slow_extend  # type: ignore[method-assign]
    beat = Heartbeat(backend, holdings, clock.now_ms)
    clock.advance(1100)  # m1 past half its 2 s lease: extended, slowly
    beat.beat()
    backend.messages.enqueue([Envelope("m2", "q", None, 0, START + 1100, 2000, b"{}")])
    (second,) = backend.leases.claim("q", 10).claims
    late = Work(second, _work("m2", START).message)
    holdings.add(late)
    clock.advance(950)  # 1,050 ms of 2 s left: more than half, less than 3 x 300 + 250 ms
    beat.beat()
    assert holdings.deadline(late) == START + 2050 + 2000, "extended early"
