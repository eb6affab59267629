"""The ``App``: the facade users hold. It owns a task registry (``scheduler.model.registry``), a
message builder (``scheduler.producing.building``) and, opened on first use, a backend. The
producer's verbs are its own (tasks, enqueue, get, cancel, abort, result, preview); the
operator's are on small services reached from it, each a collaborator over the same
parts: ``app.schedules`` (``scheduler.schedules.service``), ``app.queues``
(``scheduler.views.queues``), ``app.poison`` (``scheduler.views.poison``), ``app.batches``
(``scheduler.workflows.service``), ``app.workers`` (``scheduler.views.presence``) and
``app.runs`` (``scheduler.views.runs``: a durable run's journal);
each operator verb records itself in ``app.audit`` (``scheduler.views.audit``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timedelta
from typing import Any, ParamSpec, TypeVar, Unpack, overload

from tickwork.scheduler.backends import (
    Backend,
    Envelope,
    OnConflict,
    StoredMessage,
    open_backend,
)
from tickwork.scheduler.backends.codec import BodyCodec, CodedBackend
from tickwork.scheduler.clock import Clock, CorrectedClock, SystemClock, to_datetime
from tickwork.scheduler.encryption import Encryption, keys_of
from tickwork.scheduler.errors import BackendError, InvalidMessage, ScheduleNotFound
from tickwork.scheduler.events.service import Events
from tickwork.scheduler.hooks import Hook, Hooks
from tickwork.scheduler.model.batching import BatchedCall
from tickwork.scheduler.model.handles import TaskInfo
from tickwork.scheduler.model.message import ScheduledMessage
from tickwork.scheduler.model.registry import Periodic, TaskRegistry
from tickwork.scheduler.model.task_keywords import BatchKeywords, TaskKeywords
from tickwork.scheduler.model.tasks import Call, TaskClass, TaskFunction
from tickwork.scheduler.producer import Producer
from tickwork.scheduler.producing.building import MessageBuilder
from tickwork.scheduler.producing.in_thread import in_thread
from tickwork.scheduler.producing.planning import upcoming
from tickwork.scheduler.producing.reports import EnqueueReport
from tickwork.scheduler.runs import results
from tickwork.scheduler.schedules import control
from tickwork.scheduler.schedules.control import AbortResult
from tickwork.scheduler.schedules.ledger import HistoryEntry
from tickwork.scheduler.schedules.service import Schedules
from tickwork.scheduler.settings import Settings
from tickwork.scheduler.views.audit import Audit
from tickwork.scheduler.views.limits import Limits
from tickwork.scheduler.views.poison import Poison
from tickwork.scheduler.views.presence import Workers
from tickwork.scheduler.views.queues import Queues
from tickwork.scheduler.views.runs import Runs
from tickwork.scheduler.workflows.graphs import Workflow
from tickwork.scheduler.workflows.service import Batches
from tickwork.triggers import Trigger
from tickwork.triggers.preview import Occurrence, preview

P = ParamSpec("P")
R = TypeVar("R")


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
        hooks: Iterable[Hook] = (),
    ) -> None:
        """``hooks`` (``scheduler.hooks``): the app's extension points, in order."""
        if isinstance(backend, Backend):
            self.settings = settings or Settings.load()
            self._backend: Backend | None = backend
            self._given_backend = True
        else:
            self._given_backend = False
            self.settings = settings or Settings.load(backend=backend)
            self._backend = None
        self.clock: Clock = clock or SystemClock()
        self.hooks = Hooks(hooks)
        if self.settings.encryption_keys:  # encrypted last: what other hooks made
            self.hooks.add(Encryption(keys_of(self.settings.encryption_keys)))
        self._coded: CodedBackend | None = None  # the backend behind the hooks' body codec
        retention = (
            self.settings.keep_results,
            timedelta(seconds=self.settings.result_retention_s),
        )
        self.registry = TaskRegistry(
            self, self.settings.default_queue, self.settings.default_timeout_s, retention
        )
        self.backend_clock, self.builder = self._stamping()
        self.Task: type[TaskClass] = type("Task", (TaskClass,), {"app": self})
        #: the operator's services (see the module docstring), their actions in ``audit``
        self.audit = Audit(self)
        self.poison = Poison(self)
        self.schedules = Schedules(self)
        self.builder.shared = self.schedules.calendars.resolve
        self.builder.shared_required = self.schedules.calendars.require
        self.queues = Queues(self, self.registry.queues)
        self.batches = Batches(self)
        self.workers = Workers(self)
        self.limits = Limits(self, self.registry)
        self.runs = Runs(self)
        self.events = Events(self, self.registry, self.batches.start_run)
        self._producer = Producer(self, self.batches)

    # -- backend -------------------------------------------------------------------------

    @property
    def backend(self) -> Backend:
        """The backend (opened on first use), its bodies through the hooks' codec if one
        transforms them."""
        if self._backend is None:
            self._backend = open_backend(self.settings.backend, clock=self.clock)
        if not self.hooks.has_codec:
            return self._backend
        if self._coded is None or self._coded.inner is not self._backend:
            hooks = self.hooks
            data = (hooks.encode_data, hooks.decode_data) if hooks.has_data_codec else (None, None)
            codec = BodyCodec(hooks.encode, hooks.decode, *data)
            self._coded = CodedBackend(self._backend, codec)
        return self._coded

    @property
    def backend_url(self) -> str | None:
        """The URL the backend is opened from; None for an app given a ``Backend``."""
        return None if self._given_backend else self.settings.backend

    def add_hook(self, hook: Hook) -> None:
        """Add ``hook`` after the app's others (before workers start: a running worker
        took its steps' hooks when it started)."""
        self.hooks.add(hook)

    def _stamping(self) -> tuple[CorrectedClock, MessageBuilder]:
        """The backend's clock read locally and the builder that stamps with it: messages
        are stamped on the backend's clock (its offset measured once a minute), so a
        producer whose clock is off delays and schedules correctly."""
        backend_clock = CorrectedClock(
            lambda: self.backend.now_ms(), self.clock, errors=(BackendError,)
        )
        builder = MessageBuilder(self.registry, backend_clock, self.settings.max_payload_bytes)
        return backend_clock, builder

    def use_backend(self, url: str, *, clock: Clock | None = None) -> None:
        """Point the app at another backend URL (before or after it was first used),
        closing the one it had; with ``clock``, on that clock from now on (a test's
        ``ManualClock``: SQLite then keeps its time by it)."""
        self.close()
        self.settings = self.settings.model_copy(update={"backend": url})
        self._given_backend = False
        if clock is not None:
            self.clock = clock
            self.backend_clock, self.builder = self._stamping()

    def close(self) -> None:
        self.backend_clock.forget()  # another backend may have another clock
        if self._backend is not None:
            self._backend.close()
            self._backend = None
            self._coded = None

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- registering tasks ---------------------------------------------------------------

    @property
    def tasks(self) -> dict[str, TaskFunction[..., Any]]:
        """Registered tasks by name (tickwork's own, ``registry.builtins``, left out)."""
        hidden = self.registry.builtins | self.registry.aliases.keys()
        return {name: task for name, task in self.registry.tasks.items() if name not in hidden}

    def task_queue(self, name: str) -> str | None:
        """The default queue of the task registered as ``name`` (None: not registered)."""
        task = self.registry.tasks.get(name)
        return None if task is None else task.options.queue

    @property
    def periodics(self) -> list[Periodic]:
        """Schedules declared with ``@app.periodic``."""
        return self.registry.periodics

    @overload
    def task(self, fn: Callable[P, R], /) -> TaskFunction[P, R]: ...

    @overload
    def task(
        self, fn: None = None, /, **options: Unpack[BatchKeywords]
    ) -> Callable[[Callable[[list[BatchedCall]], R]], TaskFunction[..., R]]: ...

    @overload
    def task(
        self, fn: None = None, /, **options: Unpack[TaskKeywords]
    ) -> Callable[[Callable[P, R]], TaskFunction[P, R]]: ...

    def task(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """Register a function as a task: ``@app.task``, or ``@app.task(...)`` with the
        options ``TaskKeywords`` lists and explains (``scheduler/model/task_keywords.py``:
        ``name``, ``queue``, ``retries`` or ``retry``, ``retry_on``, ``dont_retry_on``,
        ``timeout``, ``time_limit``, ``soft_time_limit``, ``priority``, ``max_wait``,
        ``unique_for``, ``concurrency_limit``, ``rate_limit``, ``throttle``, ``limit_key``,
        ``fair_key``, ``keep_result``, ``history``, ``expires``, ``on_events``, ``aliases``,
        ``debounce``, ``durable``; a batched task's ``batch_size``, ``batch_timeout``,
        ``batch_key``: ``BatchKeywords``)."""

        def register(function: Callable[..., Any]) -> TaskFunction[..., Any]:
            return self.registry.function(function, **options)

        return register(fn) if fn is not None else register

    def register_class(self, cls: type[TaskClass]) -> TaskFunction[..., Any]:
        """Register a ``TaskClass`` subclass (called by ``app.Task.__init_subclass__``)."""
        return self.registry.task_class(cls)

    def include(self, task: TaskFunction[P, R]) -> TaskFunction[P, R]:
        """Register a task defined on another app (e.g. a producer that imports the
        workers' task module but talks to its own backend)."""
        return self.registry.add(task)

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
            self.registry.add_periodic(task, trigger, key)
            return task

        return register

    def lookup(self, name: str) -> TaskFunction[..., Any]:
        """The task registered as ``name``; raises ``UnknownTask``."""
        return self.registry.lookup(name)

    # -- producing (``scheduler.producer``) ---------------------------------------------

    def build(
        self, call: Call, now_ms: int | None = None, now: datetime | None = None
    ) -> tuple[str, Envelope]:
        """Validate ``call`` and build its first message: (id, envelope). Raises
        ``InvalidMessage``; writes nothing (see ``scheduler.producing.building``)."""
        return self.builder.build(call, now_ms, now)

    def transaction(self, connection: Any) -> AbstractContextManager[None]:
        """Within this block (this thread or task), every write of the app (``delay``,
        ``schedule``, ``enqueue``, ``enqueue_many``, batches, chains, ``cancel``) goes
        through ``connection``, your own psycopg connection, inside its open transaction:
        workers see the messages when it commits; a rollback leaves nothing, and undoes
        a cancel. With an ``AsyncConnection``, enter it in a coroutine and await the
        asynchronous verbs (``adelay``, ``aschedule``, ``aenqueue``, ``aenqueue_many``,
        ``acancel``). PostgreSQL only (``Capability.TRANSACTIONS``); elsewhere it raises
        ``ConfigurationError``."""
        return self.backend.transaction(connection)

    def _within(self, connection: Any) -> AbstractContextManager[None]:
        return nullcontext() if connection is None else self.backend.transaction(connection)

    def enqueue(
        self,
        call: Call | Workflow,
        on_conflict: str | OnConflict = OnConflict.ERROR,
        *,
        block: bool = True,
        block_timeout: float | None = None,
        connection: Any = None,
    ) -> str:
        """Validate and store one invocation; returns its message id. While its queue is
        full (``app.queues.configure``), wait up to ``block_timeout`` seconds (default: the
        ``enqueue_block_s`` setting) for room, then raise ``QueueFull``; with
        ``block=False`` raise it at once. A batch or a group is stored whole
        (``app.batches.enqueue``; its handle is returned). With ``connection``, it is
        written inside that connection's transaction (``transaction``)."""
        with self._within(connection):
            return self._producer.enqueue(
                call, on_conflict, block=block, block_timeout=block_timeout
            )

    def enqueue_many(
        self,
        calls: Iterable[Call],
        on_conflict: str | OnConflict = OnConflict.ERROR,
        batch_size: int = 1000,
        *,
        block: bool = True,
        block_timeout: float | None = None,
        connection: Any = None,
    ) -> EnqueueReport:
        """Validate and store many invocations, ``batch_size`` per backend round trip.
        Each batch is validated whole before any of it is written, so a bad call raises
        ``InvalidMessage`` with nothing of its batch stored (earlier batches are). A batch
        that does not fit its queue's bound waits for room as ``enqueue`` does; the
        ``QueueFull`` raised after ``block_timeout`` lists every message the call wrote.
        With ``connection``, every batch is written inside that connection's transaction
        (``transaction``), so a rollback takes all of them back."""
        with self._within(connection):
            return self._producer.enqueue_many(
                calls, on_conflict, batch_size, block=block, block_timeout=block_timeout
            )

    async def aenqueue(
        self,
        call: Call | Workflow,
        on_conflict: str | OnConflict = OnConflict.ERROR,
        *,
        block: bool = True,
        block_timeout: float | None = None,
        connection: Any = None,
    ) -> str:
        """``enqueue`` without blocking the event loop: the message is built on the loop
        and written through ``backend.messages.aenqueue`` (from the loop itself on Redis,
        in a thread elsewhere). With ``connection``, a psycopg ``AsyncConnection`` (or a
        ``Connection``), it is written inside that connection's transaction."""
        with self._within(connection):
            return await self._producer.aenqueue(
                call, on_conflict, block=block, block_timeout=block_timeout
            )

    aenqueue_many = in_thread(enqueue_many)

    def emit(
        self,
        name: str,
        payload: Any = None,
        *,
        key: str | None = None,
        event_id: str | None = None,
        queue: str | None = None,
        connection: Any = None,
    ) -> str:
        """Emit event ``name`` with a JSON ``payload`` (and a ``key`` that waits match on):
        stored as one message (in ``queue``, default the app's), which a worker delivers
        to every subscribed task and waiting step (``scheduler.events``); returns the
        event's id. Emitting ``event_id`` again (a producer's retry) delivers nothing more.
        With ``connection``, written inside that connection's transaction."""
        self.events.before_emit()
        event, call = self.events.call(name, payload, key=key, event_id=event_id, queue=queue)
        self.enqueue(call, connection=connection)
        return self.events.stored(event, call, in_transaction=connection is not None)

    async def aemit(
        self,
        name: str,
        payload: Any = None,
        *,
        key: str | None = None,
        event_id: str | None = None,
        queue: str | None = None,
        connection: Any = None,
    ) -> str:
        """``emit`` without blocking the event loop (as ``aenqueue``)."""
        await asyncio.to_thread(self.events.before_emit)
        event, call = self.events.call(name, payload, key=key, event_id=event_id, queue=queue)
        await self.aenqueue(call, connection=connection)
        return await asyncio.to_thread(self.events.stored, event, call, connection is not None)

    # -- reading and cancelling ----------------------------------------------------------

    def cancel(
        self,
        *,
        id: str | None = None,
        key: str | None = None,
        queue: str | None = None,
        connection: Any = None,
        note: str | None = None,
        actor: str | None = None,
    ) -> bool:
        """Cancel by ``id`` or ``key``. A running occurrence finishes but does not reschedule.
        Returns False when there was nothing to cancel. Cancelling a recurring schedule
        records its pending occurrence as cancelled in the schedule's history, and the
        cancel with ``note`` and ``actor`` in its action log. With ``connection``, the
        cancel happens inside that connection's transaction (``transaction``): a rollback
        leaves the message scheduled."""
        with self._within(connection):
            return self.schedules.cancel(id=id, key=key, queue=queue, note=note, actor=actor)

    def run_history(
        self, message_id: str, *, queue: str | None = None, limit: int | None = None
    ) -> list[HistoryEntry]:
        """The recorded attempts of the one-off message ``message_id`` (of a task with
        ``history=True``), newest first. A schedule's: ``app.schedules.history(key)``."""
        return self.schedules.run_history(message_id, queue=queue, limit=limit)

    def get(
        self, *, id: str | None = None, key: str | None = None, queue: str | None = None
    ) -> ScheduledMessage | None:
        """Read a scheduled (or running) message by ``id`` or by ``key`` (in ``queue``)."""
        stored = self._read(id, key, queue)
        return None if stored is None else ScheduledMessage.from_stored(stored)

    def _read(self, id: str | None, key: str | None, queue: str | None) -> StoredMessage | None:
        if (id is None) == (key is None):
            raise InvalidMessage("give exactly one of id= and key=")
        if key is not None:
            return self.backend.messages.get_by_key(queue or self.settings.default_queue, key)
        assert id is not None
        return self.backend.messages.get(id, queue)

    def abort(
        self,
        *,
        id: str | None = None,
        key: str | None = None,
        queue: str | None = None,
        continue_chain: bool = True,
        actor: str | None = None,
    ) -> AbortResult:
        """Stop a run by ``id`` or ``key``. A running handler is asked to stop (sync ones
        see ``current_run().aborted``, async ones are cancelled, process-pool ones get
        ``Aborted`` raised and are killed after a grace); the run ends as aborted, with no
        retry, and its chain goes on unless ``continue_chain`` is False. A pending message
        is cancelled. Recorded in ``app.audit`` with ``actor``."""
        result = control.abort(
            self.backend, self._read(id, key, queue), continue_chain, self._now_ms()
        )
        target = id or f"{queue or self.settings.default_queue}/{key}"
        self.audit.record("message.abort", target, actor=actor, outcome=result.value)
        return result

    def preview(
        self, what: Trigger | str, count: int = 10, *, queue: str | None = None
    ) -> list[Occurrence]:
        """The next ``count`` fire times of a trigger (from now) or of the schedule held
        under key ``what`` (from its pending occurrence on), each with its wall time and
        a note when a DST change moved it. Misfire policies are not applied."""
        if not isinstance(what, str):
            trigger = self.schedules.calendars.require(what)
            return preview(trigger, count, to_datetime(self.clock.now_ms()))
        found = self.get(key=what, queue=queue)
        if found is None or found.message.trigger is None:
            where = queue or self.settings.default_queue
            raise ScheduleNotFound(f"no schedule holds the key {what!r} in queue {where!r}")
        return upcoming(found.message, count, self.schedules.calendars.resolve)

    # -- results -----------------------------------------------------------------------

    def result(self, id: str) -> TaskInfo:
        """What is known of message ``id``'s run: status, what it returned or why it failed
        (for a task that keeps results), progress."""
        return results.read(self.backend, id)

    def result_retention_ms(self, task: str) -> int | None:
        """How long task ``task`` keeps its results, in ms (None: it keeps none)."""
        found = self.registry.tasks.get(task)
        retention = found.options.result_retention if found is not None else None
        return None if retention is None else retention // timedelta(milliseconds=1)

    def _now_ms(self) -> int:
        return self.backend.now_ms()

    # -- the same from an event loop: the blocking call runs in a thread ---------------

    aget = in_thread(get)
    acancel = in_thread(cancel)
    aresult = in_thread(result)
    aabort = in_thread(abort)
