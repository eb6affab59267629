"""``decide``: from (policy, attempt, error) to retry-after or give-up, as a pure function."""

from __future__ import annotations

import random

import pytest

from tickwork.scheduler.model.retry import GiveUp, RetryAfter, RetryPolicy, decide


def test_no_retries_gives_up_after_the_first_attempt() -> None:
    assert decide(RetryPolicy(), 1) == GiveUp("exhausted")


def test_retries_back_off_exponentially_up_to_the_cap_then_give_up() -> None:
    policy = RetryPolicy(retries=5, base_s=1, factor=3, cap_s=20, jitter=False)
    delays = [decide(policy, attempt) for attempt in range(1, 7)]
    assert delays == [
        RetryAfter(1),
        RetryAfter(3),
        RetryAfter(9),
        RetryAfter(20),
        RetryAfter(20),
        GiveUp("exhausted"),
    ]


def test_jitter_stays_between_half_and_all_of_the_backoff() -> None:
    policy = RetryPolicy(retries=3, base_s=2, factor=2)
    rng = random.Random(1)
    for attempt, ceiling in ((1, 2), (2, 4), (3, 8)):
        for _ in range(200):
            decision = decide(policy, attempt, rng=rng)
            assert isinstance(decision, RetryAfter)
            assert ceiling / 2 <= decision.delay_s <= ceiling


def test_a_message_that_can_never_run_is_not_retried() -> None:
    assert decide(RetryPolicy(retries=9), 1, retryable=False) == GiveUp("not_retryable")


@pytest.mark.parametrize("attempt", [3, 4, 50])
def test_the_current_policy_wins_over_what_the_message_was_enqueued_with(attempt: int) -> None:
    """A deploy lowered retries from 10 to 2: a message past its third attempt gives up,
    whatever ``max_attempts`` it was enqueued with (decide never sees that)."""
    assert decide(RetryPolicy(retries=2), attempt) == GiveUp("exhausted")
    assert isinstance(decide(RetryPolicy(retries=60), attempt), RetryAfter)
