"""The concurrency-limit part of the backend contract (slots with leases, waiters, waking,
releasing to a later time), run against every backend."""

from __future__ import annotations

import uuid

from tests.support.backends import BackendHarness
from tickwork.scheduler.backends import Envelope, SlotRequest, State, Waiter


def _limit() -> str:
    return f"crm:{uuid.uuid4().hex[:8]}"  # limits are global to a backend: one per test


def _request(limit: str, message_id: str, capacity: int = 2, lease_ms: int = 60_000) -> SlotRequest:
    return SlotRequest(limit, capacity, message_id, "q", None, lease_ms)


def _enqueue(h: BackendHarness, message_id: str, due_in_ms: int = 0) -> None:
    envelope = Envelope(message_id, "q", None, 0, h.now_ms() + due_in_ms, 5000, b"body")
    h.backend.messages.enqueue([envelope])


def test_slots_are_granted_up_to_capacity_then_refused_with_when_to_look_again(
    harness: BackendHarness,
) -> None:
    b, limit = harness.backend, _limit()
    before = b.now_ms()
    answers = b.limits.acquire(
        [_request(limit, "m1"), _request(limit, "m2"), _request(limit, "m3")]
    )
    assert answers[:2] == [None, None]
    retry_at = answers[2]
    assert retry_at is not None and before + 59_000 <= retry_at <= b.now_ms() + 61_000
    assert b.limits.acquire([_request(limit, "m1")]) == [None], "a holder renews its slot"
    assert b.limits.usage([limit]) == {limit: (2, 0)}
    other = _limit()
    assert b.limits.acquire([_request(other, "m3")]) == [None], "limits do not share slots"


def test_a_released_slot_hands_itself_to_the_longest_waiter(harness: BackendHarness) -> None:
    b, limit = harness.backend, _limit()
    assert b.limits.acquire([_request(limit, "m1", capacity=1)]) == [None]
    assert b.limits.acquire([_request(limit, "w1", capacity=1)])[0] is not None
    assert b.limits.wait(_request(limit, "w1", capacity=1)) is False
    assert b.limits.wait(_request(limit, "w2", capacity=1)) is False
    assert b.limits.wait(_request(limit, "w1", capacity=1)) is False, "joins the line once"
    assert b.limits.usage([limit]) == {limit: (1, 2)}
    assert b.limits.release([(limit, "m1")]) == [Waiter(limit, "q", None, "w1")]
    assert b.limits.release([(limit, "m1")]) == [], "a slot not held frees nobody"
    assert b.limits.usage([limit]) == {limit: (0, 1)}
    assert b.limits.wait(_request(limit, "w3", capacity=1)) is True, "a slot is free now"
    assert b.limits.pop_waiters(limit, 5) == [
        Waiter(limit, "q", None, "w2"),
        Waiter(limit, "q", None, "w3"),
    ]
    assert b.limits.pop_waiters(limit, 5) == []


def test_a_slot_whose_lease_ran_out_is_free_again(harness: BackendHarness) -> None:
    b, limit = harness.backend, _limit()
    assert b.limits.acquire([_request(limit, "dead", capacity=1, lease_ms=300)]) == [None]
    assert b.limits.acquire([_request(limit, "next", capacity=1)])[0] is not None
    harness.advance(400)  # sleeps on a server, moves the clock on SQLite
    assert b.limits.acquire([_request(limit, "next", capacity=1)]) == [None]
    assert b.limits.usage([limit]) == {limit: (1, 0)}


def test_extending_a_slot_keeps_it_past_its_first_lease(harness: BackendHarness) -> None:
    b, limit = harness.backend, _limit()
    assert b.limits.acquire([_request(limit, "long", capacity=1, lease_ms=400)]) == [None]
    b.limits.extend([(limit, "long")], 60_000)
    harness.advance(500)
    assert b.limits.acquire([_request(limit, "other", capacity=1)])[0] is not None


