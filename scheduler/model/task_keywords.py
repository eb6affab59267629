"""The options a task is registered with, listed once: ``@app.task(**TaskKeywords)`` takes
them, a ``TaskClass`` sets them as class attributes of the same names, and
``TaskRegistry`` checks them into a ``TaskOptions``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Required, TypedDict

from tickwork.scheduler.model.debounce import Debounce
from tickwork.scheduler.model.limits import ConcurrencyLimit, LimitKey, RateLimit
from tickwork.scheduler.model.retry import RetryPolicy


class TaskKeywords(TypedDict, total=False):
    """What a task may set (every one optional).

    - ``name``: the task's name (default ``module.function``).
    - ``queue``: the queue its messages go to (default the app's ``default_queue``).
    - ``retries``: extra attempts after an exception (exponential backoff from 1 s,
      doubling, capped at 5 min, jittered); ``retry``: a ``RetryPolicy`` instead.
    - ``retry_on``: only these exception types are retried (the others are poisoned at
      once); ``dont_retry_on``: these are never retried. The poison record names the rule.
      A handler may also ``raise Retry(delay)`` to choose its own delay.
    - ``timeout``: lease length in seconds, kept alive by heartbeats while the handler runs.
    - ``time_limit``: a run still going this many seconds after it started is stopped
      (``TimeLimitExceeded``, a failure retried or poisoned like any other);
      ``soft_time_limit``: before that, a sync run gets ``SoftTimeLimitExceeded`` raised in
      it once, which it may catch to stop cleanly.
    - ``priority``: higher runs first among messages due together.
    - ``max_wait``: a message still waiting this long (a ``timedelta`` or seconds) after
      its due time is promoted ahead of every priority, so a steady stream of higher
      priorities cannot starve it.
    - ``unique_for``: after a keyed message succeeds, its key stays taken this long
      (enqueueing it again is ignored or a conflict, per ``on_conflict``).
    - ``concurrency_limit``: at most this many run at once across every worker (an int, or
      a ``ConcurrencyLimit`` several tasks share); ``rate_limit``: at most this many start
      per period across every worker (``"100/m"``, ``"5/s"``, ``"10/30s"``, or a
      ``RateLimit`` several tasks share); both per value of ``limit_key`` (a parameter
      name, or a function of the arguments) when given; the rest wait, stored.
    - ``throttle``: ``(count, period)``: at most ``count`` calls run per ``period`` (per
      value of ``limit_key``); the calls over it are not run and each is recorded in the
      poison store as ``throttled`` (a ``rate_limit`` delays them instead; a shared one
      that drops is ``RateLimit(..., excess="drop")``). A task has one or the other.
    - ``fair_key`` (a parameter name, or a function of the arguments): ready messages with
      different values of it take turns within a priority, so one value that floods the
      queue does not hold back the others.
    - ``keep_result``: keep what it returns (True: for the setting ``result_retention_s``;
      a ``timedelta``: that long), readable by the handle ``delay()`` returns.
    - ``history``: record each attempt of its one-off messages in the ledger
      (``app.run_history(id)``; a keyed schedule's runs are always recorded).
    - ``expires``: a message not started this long after its time is not run, and is
      recorded as expired.
    - ``on_events``: an event pattern (or several) whose events each run it once, the
      ``Event`` its one argument (``app.emit``).
    - ``debounce``: a ``timedelta`` (or a ``Debounce`` with ``max``, ``key`` and
      ``keep``): calls within that quiet period collapse into one run, with the last
      call's arguments, due a period after the last call (at most ``max`` after the first).
    - ``durable``: its handler calls steps, sleeps and recorded values through
      ``current_run()`` (``step``, ``sleep``, ``now``...), each journaled: a run started
      again resumes where it was instead of doing them again.
    - ``batch_size``, ``batch_timeout``, ``batch_key``: a batched task's, whose handler
      runs once with a list of its calls (``BatchKeywords``).
    - ``aliases``: names the task was registered under before (it was renamed or moved to
      another module): messages stored under them run it.
    """

    name: str | None
    queue: str | None
    retries: int
    retry: RetryPolicy | None
    retry_on: Sequence[type[BaseException]]
    dont_retry_on: Sequence[type[BaseException]]
    timeout: float | None
    time_limit: float | None
    soft_time_limit: float | None
    priority: int
    max_wait: timedelta | float | None
    unique_for: timedelta | None
    concurrency_limit: int | ConcurrencyLimit | None
    rate_limit: str | RateLimit | None
    throttle: tuple[int, timedelta] | None
    limit_key: LimitKey | None
    fair_key: LimitKey | None
    keep_result: bool | timedelta | None
    history: bool
    expires: timedelta | None
    on_events: str | Sequence[str] | None
    aliases: Sequence[str]
    debounce: timedelta | Debounce | None
    durable: bool


class BatchKeywords(TaskKeywords, total=False):
    """A batched task's options: ``TaskKeywords`` and these (``batch_size`` required).

    - ``batch_size``: the worker collects the task's calls and runs the handler once with a
      list of up to this many (``BatchedCall``s), or with what came within
      ``batch_timeout`` (a ``timedelta`` or seconds; default 1 s) of the first; per value
      of ``batch_key`` (a keyword argument's name, or a function of the call's arguments).
      Each call succeeds, is retried or fails by what the handler reports for it.
    """

    batch_size: Required[int]
    batch_timeout: timedelta | float | None
    batch_key: LimitKey | None


#: every option's name, in the order above
TASK_KEYWORDS: tuple[str, ...] = tuple(BatchKeywords.__annotations__)
