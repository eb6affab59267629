"""Task wrappers: a decorated function or a ``Task`` subclass, with its options.

Arguments are validated against the handler's signature when a message is enqueued (so
bad arguments fail in the producer and nothing is written), stored as JSON, and validated
again in the worker to rebuild typed values (``scheduler.model.arguments``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar, Generic, ParamSpec, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from tickwork.scheduler.model.arguments import Arguments
from tickwork.scheduler.model.batching import Batching, calls_of, report, reported
from tickwork.scheduler.model.calls import Call as Call
from tickwork.scheduler.model.calls import Producer as Producer
from tickwork.scheduler.model.debounce import Debounce
from tickwork.scheduler.model.handles import TaskHandle
from tickwork.scheduler.model.limits import ConcurrencyLimit, LimitKey, RateLimit
from tickwork.scheduler.model.retry import RetryPolicy
from tickwork.triggers import Trigger

P = ParamSpec("P")
R = TypeVar("R")


class TaskHost(Producer, Protocol):
    """What a ``TaskClass`` subclass registers with (an ``App``)."""

    def register_class(self, cls: type[TaskClass]) -> TaskFunction[..., Any]: ...


class TaskOptions(BaseModel):
    """How a task's messages are enqueued and handled."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    queue: str = "default"
    retry: RetryPolicy = RetryPolicy()
    timeout_s: float = Field(default=300.0, gt=0)
    #: a run still going this long after it started is stopped (``TimeLimitExceeded``)
    time_limit_s: float | None = Field(default=None, gt=0)
    #: a sync run still going this long after it started gets ``SoftTimeLimitExceeded``
    #: raised in it, once: a warning it may catch to stop cleanly (before ``time_limit``)
    soft_time_limit_s: float | None = Field(default=None, gt=0)
    priority: int = Field(default=0, ge=-1000, le=1000)
    #: after a keyed one-off message of this task succeeds, its key stays taken this long
    unique_for: timedelta | None = None
    #: at most this many of its messages (per limit key) run at once across every worker
    concurrency_limit: ConcurrencyLimit | None = None
    #: at most so many of its messages (per limit key) start per period across every worker
    rate_limit: RateLimit | None = None
    limit_key: LimitKey | None = None
    #: its messages take turns with other values of this key within a priority (fair share)
    fair_key: LimitKey | None = None
    #: keep what its runs return this long (None: keep nothing)
    result_retention: timedelta | None = None
    #: record each attempt of its one-off messages in the ledger (``app.run_history``)
    history: bool = False
    #: its messages not started this long after their time are not run (expired)
    expires: timedelta | None = None
    #: calls within a quiet period collapse into one run (``scheduler/model/debounce.py``)
    debounce: Debounce | None = None
    #: its steps, sleeps and recorded values are journaled (``scheduler/runs/durable.py``)
    durable: bool = False
    #: its calls run together, up to a batch at a time (``scheduler/model/batching.py``)
    batch: Batching | None = None
    #: a message still waiting this long after its due time goes ahead of every priority
    max_wait: timedelta | None = None

    @field_validator("unique_for", "expires", "max_wait")
    @classmethod
    def _positive_duration(cls, value: timedelta | None, info: ValidationInfo) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError(f"{info.field_name} must be a positive duration")
        return value


