"""Batching into one run: a task registered with ``batch_size=`` gets its calls collected
by the worker and runs once with up to that many of them (or with what came within
``batch_timeout``), per value of ``batch_key`` (``workers/pools/gathering.py`` collects;
``TaskFunction.run`` hands the calls to the handler and returns what it reports for
each, ``report`` here)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic_core import to_json

from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.model.event_names import Event
from tickwork.scheduler.model.limits import LimitKey

#: the most calls one run may take
MAX_BATCH_SIZE = 10_000
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
#: how long the first call of a batch waits for the others when no timeout is given
DEFAULT_TIMEOUT = timedelta(seconds=1)


@dataclass(frozen=True)
class Batching:
    """``size``: the most calls one run takes; ``timeout``: how long the first call
    collected waits for the batch to fill before it runs with what came; ``key``: the name
    of a keyword argument, or a function of the call's arguments, whose value makes the
    batches (calls with different values never run together; None: one per task)."""

    size: int
    timeout: timedelta = DEFAULT_TIMEOUT
    key: LimitKey | None = None

    @property
    def timeout_s(self) -> float:
        return self.timeout.total_seconds()


def batching_of(
    task_name: str,
    size: Any,
    timeout: Any,
    key: Any,
) -> Batching | None:
    """A task's ``batch_size=``, ``batch_timeout=`` and ``batch_key=`` checked (None: not
    batched); a bad one is one ``InvalidMessage`` naming it."""
    if size is None:
        if timeout is not None or key is not None:
            given = "batch_timeout" if timeout is not None else "batch_key"
            raise InvalidMessage(f"task {task_name!r} has a {given} but no batch_size")
        return None
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_BATCH_SIZE:
        raise InvalidMessage(
            f"batch_size of task {task_name!r} must be a whole number from 1 to "
            f"{MAX_BATCH_SIZE}, not {size!r}"
        )
    if isinstance(timeout, int | float) and not isinstance(timeout, bool):
        timeout = timedelta(seconds=timeout)
    if timeout is not None and (not isinstance(timeout, timedelta) or timeout <= timedelta(0)):
        raise InvalidMessage(
            f"batch_timeout of task {task_name!r} must be a positive timedelta (or a number "
            f"of seconds), not {timeout!r}"
        )
    if key is not None and not isinstance(key, str) and not callable(key):
        raise InvalidMessage(
            f"batch_key of task {task_name!r} must be a keyword argument's name or a "
            f"function of the call's arguments, not {key!r}"
        )
    return Batching(size, timeout or DEFAULT_TIMEOUT, key)


def check_batched_handler(task_name: str, signature: inspect.Signature) -> None:
    """A batched task's handler takes the list of calls as its one argument."""
    parameters = list(signature.parameters.values())
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in parameters if p.default is p.empty and p.kind not in _VARIADIC]
    if not positional or len(required) > 1:
        raise InvalidMessage(
            f"task {task_name!r} has a batch_size, so its handler takes the list of calls "
            "as its one argument (def handler(calls: list[BatchedCall]))"
        )


