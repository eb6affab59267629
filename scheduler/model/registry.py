"""The task registry: which task names an app knows, their options, and periodic schedules.

``App`` owns one and forwards ``@app.task``, ``@app.periodic`` and task classes to it. A
registered ``TaskFunction`` enqueues through a ``Producer`` (the app), so this module
knows nothing of ``App``.
"""

from __future__ import annotations

import difflib
import inspect
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, Unpack, cast

from pydantic import ValidationError

from tickwork.scheduler.errors import ConfigurationError, InvalidMessage, UnknownTask
from tickwork.scheduler.model.arguments import Arguments
from tickwork.scheduler.model.batching import (
    Batching,
    any_call,
    batching_of,
    check_batched_handler,
)
from tickwork.scheduler.model.debounce import Debounce
from tickwork.scheduler.model.event_names import check_pattern
from tickwork.scheduler.model.limits import (
    ConcurrencyLimit,
    RateLimit,
    check_key_option,
    check_limit,
    throttle_of,
)
from tickwork.scheduler.model.names import check_queue
from tickwork.scheduler.model.retry import RetryPolicy
from tickwork.scheduler.model.task_keywords import TASK_KEYWORDS, BatchKeywords, TaskKeywords
from tickwork.scheduler.model.tasks import Producer, TaskClass, TaskFunction, TaskOptions
from tickwork.triggers import Trigger

#: the lease of tickwork's own tasks' messages (heartbeats extend it while one runs)
BUILTIN_LEASE_S = 10.0

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Periodic:
    """A schedule declared in code with ``@app.periodic``; installed by key at worker start."""

    task: str
    trigger: Trigger
    key: str
    queue: str


