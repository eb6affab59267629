"""Limits per key on the producer's side: what a task declares, and the limit keys each
message carries (``Message.limit``, ``Message.rate``), computed once when it is enqueued.

``@app.task(concurrency_limit=2, limit_key="customer_id")`` lets at most two messages of
the same customer run at once across every worker; ``concurrency_limit=ConcurrencyLimit(
"crm", 5)`` names a limit several tasks share. ``rate_limit="100/m"`` lets at most 100
of them start in any minute (``RateLimit("crm", 100, timedelta(minutes=1))`` names one).
Workers enforce both (``workers/admission/limits.py``, ``workers/admission/rates.py``)
with the backend's slots and start logs; the figures a worker registers are the ones it
enforces.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from tickwork.scheduler.errors import InvalidMessage

#: a limit key: the name of one of the task's parameters, or a function of its arguments
LimitKey = str | Callable[..., Any]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([smhd])[a-z]*\s*$")


class ConcurrencyLimit(BaseModel):
    """At most ``capacity`` runs at once across every worker, for each value of the limit
    key of the tasks that use it (every task naming the same limit shares its slots)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1, max_length=200)
    capacity: int = Field(ge=1)


class RateLimit(BaseModel):
    """At most ``count`` starts in any ``period`` across every worker, for each value of
    the limit key of the tasks that use it, on the backend's clock (every task naming the
    same limit shares its starts; a call with ``cost=`` counts as that many). A start
    over the rate waits for its turn (``excess="delay"``) or is not run at all and goes
    to the poison store as ``throttled`` (``excess="drop"``, what a task's ``throttle=``
    makes)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1, max_length=200)
    count: int = Field(ge=1, le=100_000)
    period: timedelta = Field(ge=timedelta(milliseconds=1))
    excess: Literal["delay", "drop"] = "delay"
    _period_ms: int = PrivateAttr(0)

    def model_post_init(self, context: Any, /) -> None:
        self._period_ms = self.period // timedelta(milliseconds=1)

    @property
    def period_ms(self) -> int:
        return self._period_ms

    @classmethod
    def parse(cls, name: str, text: str) -> RateLimit:
        """``"100/m"``, ``"5/s"``, ``"1000/h"``, ``"10/d"`` or with a multiple of the unit,
        ``"10/30s"``; raises ``InvalidMessage`` for anything else."""
        match = _RATE.match(text)
        if match is None or int(match[1]) < 1 or match[2] == "0":
            raise InvalidMessage(
                f"rate_limit {text!r} of {name!r} is not COUNT/PERIOD, "
                "such as '100/m', '5/s', '10/30s' or '1000/h'"
            )
        if int(match[1]) > 100_000:
            raise InvalidMessage(f"rate_limit {text!r} of {name!r}: at most 100000 per period")
        seconds = int(match[2] or 1) * _UNITS[match[3]]
        return cls(name=name, count=int(match[1]), period=timedelta(seconds=seconds))


def throttle_of(task_name: str, given: Any) -> RateLimit | None:
    """A task's ``throttle=(count, period)``: at most ``count`` calls run in any
    ``period`` (per value of its ``limit_key``), the calls over it dropped: the rate limit
    named after the task with ``excess="drop"``. Raises ``InvalidMessage`` naming the task
    for anything else."""
    if given is None:
        return None
    if isinstance(given, tuple) and len(given) == 2:
        count, period = given
        if (
            isinstance(count, int)
            and not isinstance(count, bool)
            and 1 <= count <= 100_000
            and isinstance(period, timedelta)
            and period >= timedelta(milliseconds=1)
        ):
            return RateLimit(name=task_name, count=count, period=period, excess="drop")
    raise InvalidMessage(
        f"throttle of task {task_name!r} must be (count, period): a count from 1 to 100000 "
        f"and a timedelta of 1 ms or more, not {given!r}"
    )


def check_limit(
    task_name: str,
    signature: inspect.Signature,
    limited: bool,
    limit_key: LimitKey | None,
) -> None:
    """Raise ``InvalidMessage`` for a limit key that cannot work, at registration;
    ``limited`` tells whether the task has a concurrency or a rate limit."""
    if limit_key is None:
        return
    if not limited:
        raise InvalidMessage(
            f"task {task_name!r} has a limit_key but no concurrency_limit or rate_limit"
        )
    check_key_option(task_name, signature, "limit_key", limit_key)


def check_key_option(
    task_name: str, signature: inspect.Signature, option: str, value: LimitKey | None
) -> None:
    """Raise ``InvalidMessage`` unless ``value`` (the task's ``option``: ``limit_key`` or
    ``fair_key``) names one of its parameters or is a function of its arguments."""
    if value is None:
        return
    if isinstance(value, str) and value not in signature.parameters:
        known = ", ".join(signature.parameters) or "none"
        raise InvalidMessage(
            f"{option} {value!r} of task {task_name!r} is not one of its parameters ({known})"
        )
    if not isinstance(value, str) and not callable(value):
        raise InvalidMessage(
            f"{option} of task {task_name!r} must be a parameter name or a function, not {value!r}"
        )


def limit_value(
    task_name: str,
    signature: inspect.Signature,
    limit_key: LimitKey,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    option: str = "limit_key",
) -> Any:
    """The value of the limit key (or of another key ``option``, such as ``fair_key``) for
    a call of the task. Raises ``InvalidMessage`` when it cannot be had."""
    if isinstance(limit_key, str):
        try:
            bound = signature.bind_partial(*args, **kwargs)
        except TypeError as err:
            raise InvalidMessage(f"arguments for task {task_name!r}: {err}") from err
        bound.apply_defaults()
        if limit_key not in bound.arguments:
            raise InvalidMessage(
                f"task {task_name!r} was called without {limit_key!r}, its {option}"
            )
        value = bound.arguments[limit_key]
    else:
        try:
            value = limit_key(*args, **kwargs)
        except Exception as err:
            raise InvalidMessage(
                f"the {option} function of task {task_name!r} failed: {type(err).__name__}: {err}"
            ) from err
    if value is None or isinstance(value, (dict, list, tuple, set)):
        raise InvalidMessage(
            f"the {option} of task {task_name!r} must give a string or a number, not {value!r}"
        )
    return value


def limit_keys(
    task_name: str,
    signature: inspect.Signature,
    limits: tuple[ConcurrencyLimit | None, RateLimit | None],
    limit_key: LimitKey | None,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> tuple[str | None, str | None]:
    """The keys of the concurrency and the rate limit a call of the task carries, each
    ``NAME`` (one limit for every call) or ``NAME:VALUE``; None where there is no such
    limit. Raises ``InvalidMessage`` when the limit key cannot be had."""
    concurrency, rate = limits
    if concurrency is None and rate is None:
        return None, None
    if limit_key is None:
        suffix = ""
    else:
        suffix = f":{limit_value(task_name, signature, limit_key, args, kwargs)}"
    return (
        None if concurrency is None else concurrency.name + suffix,
        None if rate is None else rate.name + suffix,
    )


def fair_value(
    task_name: str,
    signature: inspect.Signature,
    fair_key: LimitKey | None,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> str | None:
    """The fair-share key a call of the task carries (``Message.fair``): messages with
    different ones take turns within a priority; None when the task has no ``fair_key``.
    Raises ``InvalidMessage`` when it cannot be had."""
    if fair_key is None:
        return None
    return str(limit_value(task_name, signature, fair_key, args, kwargs, option="fair_key"))