def test_release_to_a_later_time_does_not_count_an_attempt_and_wake_brings_it_back(
    harness: BackendHarness,
) -> None:
    b = harness.backend
    _enqueue(harness, "w")
    (claim,) = b.leases.claim("q", 10).claims
    assert claim.attempt == 1
    assert b.leases.release([claim], due_ms=b.now_ms() + 60_000) == 1
    stored = b.messages.get("w")
    assert stored is not None and stored.state is State.SCHEDULED
    assert b.leases.claim("q", 10).claims == [], "it waits until its new due time"
    assert b.limits.wake([Waiter("l", "q", None, "w"), Waiter("l", "q", None, "gone")]) == [
        True,
        False,
    ]
    (again,) = b.leases.claim("q", 10).claims
    assert again.id == "w" and again.attempt == 1, "waiting was not an attempt"
    assert again.due_ms <= b.now_ms()
    assert b.limits.wake([Waiter("l", "q", None, "w")]) == [False], "a running message is not woken"
    assert b.leases.release([again], due_ms=None) == 1
    assert b.limits.wake([Waiter("l", "q", None, "w")]) == [True], (
        "waking a due message is harmless"
    )
    (third,) = b.leases.claim("q", 10).claims
    assert third.attempt == 1
    assert b.leases.claim("q", 10).claims == [], "woken twice, it was stored once"


def test_a_keyed_waiter_is_found_in_its_shard(harness: BackendHarness) -> None:
    b = harness.backend
    envelope = Envelope("kw", "q", "tenant-7", 0, harness.now_ms(), 5000, b"body")
    b.messages.enqueue([envelope])
    (claim,) = b.leases.claim("q", 10).claims
    b.leases.release([claim], due_ms=b.now_ms() + 60_000)
    assert b.limits.wake([Waiter("l", "q", "tenant-7", "kw")]) == [True]
    assert [c.id for c in b.leases.claim("q", 10).claims] == ["kw"]


def test_a_waiter_that_gets_a_slot_leaves_the_line(harness: BackendHarness) -> None:
    b, limit = harness.backend, _limit()
    assert b.limits.acquire([_request(limit, "h", capacity=1)]) == [None]
    assert b.limits.wait(_request(limit, "w", capacity=1)) is False
    b.limits.release([(limit, "h")])  # hands the slot to "w" (the caller would wake it)
    b.limits.wait(_request(limit, "w", capacity=1))  # back in line: woken by its fallback
    assert b.limits.acquire([_request(limit, "w", capacity=1)]) == [None]
    if harness.name != "cassandra":  # Cassandra keeps the entry; a releaser skips it
        assert b.limits.usage([limit]) == {limit: (1, 0)}
    assert b.limits.release([(limit, "w")]) in ([], [Waiter(limit, "q", None, "w")])


def test_ack_releasing_acks_and_gives_slots_back_in_one_step(harness: BackendHarness) -> None:
    b, limit = harness.backend, _limit()
    _enqueue(harness, "run")
    (claim,) = b.leases.claim("q", 10).claims
    assert b.limits.acquire([_request(limit, "run", capacity=1)]) == [None]
    assert b.limits.wait(_request(limit, "next", capacity=1)) is False
    acked, woken = b.leases.ack_releasing([(claim, None)], [(limit, "run")])
    assert acked == [True] and woken == [Waiter(limit, "q", None, "next")]
    assert b.messages.get("run") is None and b.limits.usage([limit]) == {limit: (0, 0)}
    assert b.leases.ack_releasing([(claim, None)], [(limit, "run")]) == ([False], [])


def _limited(h: BackendHarness, message_id: str, limit: str, due_in_ms: int = 0) -> None:
    due = h.now_ms() + due_in_ms
    h.backend.messages.enqueue(
        [Envelope(message_id, "q", None, 0, due, 5000, b"body", limit=limit)]
    )


