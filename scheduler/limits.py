"""Concurrency limits on the producer's side: what a task declares, and the limit key each
message carries (``Message.limit``), computed once when it is enqueued.

``@app.task(concurrency_limit=2, limit_key="customer_id")`` lets at most two messages of
the same customer run at once across every worker; ``concurrency_limit=ConcurrencyLimit(
"crm", 5)`` names a limit several tasks share. Workers enforce it (``workers/limits.py``)
with the backend's slots; the capacity a worker registers is the one it enforces.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from scheduler.errors import InvalidMessage

#: a limit key: the name of one of the task's parameters, or a function of its arguments
LimitKey = str | Callable[..., Any]


class ConcurrencyLimit(BaseModel):
    """At most ``capacity`` runs at once across every worker, for each value of the limit
    key of the tasks that use it (every task naming the same limit shares its slots)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1, max_length=200)
    capacity: int = Field(ge=1)


def check_limit(
    task_name: str,
    signature: inspect.Signature,
    limit: ConcurrencyLimit | None,
    limit_key: LimitKey | None,
) -> None:
    """Raise ``InvalidMessage`` for a limit key that cannot work, at registration."""
    if limit_key is None:
        return
    if limit is None:
        raise InvalidMessage(f"task {task_name!r} has a limit_key but no concurrency_limit")
    if isinstance(limit_key, str) and limit_key not in signature.parameters:
        known = ", ".join(signature.parameters) or "none"
        raise InvalidMessage(
            f"limit_key {limit_key!r} of task {task_name!r} is not one of its parameters ({known})"
        )
    if not isinstance(limit_key, str) and not callable(limit_key):
        raise InvalidMessage(
            f"limit_key of task {task_name!r} must be a parameter name or a function, "
            f"not {limit_key!r}"
        )


def limit_of(
    task_name: str,
    signature: inspect.Signature,
    limit: ConcurrencyLimit | None,
    limit_key: LimitKey | None,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> str | None:
    """The limit key a call of the task carries: ``NAME`` (one limit for every call) or
    ``NAME:VALUE``; None without a limit. Raises ``InvalidMessage`` when it cannot be had."""
    if limit is None:
        return None
    if limit_key is None:
        return limit.name
    if isinstance(limit_key, str):
        try:
            bound = signature.bind_partial(*args, **kwargs)
        except TypeError as err:
            raise InvalidMessage(f"arguments for task {task_name!r}: {err}") from err
        bound.apply_defaults()
        if limit_key not in bound.arguments:
            raise InvalidMessage(
                f"task {task_name!r} was called without {limit_key!r}, its limit_key"
            )
        value = bound.arguments[limit_key]
    else:
        try:
            value = limit_key(*args, **kwargs)
        except Exception as err:
            raise InvalidMessage(
                f"the limit_key function of task {task_name!r} failed: {type(err).__name__}: {err}"
            ) from err
    if value is None or isinstance(value, (dict, list, tuple, set)):
        raise InvalidMessage(
            f"the limit key of task {task_name!r} must be a string or a number, not {value!r}"
        )
    return f"{limit.name}:{value}"
