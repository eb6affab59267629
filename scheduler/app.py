"""The ``App``: task registry, producer API, and the bridge from messages to a backend."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, overload

from scheduler.backends import (
    Backend,
    Envelope,
    OnConflict,
    Outcome,
    State,
    open_backend,
)
from scheduler.clock import Clock, SystemClock, to_datetime, to_ms
from scheduler.errors import InvalidMessage, UnknownTask
from scheduler.ids import identity_chain_id, keyed_chain_id, new_chain_id, occurrence_id
from scheduler.message import Message, ScheduledMessage, encode_fields
from scheduler.retry import RetryPolicy
from scheduler.settings import Settings
from scheduler.tasks import Arguments, Call, TaskClass, TaskFunction, TaskOptions
from triggers import Cron, Fire, Repeating, Trigger, require_aware

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Periodic:
    """A schedule declared in code with ``@app.periodic``; installed by key at worker start."""

    task: str
    trigger: Trigger
    key: str
    queue: str


@dataclass
class EnqueueReport:
    """What ``enqueue_many`` did: ids in input order and a count per outcome."""

    ids: list[str] = field(default_factory=list)
    outcomes: dict[Outcome, int] = field(default_factory=dict)

    @property
    def enqueued(self) -> int:
        return self.outcomes.get(Outcome.ENQUEUED, 0) + self.outcomes.get(Outcome.REPLACED, 0)

    @property
    def skipped(self) -> int:
        return self.outcomes.get(Outcome.IGNORED, 0) + self.outcomes.get(Outcome.DUPLICATE, 0)


@dataclass(frozen=True)
class ScheduleInfo:
    """A keyed recurring message as ``tickwork schedules`` shows it."""

    queue: str
    key: str
    task: str
    trigger: Trigger
    next_run: datetime
    last_run: datetime | None
    misfires: int
    state: State


def _conflict_mode(value: str | OnConflict) -> OnConflict:
    try:
        return OnConflict(value)
    except ValueError:
        raise InvalidMessage(
            f"on_conflict must be 'error', 'ignore' or 'replace', not {value!r}"
        ) from None


class App:
    """A tickwork application: its tasks, its settings, and (opened on first use) its backend.

    ``App()`` reads ``TICKWORK_BACKEND`` (else ``sqlite:///tickwork.db``). Nothing connects
    until a message is enqueued or read.
    """

    def __init__(
        self,
        backend: str | Backend | None = None,
        *,
        settings: Settings | None = None,
        clock: Clock | None = None,
    ) -> None:
        if isinstance(backend, Backend):
            self.settings = settings or Settings.load()
            self._backend: Backend | None = backend
        else:
            self.settings = settings or Settings.load(backend=backend)
            self._backend = None
        self.clock: Clock = clock or SystemClock()
        self.tasks: dict[str, TaskFunction[..., Any]] = {}
        self.periodics: list[Periodic] = []
        self.Task: type[TaskClass] = type("Task", (TaskClass,), {"app": self})
        self._rng = random.Random()

    # -- backend -------------------------------------------------------------------------

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = open_backend(self.settings.backend, clock=self.clock)
        return self._backend

    def use_backend(self, url: str) -> None:
        """Point the app at another backend URL (before or after it was first used)."""
        self.close()
        self.settings = self.settings.model_copy(update={"backend": url})

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- registering tasks ---------------------------------------------------------------

    @overload
    def task(self, fn: Callable[P, R], /) -> TaskFunction[P, R]: ...

    @overload
    def task(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        queue: str | None = None,
        retries: int = 0,
        timeout: float | None = None,
        priority: int = 0,
        retry: RetryPolicy | None = None,
    ) -> Callable[[Callable[P, R]], TaskFunction[P, R]]: ...

    def task(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        queue: str | None = None,
        retries: int = 0,
        timeout: float | None = None,
        priority: int = 0,
        retry: RetryPolicy | None = None,
    ) -> Any:
        """Register a function as a task. ``retries``: extra attempts after an exception
        (exponential backoff from 1 s, doubling, capped at 5 min, jittered); ``timeout``:
        lease length in seconds, kept alive by heartbeats while the handler runs."""

        def register(function: Callable[..., Any]) -> TaskFunction[..., Any]:
            task_name = name or f"{module_name(function.__module__)}.{function.__name__}"
            options = TaskOptions(
                name=task_name,
                queue=queue or self.settings.default_queue,
                retry=retry or RetryPolicy(retries=retries),
                timeout_s=timeout or self.settings.default_timeout_s,
                priority=priority,
            )
            return self._add(TaskFunction(self, function, options, Arguments(function, task_name)))

        return register(fn) if fn is not None else register

    def register_class(self, cls: type[TaskClass]) -> TaskFunction[..., Any]:
        """Register a ``TaskClass`` subclass (called by ``app.Task.__init_subclass__``)."""
        task_name = cls.name or f"{module_name(cls.__module__)}.{cls.__name__}"

        def run_instance(*args: Any, **kwargs: Any) -> Any:
            return cls().run(*args, **kwargs)

        options = TaskOptions(
            name=task_name,
            queue=cls.queue,
            retry=RetryPolicy(retries=cls.retries),
            timeout_s=cls.timeout,
            priority=cls.priority,
        )
        arguments = Arguments(cls.run, task_name, skip_self=True)
        return self._add(TaskFunction(self, run_instance, options, arguments))

    def include(self, task: TaskFunction[P, R]) -> TaskFunction[P, R]:
        """Register a task defined on another app (e.g. a producer that imports the
        workers' task module but talks to its own backend)."""
        return self._add(task)

    def _add(self, task: TaskFunction[P, R]) -> TaskFunction[P, R]:
        if task.name in self.tasks:
            raise InvalidMessage(f"a task named {task.name!r} is already registered")
        self.tasks[task.name] = task
        return task

    def periodic(
        self,
        trigger: Trigger,
        *,
        key: str | None = None,
        name: str | None = None,
        queue: str | None = None,
        timeout: float | None = None,
        retries: int = 0,
        priority: int = 0,
    ) -> Callable[[Callable[[], R]], TaskFunction[[], R]]:
        """Register a no-argument task that runs on ``trigger``. Workers install it at start
        by key (default ``periodic:{task name}``), so many workers install it once."""

        def register(function: Callable[[], R]) -> TaskFunction[[], R]:
            task = self.task(
                name=name, queue=queue, timeout=timeout, retries=retries, priority=priority
            )(function)
            self.periodics.append(
                Periodic(task.name, trigger, key or f"periodic:{task.name}", task.options.queue)
            )
            return task

        return register

    def lookup(self, name: str) -> TaskFunction[..., Any]:
        try:
            return self.tasks[name]
        except KeyError:
            raise UnknownTask(f"no task named {name!r} is registered") from None

    # -- producing -----------------------------------------------------------------------

    def build(
        self, call: Call, now_ms: int | None = None, now: datetime | None = None
    ) -> tuple[str, Envelope]:
        """Validate ``call`` and build its first message: (id, envelope). Raises
        ``InvalidMessage``; writes nothing. ``now_ms``/``now`` let a bulk caller pass the
        clock reading once."""
        task = self.lookup(call.task)
        if now_ms is None:
            now_ms = self.clock.now_ms()
            now = None
        if now is None:
            now = to_datetime(now_ms)
        args, kwargs = task.arguments.to_json(call.args, call.kwargs)
        queue = call.queue or task.options.queue
        _check_scalars(call, queue)
        stored, fire, jitter_s = _plan(call, now)
        if call.key is not None:
            chain = keyed_chain_id(queue, call.key)
        elif call.identity is not None:
            chain = identity_chain_id(queue, call.identity)
        else:
            chain = new_chain_id(now_ms)
        message_id = occurrence_id(chain, fire.occurrence)
        priority = task.options.priority if call.priority is None else call.priority
        # every field was validated above, so encode directly instead of through a model
        body = encode_fields(
            id=message_id,
            queue=queue,
            task=task.name,
            chain=chain,
            scheduled_at=fire.at,
            enqueued_at=now,
            args=args,
            kwargs=kwargs,
            key=call.key,
            priority=priority,
            trigger=None
            if stored is None
            else stored.model_dump(mode="json", exclude_defaults=True),
            occurrence=fire.occurrence,
            max_attempts=task.options.retry.max_attempts,
            timeout_s=task.options.timeout_s,
            headers=call.headers,
            misfires=fire.misfires,
        )
        return message_id, self._envelope_for(
            message_id,
            queue,
            call.key,
            priority,
            task.options.timeout_s,
            body,
            fire.at,
            jitter_s,
            now,
            now_ms,
        )

    def _envelope_for(
        self,
        message_id: str,
        queue: str,
        key: str | None,
        priority: int,
        timeout_s: float,
        body: bytes,
        at: datetime,
        jitter_s: float,
        now: datetime | None = None,
        now_ms: int | None = None,
    ) -> Envelope:
        if len(body) > self.settings.max_payload_bytes:
            raise InvalidMessage(
                f"message {message_id} is {len(body)} bytes, over the "
                f"{self.settings.max_payload_bytes}-byte limit (max_payload_bytes)"
            )
        due = at + timedelta(seconds=self._rng.uniform(0, jitter_s)) if jitter_s else at
        due_ms = now_ms if now_ms is not None and due is now else to_ms(due)
        return Envelope(message_id, queue, key, priority, due_ms, int(timeout_s * 1000), body)

    def enqueue(self, call: Call, on_conflict: str | OnConflict = OnConflict.ERROR) -> str:
        """Validate and store one invocation; returns its message id."""
        mode = _conflict_mode(on_conflict)
        message_id, envelope = self.build(call)
        self.backend.enqueue([envelope], mode)
        return message_id

    def enqueue_many(
        self,
        calls: Iterable[Call],
        on_conflict: str | OnConflict = OnConflict.ERROR,
        batch_size: int = 1000,
    ) -> EnqueueReport:
        """Validate and store many invocations, ``batch_size`` per backend round trip.

        Each batch is validated whole before any of it is written, so a bad call raises
        ``InvalidMessage`` with nothing of its batch stored (earlier batches are)."""
        mode = _conflict_mode(on_conflict)
        report = EnqueueReport()
        batch: list[Envelope] = []
        now_ms = self.clock.now_ms()
        now = to_datetime(now_ms)

        def flush() -> None:
            for outcome in self.backend.enqueue(batch, mode):
                report.outcomes[outcome] = report.outcomes.get(outcome, 0) + 1
            batch.clear()

        for call in calls:
            message_id, envelope = self.build(call, now_ms, now)
            report.ids.append(message_id)
            batch.append(envelope)
            if len(batch) >= batch_size:
                flush()
        if batch:
            flush()
        return report

    # -- reading and cancelling ----------------------------------------------------------

    def get(
        self, *, id: str | None = None, key: str | None = None, queue: str | None = None
    ) -> ScheduledMessage | None:
        """Read a scheduled (or running) message by ``id`` or by ``key`` (in ``queue``)."""
        if (id is None) == (key is None):
            raise InvalidMessage("give exactly one of id= and key=")
        if key is not None:
            stored = self.backend.get_by_key(queue or self.settings.default_queue, key)
        else:
            assert id is not None
            stored = self.backend.get(id, queue)
        return None if stored is None else ScheduledMessage.from_stored(stored)

    def cancel(
        self, *, id: str | None = None, key: str | None = None, queue: str | None = None
    ) -> bool:
        """Cancel by ``id`` or ``key``. A running occurrence finishes but does not reschedule.
        Returns False when there was nothing to cancel."""
        if (id is None) == (key is None):
            raise InvalidMessage("give exactly one of id= and key=")
        if key is not None:
            return self.backend.delete_by_key(queue or self.settings.default_queue, key)
        assert id is not None
        return self.backend.delete(id, queue)

    def schedules(self, queue: str | None = None) -> list[ScheduleInfo]:
        """Keyed recurring messages with their next run, last run and misfires."""
        result = []
        for stored in self.backend.keyed(queue):
            message = Message.decode(stored.envelope.body)
            if message.trigger is None or message.key is None:
                continue
            result.append(
                ScheduleInfo(
                    message.queue,
                    message.key,
                    message.task,
                    message.trigger,
                    to_datetime(stored.envelope.due_ms),
                    message.last_run_at,
                    message.misfires,
                    stored.state,
                )
            )
        return result

    def install_periodic(self) -> list[Outcome]:
        """Install every ``@app.periodic`` schedule by key. A schedule already installed with
        the same trigger is left alone; one whose trigger changed in code is replaced."""
        outcomes = []
        for p in self.periodics:
            current = self.get(key=p.key, queue=p.queue)
            if (
                current is not None
                and current.message.trigger is not None
                and (_same_schedule(current.message.trigger, p.trigger))
            ):
                outcomes.append(Outcome.IGNORED)
                continue
            mode = OnConflict.IGNORE if current is None else OnConflict.REPLACE
            _, envelope = self.build(Call(p.task, key=p.key, trigger=p.trigger, queue=p.queue))
            outcomes.extend(self.backend.enqueue([envelope], mode))
        return outcomes

    # -- what workers need ---------------------------------------------------------------

    def next_occurrence(self, message: Message, now_ms: int) -> Envelope | None:
        """The envelope of the occurrence after ``message``, or None if the chain ends."""
        if message.trigger is None:
            return None
        fire = message.trigger.following(
            message.scheduled_at, message.occurrence, to_datetime(now_ms)
        )
        if fire is None:
            return None
        nxt = message.model_copy(
            update={
                "id": occurrence_id(message.chain, fire.occurrence),
                "occurrence": fire.occurrence,
                "scheduled_at": fire.at,
                "enqueued_at": to_datetime(now_ms),
                "last_run_at": message.scheduled_at,
                "misfires": message.misfires + fire.misfires,
            }
        )
        return self._envelope_for(
            nxt.id,
            nxt.queue,
            nxt.key,
            nxt.priority,
            nxt.timeout_s,
            nxt.encode(),
            fire.at,
            message.trigger.jitter.total_seconds(),
        )


def _check_scalars(call: Call, queue: str) -> None:
    if not isinstance(queue, str) or not queue:
        raise InvalidMessage(f"queue must be a non-empty string, not {queue!r}")
    if call.key is not None and (not isinstance(call.key, str) or not call.key):
        raise InvalidMessage(f"key must be a non-empty string, not {call.key!r}")
    if call.priority is not None and (
        not isinstance(call.priority, int)
        or isinstance(call.priority, bool)
        or not -1000 <= call.priority <= 1000
    ):
        raise InvalidMessage(
            f"priority must be an integer from -1000 to 1000, not {call.priority!r}"
        )
    if call.headers is not None and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in call.headers.items()
    ):
        raise InvalidMessage("headers must map strings to strings")


def _plan(call: Call, now: datetime) -> tuple[Repeating | Cron | None, Fire, float]:
    """(trigger to store with the message, first fire, jitter in seconds) for ``call``."""
    if (call.at is not None) + (call.delay is not None) + (call.trigger is not None) > 1:
        raise InvalidMessage("give at most one of at=, delay= and trigger=")
    try:
        if call.trigger is None:
            if call.at is not None:
                return None, Fire(require_aware(call.at, "at"), 0), 0.0
            if call.delay is not None:
                if call.delay < timedelta(0):
                    raise ValueError("delay must not be negative")
                return None, Fire(now + call.delay, 0), 0.0
            return None, Fire(now, 0), 0.0
        plan = call.trigger.anchored(now)
    except ValueError as err:
        raise InvalidMessage(str(err)) from err
    fire = plan.first(now)
    if fire is None:
        raise InvalidMessage(f"trigger {plan!r} never fires after {now.isoformat()}")
    stored = plan if isinstance(plan, Repeating | Cron) else None
    return stored, fire, plan.jitter.total_seconds()


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


def _same_schedule(a: Trigger, b: Trigger) -> bool:
    """Equal apart from the anchor that enqueue fills in."""
    ignore = {"start", "delay", "at"}
    return type(a) is type(b) and a.model_dump(exclude=ignore) == b.model_dump(exclude=ignore)