def batch_value(
    task_name: str, batching: Batching, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> str | None:
    """The value of a call's ``batch_key`` (None: the task has none), from its stored
    (JSON) arguments; ``InvalidMessage`` when it cannot be had."""
    key = batching.key
    if key is None:
        return None
    if isinstance(key, str):
        if key not in kwargs:
            raise InvalidMessage(
                f"task {task_name!r} was called without the keyword argument {key!r}, its batch_key"
            )
        value = kwargs[key]
    else:
        try:
            value = key(*args, **kwargs)
        except Exception as err:
            raise InvalidMessage(
                f"the batch_key function of task {task_name!r} failed: {type(err).__name__}: {err}"
            ) from err
    if value is None or isinstance(value, dict | list | tuple | set):
        raise InvalidMessage(
            f"the batch_key of task {task_name!r} must give a string or a number, not {value!r}"
        )
    return str(value)


class BatchedCall:
    """One call of a batched task, as its handler gets it in the list: ``id`` (its
    message's), ``args``, ``kwargs`` (as stored: JSON values), ``attempt`` and ``key``
    (its ``batch_key``'s value, or None). Every call the handler does not report on
    succeeds when it returns; ``retry(error)`` and ``fail(error)`` say otherwise for one
    call, ``succeed(value)`` gives its result."""

    __slots__ = ("_outcome", "args", "attempt", "id", "key", "kwargs")

    def __init__(
        self,
        id: str,
        args: list[Any],
        kwargs: dict[str, Any],
        attempt: int,
        key: str | None = None,
    ) -> None:
        self.id = id
        self.args = args
        self.kwargs = kwargs
        self.attempt = attempt
        self.key = key
        self._outcome: tuple[str, Any, float | None] | None = None

    @property
    def event(self) -> Event:
        """The event a call made by ``on_events`` carries (its one argument)."""
        return Event.model_validate(self.args[0])

    def succeed(self, value: Any = None) -> None:
        """This call succeeded with ``value`` (kept as its result if the task keeps
        results, and given to the next step of a chain)."""
        self._outcome = (SUCCEEDED, value, None)

    def retry(self, error: BaseException | str, delay: float | timedelta | None = None) -> None:
        """This call failed: it is retried by the task's policy (after ``delay`` instead of
        the policy's backoff, when given) and poisoned once its retries are used (or at
        once, when the policy's ``retry_on`` or ``dont_retry_on`` refuses the error)."""
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
        if seconds is not None and not 0 <= seconds <= 366 * 24 * 3600:
            raise ValueError(f"a retry's delay is 0 to a year, not {delay!r}")
        self._outcome = (RETRIED, error, seconds)

    def fail(self, error: BaseException | str) -> None:
        """This call failed for good: it goes to the poison store now, not retried."""
        self._outcome = (FAILED, error, None)

    def __repr__(self) -> str:
        return f"BatchedCall({self.id!r}, args={self.args!r}, kwargs={self.kwargs!r})"


SUCCEEDED, RETRIED, FAILED = "succeeded", "retried", "failed"
#: the key of the report a batched run returns: an outcome per call, in order
REPORT = "tickwork.batched"


def _described(error: BaseException | str) -> tuple[str, str]:
    if isinstance(error, BaseException):
        return type(error).__qualname__, str(error)
    return "Error", str(error)


def _succeeded(value: Any) -> list[Any]:
    """A call's success with ``value``; a value that is not JSON fails the call alone (a
    failed attempt, as a handler's own value that cannot be kept fails its run)."""
    if value is not None:
        try:
            to_json(value)
        except Exception as err:  # pydantic_core raises its own serialisation errors
            why = f"its result cannot be kept: it is not JSON-encodable ({err})"
            return [RETRIED, "TypeError", why, "", None]
    return [SUCCEEDED, value]


def calls_of(payload: Sequence[Mapping[str, Any]]) -> list[BatchedCall]:
    """The calls a batched run takes, from what the worker gathered."""
    return [
        BatchedCall(item["id"], item["args"], item["kwargs"], item["attempt"], item.get("key"))
        for item in payload
    ]


def report(
    task_name: str,
    calls: list[BatchedCall],
    returned: Any,
    rule_against: Callable[[BaseException], str | None],
) -> dict[str, list[list[Any]]]:
    """What a batched run returns to the worker: each call's outcome, in order (a
    ``retried`` one with the rule of the task's policy that refuses its retry).
    ``returned``: None, or a list of one result per call; anything else raises
    ``InvalidMessage`` (the whole batch fails)."""
    if returned is not None and (not isinstance(returned, list) or len(returned) != len(calls)):
        got = f"a list of {len(returned)}" if isinstance(returned, list) else repr(returned)
        raise InvalidMessage(
            f"batched task {task_name!r} returns None or a list of one result per call "
            f"({len(calls)}), not {got}"
        )
    outcomes: list[list[Any]] = []
    for index, call in enumerate(calls):
        if call._outcome is None:
            outcomes.append(_succeeded(None if returned is None else returned[index]))
            continue
        kind, given, delay_s = call._outcome
        if kind == SUCCEEDED:
            outcomes.append(_succeeded(given))
        elif kind == RETRIED:
            rule = rule_against(given) if isinstance(given, BaseException) else None
            outcomes.append([RETRIED, *_described(given), rule or "", delay_s])
        else:
            outcomes.append([FAILED, *_described(given)])
    return {REPORT: outcomes}


async def reported(
    task_name: str,
    calls: list[BatchedCall],
    returned: Awaitable[Any],
    rule_against: Callable[[BaseException], str | None],
) -> dict[str, list[list[Any]]]:
    """``report`` for an ``async def`` batched handler, once it has returned."""
    return report(task_name, calls, await returned, rule_against)


def outcomes_of(value: Any) -> list[list[Any]] | None:
    """The outcomes in what a batched run returned (None: it is not a batch's report)."""
    if isinstance(value, dict) and isinstance(outcomes := value.get(REPORT), list):
        return outcomes
    return None


def any_call(*args: Any, **kwargs: Any) -> None:
    """The signature a batched task's calls are checked against: any JSON arguments (its
    handler's own takes the list of calls)."""
