"""Running one handler, in a pool thread or a pool process, and describing what happened."""

from __future__ import annotations

import asyncio
import inspect
import time
import traceback
from collections.abc import Awaitable
from enum import StrEnum
from typing import Any, NamedTuple, Protocol

from tickwork.scheduler import Aborted, InvalidMessage, UnknownTask
from tickwork.scheduler.hooks import notify
from tickwork.scheduler.model.tasks import TaskFunction
from tickwork.scheduler.runs.context import RunContext, TimeLimitExceeded, enter, leave
from tickwork.scheduler.runs.durable_errors import DurableRunError, NonDeterminismError, Suspended
from tickwork.scheduler.runs.results import encode_value
from tickwork.scheduler.runs.skip import SKIPPED, Skip
from tickwork.scheduler.runs.snooze import Retry, Snooze
from tickwork.scheduler.runs.tracing import NO_SPAN, handler_span
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.pools.time_limits import over_limit_message


class Verdict(StrEnum):
    ACK = "ack"  # the handler returned
    REDELIVER = "redeliver"  # the handler returned False: no ack, due again after its lease
    FAIL = "fail"  # the handler raised: retry with backoff, or poison
    POISON = "poison"  # the message can never run (unknown task, arguments no longer valid)
    ABORTED = "aborted"  # the run was aborted (app.abort, or the handler raised Aborted)
    EXPIRED = "expired"  # not started before it expired: never run
    SNOOZED = "snoozed"  # the handler returned Snooze: due again later, attempt not counted
    MISSED = "missed"  # an occurrence older than its catch_up_window when due here: never run
    THROTTLED = "throttled"  # over its task's throttle (``excess="drop"``): never run
    #: its task is not registered here: given back for a worker that knows it (``snooze_s``
    #: set), or poisoned once it waited past the grace (``workers/admission/unknown_tasks.py``)
    UNKNOWN_TASK = "unknown_task"


class HandlerResult(NamedTuple):
    """How a run ended (a named tuple: one is made per run, in half a dataclass's time)."""

    verdict: Verdict
    error_type: str = ""
    error: str = ""
    traceback: str = ""
    duration_ms: float = 0.0
    value: bytes | None = None  # what it returned, as JSON, when its task keeps results
    snooze_s: float = 0.0  # a snoozed run: how long until it is due again
    #: a failure the task's policy does not retry: the rule that says so (``retry_on``,
    #: ``dont_retry_on``), named in its poison record; an acked run that was skipped
    #: (``Skip``, a graph step's condition): ``"skipped"``
    rule: str = ""


class LimitGuard(Protocol):
    """What stops a sync handler at its time limit (``workers/pools/time_limits.py``): opened
    right around the handler's call only."""

    def enter(self) -> None: ...

    def leave(self) -> None: ...


def run_handler(
    app: WorkerApp,
    task_name: str,
    args: list[Any],
    kwargs: dict[str, Any],
    run: RunContext,
    guard: LimitGuard | None = None,
) -> HandlerResult:
    """Run a task's handler, with ``run`` as its ``current_run()``, and classify the
    outcome. Never raises. ``guard``: the run's time limit, around a sync handler.

    An ``async def`` handler that reaches this synchronous path (a process pool, or a
    thread pool without an event loop) runs to completion here on a fresh event loop,
    under its timeout: a coroutine is never acknowledged without having run."""
    span = handler_span(run.info, app.settings)
    if span is NO_SPAN:  # nothing traced: no span to enter or outcome to record
        return _run_handler(app, task_name, args, kwargs, run, guard)
    with span as outcome:
        result = _run_handler(app, task_name, args, kwargs, run, guard)
        outcome(result.verdict.value, result.error_type, result.error)
    return result