class TaskRegistry:
    """Task names to ``TaskFunction`` objects, plus the periodic schedules declared in code.

    ``default_queue`` and ``default_timeout_s`` fill in options a task leaves out.
    """

    def __init__(
        self,
        producer: Producer,
        default_queue: str,
        default_timeout_s: float,
        default_retention: tuple[bool, timedelta] = (False, timedelta(days=1)),
    ) -> None:
        self.producer = producer
        self.default_queue = default_queue
        self.default_timeout_s = default_timeout_s
        self.default_retention = default_retention  # (keep results?, for how long)
        self.tasks: dict[str, TaskFunction[..., Any]] = {}
        self.periodics: list[Periodic] = []
        #: the names of tickwork's own tasks (``builtin``): known to every app, listed by
        #: none of its views, adding no queue to its workers'
        self.builtins: set[str] = set()
        #: a task's earlier names (``aliases=``) -> its name: messages stored under one run
        #: the task (``tasks`` holds it under both); listed by no view
        self.aliases: dict[str, str] = {}
        #: task name -> the event patterns it subscribes to (``on_events``)
        self.subscriptions: dict[str, tuple[str, ...]] = {}

    def function(
        self, function: Callable[P, R], **options: Unpack[TaskKeywords]
    ) -> TaskFunction[P, R]:
        """Register ``function`` as a task (what ``@app.task`` does) with ``options``."""
        task_name = check_queue(
            options.get("name") or f"{module_name(function.__module__)}.{function.__name__}",
            "a task's name",
        )
        _check_runnable(function, task_name)
        arguments = Arguments(function, task_name)
        return self._register(task_name, function, arguments, None, options)

    def task_class(self, cls: type[TaskClass]) -> TaskFunction[..., Any]:
        """Register a ``TaskClass`` subclass: each message runs on a fresh instance, with
        the options its class attributes set (the same as ``@app.task``'s)."""
        task_name = check_queue(
            cls.name or f"{module_name(cls.__module__)}.{cls.__name__}", "a task's name"
        )
        _check_runnable(cls.run, task_name)

        def run_instance(*args: Any, **kwargs: Any) -> Any:
            return cls().run(*args, **kwargs)

        attributes = {name: getattr(cls, name) for name in TASK_KEYWORDS if name != "name"}
        return self._register(
            task_name,
            run_instance,
            Arguments(cls.run, task_name, skip_self=True),
            inspect.iscoroutinefunction(cls.run),
            cast(TaskKeywords, attributes),
        )

    def _register(
        self,
        task_name: str,
        function: Callable[..., Any],
        arguments: Arguments,
        is_async: bool | None,
        given: TaskKeywords,
    ) -> TaskFunction[Any, Any]:
        """A task's options checked and built (one list, for functions and classes)."""
        concurrency_limit = given.get("concurrency_limit")
        rate_limit = given.get("rate_limit")
        limit_key, fair_key = given.get("limit_key"), given.get("fair_key")
        time_limit = given.get("time_limit")
        limit = (
            ConcurrencyLimit(name=task_name, capacity=concurrency_limit)
            if isinstance(concurrency_limit, int)
            else concurrency_limit
        )
        rate = RateLimit.parse(task_name, rate_limit) if isinstance(rate_limit, str) else rate_limit
        throttle = throttle_of(task_name, given.get("throttle"))
        if throttle is not None:
            if rate is not None:
                raise InvalidMessage(
                    f"task {task_name!r} has a rate_limit and a throttle: give one of them"
                )
            rate = throttle
        limited = limit is not None or rate is not None
        batching = _batching(task_name, given, arguments)
        if batching is not None:
            arguments = Arguments(any_call, task_name)  # the calls': any JSON arguments
        signature = arguments.signature
        check_limit(task_name, signature, limited, limit_key)
        check_key_option(task_name, signature, "fair_key", fair_key)
        debounce = _debounce(given.get("debounce"))
        if debounce is not None and debounce.key is not None:
            check_key_option(task_name, signature, "debounce key", debounce.key)
        options = _options(
            task_name,
            name=task_name,
            queue=check_queue(given.get("queue") or self.default_queue),
            retry=_policy(given),
            timeout_s=given.get("timeout") or self.default_timeout_s,
            time_limit_s=time_limit,
            soft_time_limit_s=_soft(task_name, given.get("soft_time_limit"), time_limit),
            priority=given.get("priority", 0),
            max_wait=given.get("max_wait"),
            unique_for=given.get("unique_for"),
            concurrency_limit=limit,
            rate_limit=rate,
            limit_key=limit_key,
            fair_key=fair_key,
            result_retention=self.retention(task_name, given.get("keep_result")),
            history=given.get("history", False),
            expires=given.get("expires"),
            debounce=debounce,
            durable=given.get("durable", False),
            batch=batching,
        )
        task = self.add(
            TaskFunction(self.producer, function, options, arguments, is_async=is_async)
        )
        for alias in given.get("aliases") or ():
            self.alias(task, alias)
        on_events = given.get("on_events")
        if on_events is not None:
            self.subscribe(task, (on_events,) if isinstance(on_events, str) else on_events)
        return task

    def retention(self, task_name: str, keep_result: bool | timedelta | None) -> timedelta | None:
        """How long a task keeps its results (None: not at all), given its ``keep_result``
        and the app's defaults."""
        keep, default = self.default_retention
        if keep_result is None:
            return default if keep else None
        if isinstance(keep_result, bool):
            return default if keep_result else None
        if keep_result <= timedelta(0):
            raise InvalidMessage(f"keep_result of task {task_name!r} must be a positive duration")
        return keep_result

    def alias(self, task: TaskFunction[Any, Any], alias: str) -> None:
        """Run ``task`` for messages stored under ``alias`` (a name it had before)."""
        check_queue(alias, "a task's alias")
        if alias in self.tasks:
            raise InvalidMessage(
                f"the alias {alias!r} of task {task.name!r} is already a task's name"
            )
        self.tasks[alias] = task
        self.aliases[alias] = task.name

    def add(self, task: TaskFunction[P, R]) -> TaskFunction[P, R]:
        """Register an existing ``TaskFunction`` (a name may be registered once)."""
        if task.name in self.tasks:
            raise InvalidMessage(f"a task named {task.name!r} is already registered")
        self.tasks[task.name] = task
        return task

    def builtin(self, function: Callable[..., Any], name: str, retry: RetryPolicy) -> None:
        """Register one of tickwork's own tasks (``name`` starts ``tickwork.``): each run
        takes milliseconds, so its lease is short (a killed worker's is soon taken over)."""
        self.function(function, name=name, retry=retry, timeout=BUILTIN_LEASE_S)
        self.builtins.add(name)

    def subscribe(self, task: TaskFunction[..., Any], patterns: Sequence[str]) -> None:
        """Declare that ``task`` receives the events matching ``patterns`` (added to those
        it has): it must take the event as its one argument."""
        if not patterns:
            raise InvalidMessage(f"task {task.name!r} subscribes to no event pattern")
        for pattern in patterns:
            check_pattern(pattern)
        try:
            task.arguments.signature.bind(None)
        except TypeError:
            raise InvalidMessage(
                f"task {task.name!r} subscribes to events, so it must take the event as its "
                "one argument (def handler(event: Event))"
            ) from None
        known = self.subscriptions.get(task.name, ())
        self.subscriptions[task.name] = tuple(dict.fromkeys((*known, *patterns)))

    def add_periodic(self, task: TaskFunction[..., Any], trigger: Trigger, key: str | None) -> None:
        """Declare that ``task`` runs on ``trigger`` under ``key`` (default
        ``periodic:{task name}``)."""
        self.periodics.append(
            Periodic(task.name, trigger, key or f"periodic:{task.name}", task.options.queue)
        )

    @property
    def has_async(self) -> bool:
        """Whether any registered task is ``async def`` (a worker then starts an event loop)."""
        return any(task.is_async for task in self.tasks.values())

    def queues(self) -> set[str]:
        """The queues the registered tasks and periodic schedules name."""
        return {
            task.options.queue for task in self.tasks.values() if task.name not in self.builtins
        } | {periodic.queue for periodic in self.periodics}

    def lookup(self, name: str) -> TaskFunction[..., Any]:
        try:
            return self.tasks[name]
        except KeyError:
            raise UnknownTask(self._unknown(name)) from None

    def _unknown(self, name: str) -> str:
        """Why ``name`` is refused: the registered name it was likely meant as (a task's
        full name ends with its function's), else the names there are."""
        ours = sorted(task for task in self.tasks if task not in self.builtins)
        meant = [task for task in ours if task.rsplit(".", 1)[-1] == name.rsplit(".", 1)[-1]]
        meant = meant or difflib.get_close_matches(name, ours, n=1, cutoff=0.6)
        if meant:
            return f"no task named {name!r} is registered; did you mean {meant[0]!r}?"
        if not ours:
            return f"no task named {name!r} is registered: this app registers no task"
        shown = ", ".join(ours[:8]) + (f" and {len(ours) - 8} more" if len(ours) > 8 else "")
        return f"no task named {name!r} is registered; the app's tasks: {shown}"