#: does the backend take slots in the claim itself (else the worker asks ``acquire_slots``)
TAKES_SLOTS_IN_CLAIM = {"redis"}


def test_slots_taken_by_a_claim_and_by_acquire_slots_stay_within_capacity(
    harness: BackendHarness,
) -> None:
    b, limit = harness.backend, _limit()  # a limit name with a colon: "crm:<hex>"
    acme, globex = f"{limit}:acme", f"{limit}:globex"
    for n in range(3):
        _limited(harness, f"m{n}", acme)
    _limited(harness, "other", globex)
    _enqueue(harness, "free")
    claims = b.leases.claim("q", 10, slots={limit: 2, "unrelated": 9}).claims
    assert len(claims) == 5
    took = {c.id: c.slot for c in claims if c.slot is not None}
    if harness.name in TAKES_SLOTS_IN_CLAIM:
        assert took == {"m0": acme, "m1": acme, "other": globex}
    limits = {"m0": acme, "m1": acme, "m2": acme, "other": globex}
    rest = [c for c in claims if c.slot is None and c.id in limits]
    answers = b.limits.acquire([_request(limits[c.id], c.id) for c in rest])
    holders = set(took) | {c.id for c, a in zip(rest, answers, strict=True) if a is None}
    assert len(holders & {"m0", "m1", "m2"}) == 2 and "other" in holders
    assert b.limits.usage([acme, globex]) == {acme: (2, 0), globex: (1, 0)}


def test_a_claim_takes_no_slot_for_a_message_not_due_yet_nor_an_unnamed_limit(
    harness: BackendHarness,
) -> None:
    b, limit = harness.backend, _limit()
    _limited(harness, "later", f"{limit}:acme", due_in_ms=30_000)
    _limited(harness, "unnamed", f"{_limit()}:acme")
    claims = b.leases.claim("q", 10, lookahead_ms=60_000, slots={limit: 2}).claims
    assert sorted(c.id for c in claims) == ["later", "unnamed"]
    assert all(c.slot is None for c in claims)
    assert b.limits.usage([f"{limit}:acme"]) == {f"{limit}:acme": (0, 0)}


def test_a_waiter_claimed_with_its_slot_leaves_the_line(harness: BackendHarness) -> None:
    b, limit = harness.backend, _limit()
    key = f"{limit}:acme"
    _limited(harness, "w", key)
    assert b.limits.wait(_request(key, "w", capacity=1)) is True, "nobody holds a slot"
    (claim,) = b.leases.claim("q", 10, slots={limit: 1}).claims
    if claim.slot is None:  # taken by the worker's call instead
        assert b.limits.acquire([_request(key, "w", capacity=1)]) == [None]
    if harness.name != "cassandra":  # Cassandra keeps the entry; a releaser skips it
        assert b.limits.usage([key]) == {key: (1, 0)}
    acked, woken = b.leases.ack_releasing([(claim, None)], [(key, "w")])
    assert acked == [True] and woken in ([], [Waiter(key, "q", None, "w")])
    assert b.limits.usage([key]) == {key: (0, 0)}


def test_the_limit_key_is_kept_through_release_retry_and_reads(harness: BackendHarness) -> None:
    b, limit = harness.backend, _limit()
    key = f"{limit}:acme"
    _limited(harness, "r", key)
    (claim,) = b.leases.claim("q", 10).claims
    assert claim.slot is None, "no slots asked for, none taken"
    b.leases.release([claim])
    (claim,) = b.leases.claim("q", 10).claims
    b.leases.retry(claim, b.now_ms(), "boom")
    stored = b.messages.get("r")
    assert stored is not None and stored.envelope.limit in (key, None)
    (claim,) = b.leases.claim("q", 10, slots={limit: 1}).claims
    if harness.name in TAKES_SLOTS_IN_CLAIM:
        assert claim.slot == key and stored.envelope.limit == key