def _run_handler(
    app: WorkerApp,
    task_name: str,
    args: list[Any],
    kwargs: dict[str, Any],
    run: RunContext,
    guard: LimitGuard | None,
) -> HandlerResult:
    started = time.perf_counter()
    token = enter(run)
    hooks = app.hooks
    if hooks.before_handler:
        notify(hooks.before_handler, run.info)
    task = None
    try:
        task = app.registry.lookup(task_name)
        if guard is not None and not task.is_async:
            guard.enter()
            try:
                returned = task.run(args, kwargs)
            finally:
                guard.leave()
        else:
            returned = task.run(args, kwargs)
        if returned is not None and inspect.isawaitable(returned):
            returned = asyncio.run(_with_timeout(returned, task.options.timeout_s))
        value = _kept(app, task, returned, run.info.keep_value)
    except TimeLimitExceeded as err:
        if guard is not None:
            guard.leave()  # again, if it landed while the guard was closing
        limit = run.info.time_limit_s or 0.0
        return _failed(TimeLimitExceeded(over_limit_message(limit)), started, err)
    except (UnknownTask, InvalidMessage) as err:
        return HandlerResult(Verdict.POISON, type(err).__name__, str(err), traceback.format_exc())
    except Aborted as err:
        return aborted(str(err), started)
    except Retry as err:
        return _retry(err, started)
    except Skip as err:
        return _skipped(err, started)
    except Suspended as err:
        return _suspended(err, started)
    except NonDeterminismError as err:
        return _failed(err, started, rule=err.reason)
    except Exception as err:
        return _failed(err, started, rule=_rule(task, err))
    finally:
        if hooks.after_handler:
            notify(hooks.after_handler, run.info)
        leave(token)
    return _ended(run, returned, started, value)


async def run_async_handler(
    app: WorkerApp, task_name: str, args: list[Any], kwargs: dict[str, Any], run: RunContext
) -> HandlerResult:
    """Await an ``async def`` handler, with ``run`` as its ``current_run()``, and classify
    the outcome (the caller enforces the timeout). Never raises, except
    ``CancelledError`` when the caller cancels it."""
    with handler_span(run.info, app.settings) as outcome:
        result = await _run_async_handler(app, task_name, args, kwargs, run)
        outcome(result.verdict.value, result.error_type, result.error)
    return result


async def _run_async_handler(
    app: WorkerApp, task_name: str, args: list[Any], kwargs: dict[str, Any], run: RunContext
) -> HandlerResult:
    started = time.perf_counter()
    token = enter(run)
    hooks = app.hooks
    if hooks.before_handler:
        notify(hooks.before_handler, run.info)
    task = None
    try:
        task = app.registry.lookup(task_name)
        returned = task.run(args, kwargs)
        if inspect.isawaitable(returned):
            returned = await returned
        value = _kept(app, task, returned, run.info.keep_value)
    except Aborted as err:
        return aborted(str(err), started)
    except (UnknownTask, InvalidMessage) as err:
        return HandlerResult(Verdict.POISON, type(err).__name__, str(err), traceback.format_exc())
    except Retry as err:
        return _retry(err, started)
    except Skip as err:
        return _skipped(err, started)
    except Suspended as err:
        return _suspended(err, started)
    except NonDeterminismError as err:
        return _failed(err, started, rule=err.reason)
    except Exception as err:
        return _failed(err, started, rule=_rule(task, err))
    finally:
        if hooks.after_handler:
            notify(hooks.after_handler, run.info)
        leave(token)
    return _ended(run, returned, started, value)


def _rule(task: TaskFunction[..., Any] | None, error: BaseException) -> str:
    """The rule that says ``error`` is not retried ("" if none): a durable run that
    cannot go on, or a rule of ``task``'s policy."""
    if isinstance(error, DurableRunError):
        return error.reason
    return "" if task is None else (task.options.retry.rule_against(error) or "")


def _suspended(suspended: Suspended, started: float) -> HandlerResult:
    """A durable run that waits (a sleep, a step's backoff): snoozed until it is due."""
    elapsed = (time.perf_counter() - started) * 1000
    return HandlerResult(
        Verdict.SNOOZED, "Suspended", suspended.why, "", elapsed, snooze_s=suspended.delay_s
    )


