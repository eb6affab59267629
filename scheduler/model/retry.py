"""Retry as data: a policy plus one pure function, ``decide``, from (policy, attempt, error)
to a decision: retry after a delay, or give up (the poison queue)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field


class RetryPolicy(BaseModel):
    """Exponential backoff: ``base_s * factor**(attempt-1)``, capped, with full jitter.

    ``retries`` is how many times a failing message runs again after its first attempt;
    after that it goes to the poison queue.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    retries: int = Field(default=0, ge=0)
    base_s: float = Field(default=1.0, gt=0)
    factor: float = Field(default=2.0, ge=1)
    cap_s: float = Field(default=300.0, gt=0)
    jitter: bool = True
    #: only these exceptions are retried (empty: every one)
    retry_on: tuple[type[BaseException], ...] = ()
    #: these exceptions are never retried: poisoned at once
    dont_retry_on: tuple[type[BaseException], ...] = ()

    def rule_against(self, error: BaseException) -> str | None:
        """The rule that says ``error`` is not retried (``dont_retry_on`` or ``retry_on``),
        or None when the policy's retries apply to it."""
        if self.dont_retry_on and isinstance(error, self.dont_retry_on):
            return "dont_retry_on"
        if self.retry_on and not isinstance(error, self.retry_on):
            return "retry_on"
        return None

    @property
    def max_attempts(self) -> int:
        return self.retries + 1

    def delay_s(self, attempt: int, rng: random.Random | None = None) -> float | None:
        """Seconds to wait before the next attempt after failed attempt number ``attempt``
        (1-based), or ``None`` when the message has used its attempts and is poison."""
        if attempt >= self.max_attempts:
            return None
        ceiling = min(self.cap_s, self.base_s * self.factor ** (attempt - 1))
        if not self.jitter:
            return ceiling
        # "equal jitter": at least half the backoff, so retries never hot-loop
        return ceiling / 2 + (rng or random).uniform(0, ceiling / 2)


@dataclass(frozen=True, slots=True)
class RetryAfter:
    """Run the message again after ``delay_s`` seconds."""

    delay_s: float


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Send the message to the poison queue: ``exhausted`` (no attempts left) or
    ``not_retryable`` (it can never run, e.g. its arguments no longer validate)."""

    reason: str


RetryDecision = RetryAfter | GiveUp


def decide(
    policy: RetryPolicy, attempt: int, retryable: bool = True, rng: random.Random | None = None
) -> RetryDecision:
    """What to do after attempt number ``attempt`` (1-based) of a message failed.

    The policy is the one the worker's code registers now, not the one the message was
    enqueued with: after a deploy that changes a task's retries, messages already queued
    follow the new code (as Celery's ``max_retries`` does).
    """
    if not retryable:
        return GiveUp("not_retryable")
    delay = policy.delay_s(attempt, rng)
    return GiveUp("exhausted") if delay is None else RetryAfter(delay)