class TaskFunction(Generic[P, R]):
    """A registered task. Call it to run it here; ``delay``/``schedule`` to enqueue it."""

    def __init__(
        self,
        app: Producer,
        fn: Callable[P, R],
        options: TaskOptions,
        arguments: Arguments,
        *,
        is_async: bool | None = None,
    ) -> None:
        self.app = app
        self.fn = fn
        self.options = options
        self.arguments = arguments
        #: an ``async def`` handler: workers run it on their event loop
        self.is_async = inspect.iscoroutinefunction(fn) if is_async is None else is_async
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    @property
    def name(self) -> str:
        return self.options.name

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<task {self.name} queue={self.options.queue}>"

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Call:
        """An invocation to pass to ``App.enqueue_many`` or to ``chain`` (as a step, it does
        not take the previous step's result: Celery's ``.si()``)."""
        return Call(self.name, args, kwargs, producer=self.app)

    def s(self, *args: Any, **kwargs: Any) -> Call:
        """A chain step that takes the previous step's return value as its first argument,
        before ``args`` (Celery's ``.s()``)."""
        return Call(self.name, args, kwargs, takes_result=True, producer=self.app)

    def si(self, *args: P.args, **kwargs: P.kwargs) -> Call:
        """A chain step that ignores the previous step's result (Celery's ``.si()``)."""
        return Call(self.name, args, kwargs, producer=self.app)

    def delay(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle:
        """Enqueue a run due now; returns its handle (the message id, a ``str``)."""
        return TaskHandle(self.app.enqueue(Call(self.name, args, kwargs)), self.app, self.name)

    def schedule(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        at: datetime | None = None,
        delay: timedelta | float | None = None,
        trigger: Trigger | None = None,
        key: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        headers: Mapping[str, str] | None = None,
        expires: timedelta | datetime | None = None,
        on_conflict: str = "error",
        block: bool = True,
        block_timeout: float | None = None,
        connection: Any = None,
    ) -> TaskHandle:
        """Enqueue with a time (``at``/``delay``) or a ``trigger``, optionally under ``key``;
        returns its handle (the message id). ``expires``: not run if not started by then
        (a ``timedelta`` after each occurrence's time, or a ``datetime`` for a one-off).
        ``on_conflict``: "error" | "ignore" | "replace".
        A full bounded queue: wait up to ``block_timeout`` s for room (default: the
        ``enqueue_block_s`` setting), or with ``block=False`` raise ``QueueFull`` at once.
        With ``connection`` (PostgreSQL), it is written inside that connection's open
        transaction (``App.transaction``)."""
        call = Call(
            self.name, args, kwargs or {}, key, at, delay, trigger, queue, priority, headers
        )
        if expires is not None:
            call = call.options(expires=expires)
        message_id = self.app.enqueue(
            call,
            on_conflict=on_conflict,
            block=block,
            block_timeout=block_timeout,
            connection=connection,
        )
        return TaskHandle(message_id, self.app, self.name)

    async def adelay(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle:
        """``delay`` for code on an event loop: the backend call runs in a thread."""
        message_id = await self.app.aenqueue(Call(self.name, args, kwargs))
        return TaskHandle(message_id, self.app, self.name)

    async def aschedule(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        at: datetime | None = None,
        delay: timedelta | float | None = None,
        trigger: Trigger | None = None,
        key: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        headers: Mapping[str, str] | None = None,
        expires: timedelta | datetime | None = None,
        on_conflict: str = "error",
        block: bool = True,
        block_timeout: float | None = None,
        connection: Any = None,
    ) -> TaskHandle:
        """``schedule`` for code on an event loop: the backend call (and any wait for room
        in a full queue) runs in a thread, or on the loop itself with ``connection`` (an
        asynchronous psycopg connection whose transaction it joins)."""
        call = Call(
            self.name, args, kwargs or {}, key, at, delay, trigger, queue, priority, headers
        )
        if expires is not None:
            call = call.options(expires=expires)
        message_id = await self.app.aenqueue(
            call,
            on_conflict=on_conflict,
            block=block,
            block_timeout=block_timeout,
            connection=connection,
        )
        return TaskHandle(message_id, self.app, self.name)

    def run(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """Run the handler on stored JSON arguments (what a worker does); for an async task
        this returns the coroutine, which the caller must await. A batched task's one
        argument is the calls the worker gathered; it returns what each call's outcome
        is (``scheduler/model/batching.py``)."""
        if self.options.batch is not None:
            calls = calls_of(args[0])
            handler: Callable[..., Any] = self.fn
            returned = handler(calls)
            rule = self.options.retry.rule_against
            if inspect.isawaitable(returned):
                return reported(self.name, calls, returned, rule)
            return report(self.name, calls, returned, rule)
        typed_args, typed_kwargs = self.arguments.rebuild(args, kwargs)
        return self.fn(*typed_args, **typed_kwargs)


class TaskClass:
    """Base of class-based tasks (``class Reindex(app.Task)``), as in Astyanax.

    Subclasses define ``run(self, ...)`` (or ``async def run``); class attributes set the
    same options as ``@app.task``'s keywords: ``name``, ``queue``, ``retries`` (or
    ``retry``, a policy with backoff; ``retry_on``, ``dont_retry_on``), ``timeout``,
    ``time_limit``, ``soft_time_limit``, ``priority``, ``expires``, ``unique_for``,
    ``concurrency_limit``, ``rate_limit``, ``throttle``, ``limit_key``, ``fair_key``,
    ``keep_result``, ``history``, ``on_events``, ``aliases``, ``debounce``, ``durable``,
    ``batch_size``, ``batch_timeout``, ``batch_key`` and ``max_wait``.
    Each message gets a fresh instance.
    """

    app: ClassVar[TaskHost]
    name: ClassVar[str | None] = None
    queue: ClassVar[str] = "default"
    retries: ClassVar[int] = 0
    timeout: ClassVar[float] = 300.0
    time_limit: ClassVar[float | None] = None
    soft_time_limit: ClassVar[float | None] = None
    expires: ClassVar[timedelta | None] = None
    priority: ClassVar[int] = 0
    keep_result: ClassVar[bool | timedelta | None] = None
    history: ClassVar[bool] = False
    retry: ClassVar[RetryPolicy | None] = None  # a policy with backoff (else ``retries``)
    retry_on: ClassVar[Sequence[type[BaseException]]] = ()
    dont_retry_on: ClassVar[Sequence[type[BaseException]]] = ()
    unique_for: ClassVar[timedelta | None] = None
    concurrency_limit: ClassVar[int | ConcurrencyLimit | None] = None
    rate_limit: ClassVar[str | RateLimit | None] = None
    throttle: ClassVar[tuple[int, timedelta] | None] = None
    limit_key: ClassVar[LimitKey | None] = None
    fair_key: ClassVar[LimitKey | None] = None
    on_events: ClassVar[str | Sequence[str] | None] = None
    aliases: ClassVar[Sequence[str]] = ()
    debounce: ClassVar[timedelta | Debounce | None] = None
    durable: ClassVar[bool] = False
    batch_size: ClassVar[int | None] = None
    batch_timeout: ClassVar[timedelta | float | None] = None
    batch_key: ClassVar[LimitKey | None] = None
    max_wait: ClassVar[timedelta | float | None] = None
    task: ClassVar[TaskFunction[..., Any]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "run" not in cls.__dict__ or not hasattr(cls, "app"):
            return
        cls.task = cls.app.register_class(cls)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def delay(cls, *args: Any, **kwargs: Any) -> TaskHandle:
        return cls.task.delay(*args, **kwargs)

    @classmethod
    def schedule(cls, *args: Any, **kwargs: Any) -> TaskHandle:
        return cls.task.schedule(*args, **kwargs)

    @classmethod
    def call(cls, *args: Any, **kwargs: Any) -> Call:
        return cls.task.call(*args, **kwargs)

    @classmethod
    async def adelay(cls, *args: Any, **kwargs: Any) -> TaskHandle:
        return await cls.task.adelay(*args, **kwargs)

    @classmethod
    async def aschedule(cls, *args: Any, **kwargs: Any) -> TaskHandle:
        return await cls.task.aschedule(*args, **kwargs)