def _skipped(request: Skip, started: float) -> HandlerResult:
    """A run whose handler raised ``Skip``: done, without a result (a graph step is
    recorded skipped)."""
    elapsed = (time.perf_counter() - started) * 1000
    return HandlerResult(Verdict.ACK, "Skip", request.reason, "", elapsed, rule=SKIPPED)


def _retry(request: Retry, started: float) -> HandlerResult:
    """A run whose handler raised ``Retry``: snoozed (not an attempt), or with ``counts``
    a failed attempt retried after the delay it asked for."""
    elapsed = (time.perf_counter() - started) * 1000
    why = f"retry requested in {request.delay_s:g} s" + (
        f": {request.reason}" if request.reason else ""
    )
    if not request.counts:
        return HandlerResult(Verdict.SNOOZED, "Retry", why, "", elapsed, snooze_s=request.delay_s)
    return HandlerResult(
        Verdict.FAIL, "Retry", why, traceback.format_exc(), elapsed, snooze_s=request.delay_s
    )


async def _with_timeout(awaitable: Awaitable[Any], timeout_s: float) -> Any:
    """The handler's result; past ``timeout_s`` the coroutine is cancelled and
    ``TimeoutError`` says how long it had."""
    try:
        async with asyncio.timeout(timeout_s):
            return await awaitable
    except TimeoutError:
        raise TimeoutError(f"the handler ran past its timeout of {timeout_s:g} s") from None


def aborted(why: str, started: float | None = None) -> HandlerResult:
    """The result of a run that was aborted."""
    elapsed = 0.0 if started is None else (time.perf_counter() - started) * 1000
    return HandlerResult(Verdict.ABORTED, "Aborted", why, duration_ms=elapsed)


def _failed(
    err: BaseException, started: float, raised: BaseException | None = None, rule: str = ""
) -> HandlerResult:
    """A failed run's result (``raised``: the exception whose traceback it keeps, when
    ``err`` is a clearer one made from it; ``rule``: the retry rule that refuses it)."""
    return HandlerResult(
        Verdict.FAIL,
        type(err).__qualname__,
        str(err),
        traceback.format_exc() if raised is None else "".join(traceback.format_exception(raised)),
        (time.perf_counter() - started) * 1000,
        rule=rule,
    )


def _kept(
    app: WorkerApp, task: TaskFunction[..., Any], returned: Any, needed: bool
) -> bytes | None:
    """What ``returned`` is kept as, if its task keeps results or the value is ``needed``
    (by a chain's next step); a value that cannot be kept raises (the run fails: it is
    retried or poisoned like any failure)."""
    if (
        (task.options.result_retention is None and not needed)
        or returned is False
        or isinstance(returned, Snooze)
    ):
        return None
    most = app.settings.max_payload_bytes
    if task.options.batch is not None:  # a batch's report: each call's result within it
        most *= task.options.batch.size + 1
    return encode_value(returned, most)


def _ended(run: RunContext, returned: Any, started: float, value: bytes | None) -> HandlerResult:
    """How a handler that returned ended: aborted when it had seen its abort (it stopped
    because of it), else by what it returned."""
    if run.abort_seen:
        return aborted(f"message {run.info.message_id} stopped on its abort", started)
    return _returned(returned, started, value)


def _returned(returned: Any, started: float, value: bytes | None) -> HandlerResult:
    elapsed = (time.perf_counter() - started) * 1000
    if returned is False:
        return HandlerResult(Verdict.REDELIVER, duration_ms=elapsed)
    if isinstance(returned, Snooze):
        return HandlerResult(Verdict.SNOOZED, duration_ms=elapsed, snooze_s=returned.delay_s)
    return HandlerResult(Verdict.ACK, duration_ms=elapsed, value=value)
