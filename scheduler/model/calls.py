"""One invocation to enqueue (``Call``): a task's name, its arguments and scheduling
options, and its canvas form (``delay()``, ``apply_async()``, a chain called), which
enqueues it through the app its task made it for (``Producer``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.model.handles import ChainHandle, ResultReader, TaskHandle
from tickwork.triggers import Trigger


@dataclass(frozen=True)
class Call:
    """One invocation to enqueue: a task name, its arguments and scheduling options."""

    task: str
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    key: str | None = None
    at: datetime | None = None
    #: run this long after it is enqueued, a ``timedelta`` or seconds
    #: (``options(delay=...)``; ``apply_async``'s ``countdown``); the name ``delay`` is
    #: the method that enqueues it
    delay_by: timedelta | float | None = None
    trigger: Trigger | None = None
    queue: str | None = None
    priority: int | None = None
    headers: Mapping[str, str] | None = None
    #: For an unkeyed message: a deterministic identity (any string), so that sending the
    #: same call again (a Spark task retry) names the same message instead of a new one.
    identity: str | None = None
    #: In a chain: this step takes the previous step's return value as its first argument
    takes_result: bool = False
    #: The steps after this one (see ``scheduler.producing.chains.chain``)
    then: tuple[Call, ...] = ()
    #: Not run at all if not started by then: a ``timedelta`` after each occurrence's
    #: time, or (a one-off) a ``datetime``; default: the task's ``expires``
    expires: timedelta | datetime | None = None
    #: how many units of its task's rate limit (or throttle) its start counts, 1 to the
    #: limit's count (tokens of a model call against a tokens-per-minute budget)
    cost: int | None = None

    #: the app a task's ``s()``, ``si()`` and ``call()`` made it for: ``delay()`` enqueues
    #: it there (not compared, not pickled)
    producer: Producer | None = field(default=None, compare=False, repr=False)

    def options(self, **changes: Any) -> Call:
        """A copy with other options (``key=``, ``at=``, ``delay=``, ``trigger=``, ...)."""
        if "delay" in changes:
            changes["delay_by"] = changes.pop("delay")
        return replace(self, **changes)

    def delay(self, *args: Any, **kwargs: Any) -> TaskHandle:
        """Enqueue this call, as Celery's ``signature.delay()``: ``args`` go before its own
        arguments and ``kwargs`` over its own. A chain (``chain(...).delay()``) is enqueued
        whole; its handle's ``result()`` is the last step's value."""
        return self.apply_async(args, kwargs)

    def apply_async(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        countdown: float | None = None,
        eta: datetime | None = None,
        key: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
    ) -> TaskHandle:
        """Enqueue this call (a chain: the whole chain) with Celery's options:
        ``countdown`` seconds from now (tickwork's ``delay=``), at ``eta`` (``at=``), under
        ``key``, in ``queue``, with ``priority``."""
        call = self
        if args or kwargs:  # a partial call completed (what a .s() step would have taken)
            merged = {**call.kwargs, **(kwargs or {})}
            call = replace(call, args=(*args, *call.args), kwargs=merged, takes_result=False)
        changes: dict[str, Any] = {"key": key, "at": eta, "queue": queue, "priority": priority}
        if countdown is not None:
            changes["delay_by"] = timedelta(seconds=countdown)
        given = {name: value for name, value in changes.items() if value is not None}
        if given:
            call = replace(call, **given)
        producer = call.producer
        if producer is None:
            raise InvalidMessage(
                f"this call of {call.task!r} was not made by a task's .s(), .si() or .call(): "
                "enqueue it with app.enqueue(call)"
            )
        message_id = producer.enqueue(call)
        if not call.then:
            return TaskHandle(message_id, producer, call.task)
        return ChainHandle(message_id, producer, call.then[-1].task, len(call.then) + 1)

    def __call__(self) -> TaskHandle:
        """A chain called (Celery's ``chain(...)()``) is enqueued, as ``delay()``."""
        if not self.then:
            raise TypeError(
                f"a call of {self.task!r} is enqueued with .delay(); to run the task here, "
                "call the task function itself"
            )
        return self.delay()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its app (a Spark executor imports its own)."""
        return {**self.__dict__, "producer": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)


class Producer(ResultReader, Protocol):
    """What a task enqueues through (an ``App``): tasks depend on this, not on ``App``."""

    def task_queue(self, name: str) -> str | None:
        """The default queue of the task registered as ``name`` (None: not registered)."""
        ...

    def enqueue(
        self,
        call: Any,  # a Call, or a workflow (a group, a batch, a graph)
        on_conflict: str = "error",
        *,
        block: bool = True,
        block_timeout: float | None = None,
        connection: Any = None,
    ) -> str: ...

    async def aenqueue(
        self,
        call: Call,
        on_conflict: str = "error",
        *,
        block: bool = True,
        block_timeout: float | None = None,
        connection: Any = None,
    ) -> str: ...
