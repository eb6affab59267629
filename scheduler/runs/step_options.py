"""A durable step's own options: its retry policy (``retry=``: a count or a
``RetryPolicy``, the task's by default) and its time limit (``time_limit=``).

Past its time limit a step fails with ``StepTimeLimitExceeded``, retried by the step's
policy like any failure. A sync step with a limit runs in a thread of its own that the
run waits for up to the limit; past it the thread is abandoned (it runs on unobserved,
as the thread pool abandons a handler past its hard limit), so a step with a limit
should be one whose late end does no harm. An ``async def`` step is cancelled at its
limit. Each execution of a step is a span of its own when traced."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import math
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from tickwork.scheduler.model.retry import RetryPolicy
from tickwork.scheduler.runs.tracing import step_span


class StepTimeLimitExceeded(Exception):
    """A durable step ran past its ``time_limit``: a failure of the step, retried by its
    policy."""


def limit_seconds(time_limit: float | timedelta | None) -> float | None:
    """A step's ``time_limit`` in seconds (None: none); not a positive number is a
    ``ValueError``."""
    if time_limit is None:
        return None
    seconds = time_limit.total_seconds() if isinstance(time_limit, timedelta) else time_limit
    if isinstance(seconds, bool) or not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"a step's time_limit is a positive number of seconds, not {time_limit!r}")
    return float(seconds)


def call_within(
    step: str,
    step_id: str,
    limit_s: float | None,
    fn: Callable[..., Any],
    *args: Any,
    **kwargs: Any,
) -> Any:
    """``fn(*args, **kwargs)`` in the step's span (``step_span``), given up after
    ``limit_s`` (in a thread of its own, with the caller's context: ``current_run()``
    and the span work inside it)."""
    with step_span(step, step_id):
        return _call_within(step, limit_s, fn, *args, **kwargs)


def _call_within(
    step: str, limit_s: float | None, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> Any:
    if limit_s is None:
        return fn(*args, **kwargs)
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome["value"] = context.run(fn, *args, **kwargs)
        except BaseException as err:  # handed to the waiting run
            outcome["error"] = err

    thread = threading.Thread(target=run, name=f"tickwork-step-{step}", daemon=True)
    thread.start()
    thread.join(limit_s)
    if thread.is_alive():
        raise StepTimeLimitExceeded(_past(step, limit_s, "abandoned: it runs on unobserved"))
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


async def awaited_within(
    step: str,
    step_id: str,
    limit_s: float | None,
    fn: Callable[..., Any],
    *args: Any,
    **kwargs: Any,
) -> Any:
    """``fn(*args, **kwargs)`` in the step's span, awaited if it gives an awaitable,
    cancelled after ``limit_s``."""
    with step_span(step, step_id):
        return await _awaited_within(step, limit_s, fn, *args, **kwargs)


async def _awaited_within(
    step: str, limit_s: float | None, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> Any:
    value = fn(*args, **kwargs)
    if not inspect.isawaitable(value):
        return value
    if limit_s is None:
        return await value
    try:
        async with asyncio.timeout(limit_s):
            return await value
    except TimeoutError:
        raise StepTimeLimitExceeded(_past(step, limit_s, "cancelled")) from None


def _past(step: str, limit_s: float, what: str) -> str:
    return f"step {step!r} ran past its time limit of {limit_s:g} s ({what})"


def step_policy(retry: int | RetryPolicy | None, default: RetryPolicy) -> RetryPolicy:
    """A step's retry policy: ``retry`` (a count of retries, or a policy), else the
    task's ``default``."""
    if retry is None:
        return default
    if isinstance(retry, RetryPolicy):
        return retry
    if isinstance(retry, bool) or not isinstance(retry, int) or retry < 0:
        raise ValueError(f"a step's retry is a count of retries or a RetryPolicy, not {retry!r}")
    return RetryPolicy(retries=retry)