def _check_runnable(function: Callable[..., Any], task_name: str) -> None:
    """Refuse handlers a worker could call without running their body: a generator (or
    async generator) function returns an iterator, and acking that would lose the run."""
    if inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function):
        raise InvalidMessage(
            f"task {task_name!r} is a generator function: a worker would get an iterator "
            "back without running it; make it a plain or an async def function"
        )


def _batching(task_name: str, given: TaskKeywords, arguments: Arguments) -> Batching | None:
    """A task's batching options checked, with what they exclude: the calls of one run
    share a handler, so not a concurrency limit, a debounce or durable steps; its limit
    and fair keys are functions (the calls' parameters are not the handler's)."""
    batched = cast(BatchKeywords, given)
    batching = batching_of(
        task_name,
        batched.get("batch_size"),
        batched.get("batch_timeout"),
        batched.get("batch_key"),
    )
    if batching is None:
        return None
    check_batched_handler(task_name, arguments.signature)
    for option in ("concurrency_limit", "debounce", "durable"):
        if given.get(option) not in (None, False):
            raise InvalidMessage(
                f"task {task_name!r} has a batch_size and a {option}: its calls run together "
                "in one handler, so give one of them"
            )
    for option in ("limit_key", "fair_key"):
        if isinstance(given.get(option), str):
            raise InvalidMessage(
                f"the {option} of batched task {task_name!r} must be a function of a call's "
                "arguments: its handler's parameters are not its calls'"
            )
    return batching


def _debounce(given: timedelta | Debounce | None) -> Debounce | None:
    """A task's ``debounce=``: a period alone, or a whole ``Debounce``."""
    if given is None or isinstance(given, Debounce):
        return given
    return Debounce(given)


def _options(task_name: str, **options: Any) -> TaskOptions:
    """The task's ``TaskOptions``; an option of the wrong type or range is one
    ``InvalidMessage`` naming it (pydantic's own report never reaches the user)."""
    try:
        return TaskOptions(**options)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        keyword = {"retry": "retries", "timeout_s": "timeout", "time_limit_s": "time_limit"}
        given = first.get("input")
        shown = str(given) if isinstance(given, timedelta) else repr(given)
        why = first["msg"].removeprefix("Value error, ")
        raise InvalidMessage(
            f"task {task_name!r}: option {keyword.get(where, where)}={shown} is not valid "
            f"({why[:1].lower()}{why[1:]})"
        ) from None


def _policy(given: TaskKeywords) -> RetryPolicy:
    """The task's retry policy: ``retry`` (else one of ``retries``), with the exception
    rules given beside it."""
    policy = given.get("retry") or RetryPolicy(retries=given.get("retries", 0))
    rules: dict[str, tuple[type[BaseException], ...]] = {}
    if retry_on := given.get("retry_on"):
        rules["retry_on"] = tuple(retry_on)
    if dont_retry_on := given.get("dont_retry_on"):
        rules["dont_retry_on"] = tuple(dont_retry_on)
    if not rules:
        return policy
    try:
        return RetryPolicy(**{**policy.model_dump(), **rules})
    except ValidationError as err:
        where = ".".join(str(part) for part in err.errors()[0]["loc"][:1])
        shown = rules.get(where)
        raise InvalidMessage(f"{where} takes exception classes, not {shown!r}") from None


def module_name(name: str) -> str:
    """The importable name of a module, also for one run as ``python -m package.module`` or
    ``python module.py`` (whose ``__name__`` is ``__main__``), so producers and workers
    agree on task names."""
    if name == "__main__":
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        if spec is not None and spec.name:
            return str(spec.name)
        path = getattr(main, "__file__", None)
        if path:  # ``python app.py``: the name a worker gets with ``-A app``
            return Path(path).stem
    return name


def _soft(task: str, soft_s: float | None, hard_s: float | None) -> float | None:
    """A task's soft time limit, which must come before its time limit."""
    if soft_s is not None and hard_s is not None and soft_s >= hard_s:
        raise ConfigurationError(
            f"{task}: soft_time_limit ({soft_s:g} s) must be shorter than time_limit "
            f"({hard_s:g} s): it warns the handler before the limit stops it"
        )
    return soft_s
