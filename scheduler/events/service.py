"""``app.events``: subscriptions, the event messages ``app.emit`` stores, and what
events were delivered.

The app registers two built-in tasks through it: ``EVENT_TASK`` (an emitted event's
message, whose run delivers it: ``scheduler.events.fanout``) and ``WAIT_TASK`` (a
``wait_for`` step: ``scheduler.events.waits``). They are known to every app, so any
worker of the queue an event is emitted into delivers it, and they add no queue to a
worker's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from tickwork.scheduler.backends import Backend
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.events import subscriptions
from tickwork.scheduler.events.fanout import (
    EVENT_TASK,
    Delivered,
    FanOut,
    event_argument,
    read_recent,
)
from tickwork.scheduler.events.live import LiveEvents
from tickwork.scheduler.events.subscriptions import (
    Subscription,
    stored_subscriptions,
    subscription_of,
)
from tickwork.scheduler.events.waits import WAIT_TASK, OnTimeout, Waits
from tickwork.scheduler.events.workflows import (
    WORKFLOW_TASK,
    WorkflowStarts,
    check_workflow,
    with_event,
)
from tickwork.scheduler.ids import new_chain_id
from tickwork.scheduler.model.event_names import Event, check_name, check_pattern
from tickwork.scheduler.model.registry import TaskRegistry
from tickwork.scheduler.model.retry import RetryPolicy
from tickwork.scheduler.model.tasks import Call, TaskFunction
from tickwork.scheduler.parts import AppParts
from tickwork.scheduler.runs.context import current_run
from tickwork.scheduler.workflows.graph_records import build_graph
from tickwork.scheduler.workflows.graphs import Graph, Workflow, compile_spec


class Events:
    """The app's events: ``app.events``."""

    def __init__(
        self, parts: AppParts, registry: TaskRegistry, start_run: Callable[[Graph, str, int], None]
    ) -> None:
        """``start_run``: starts one run of a graph under an id (``app.batches``)."""
        self._parts = parts
        self._registry = registry

        def now_ms() -> int:  # the app's clock of the moment (a test may swap it)
            return parts.backend_clock.now_ms()

        retention = timedelta(seconds=parts.settings.batch_retention_s)
        self._fanout = FanOut(lambda: parts.backend, lambda: parts.builder, now_ms, retention)
        self._waits = Waits(lambda: parts.backend, now_ms)
        #: the waits for events of ``wait_for`` steps and durable runs
        self.waits = self._waits
        self._starts = WorkflowStarts(lambda: parts.backend, start_run, now_ms)
        self._live = LiveEvents(lambda: parts.backend, now_ms)
        #: the workflows this app's code subscribes, by name
        self._workflows: dict[str, Subscription] = {}
        self._installed = False
        fanout, waits, starts = self._fanout, self._waits, self._starts

        def deliver(event: dict[str, Any]) -> dict[str, Any]:
            return fanout.run(current_run().message_id, event_argument(event))

        def wait(name: str, key: str | None, timeout_s: float, on_timeout: OnTimeout) -> Any:
            run = current_run()
            return waits.run(run.message_id, run.queue, name, key, timeout_s, on_timeout)

        def start(name: str, event: dict[str, Any]) -> str | None:
            return starts.run(name, event_argument(event))

        registry.builtin(deliver, EVENT_TASK, RetryPolicy(retries=10))
        registry.builtin(wait, WAIT_TASK, RetryPolicy(retries=0))
        registry.builtin(start, WORKFLOW_TASK, RetryPolicy(retries=10))

    @property
    def backend(self) -> Backend:
        return self._parts.backend

    def call(
        self,
        name: str,
        payload: Any = None,
        *,
        key: str | None = None,
        event_id: str | None = None,
        queue: str | None = None,
    ) -> tuple[str, Call]:
        """The event's id and the message that ``app.emit`` stores for it (checked:
        ``InvalidMessage`` for a bad name or a payload that is not JSON)."""
        check_name(name)
        if key is not None and not isinstance(key, str):
            raise InvalidMessage(f"an event's key is a string, not {key!r}")
        now_ms = self._parts.backend_clock.now_ms()
        event = Event(
            id=event_id or "e" + new_chain_id(now_ms),
            name=name,
            key=key,
            payload=payload,
            emitted_at=to_datetime(now_ms),
        )
        try:
            argument = event.model_dump(mode="json")
        except ValueError as err:  # pydantic's serialization error is a ValueError
            raise InvalidMessage(f"the payload of event {name!r} is not JSON: {err}") from err
        call = Call(EVENT_TASK, args=(argument,), identity=f"event:{event.id}", queue=queue)
        return event.id, call

    def stored(self, event_id: str, call: Call, in_transaction: bool = False) -> str:
        """Event ``event_id``'s message ``call`` was stored (``app.emit``): tell the
        streams that listen, unless it was written in the caller's transaction (which
        may yet roll back); returns the event's id."""
        if not in_transaction:
            event = call.args[0]
            queue = call.queue or self._parts.settings.default_queue
            self._live.emitted(event_id, event["name"], event["key"], queue)
        return event_id

    def before_emit(self) -> None:
        """Install this app's declared subscriptions once, so an app that emits to its
        own subscribers reaches them before any worker of it has started."""
        if not self._installed and (self._registry.subscriptions or self._workflows):
            self.install()

    # -- subscriptions -------------------------------------------------------------------

    def declared(self) -> list[Subscription]:
        """The subscriptions this app's code declares (``@app.task(on_events=...)``)."""
        tasks = [
            subscription_of(self._registry.lookup(task), patterns)
            for task, patterns in sorted(self._registry.subscriptions.items())
        ]
        return tasks + [self._workflows[name] for name in sorted(self._workflows)]

    def install(self, reconcile: bool = False) -> int:
        """Store the declared subscriptions (workers do at start); with ``reconcile``,
        then remove the stored ones of this app's task modules that the code no longer
        declares. How many were written."""
        declared = self.declared()
        written = subscriptions.install(self.backend, declared, self._parts.backend_clock.now_ms())
        if reconcile:
            owners = {
                name.rpartition(".")[0] or name
                for name in self._registry.tasks
                if name not in self._registry.builtins
            }
            subscriptions.reconcile(self.backend, declared, owners)
        self._installed = True
        return written

    def subscribe(
        self,
        target: TaskFunction[..., Any] | str | Workflow | Call,
        *patterns: str,
        name: str | None = None,
        queue: str | None = None,
    ) -> Subscription:
        """Subscribe a task (registered with this app, or its name) to the events matching
        ``patterns`` from now on, in code and in the backend (added to what it declares
        already). Or a workflow (a chain, group, batch or graph; its steps' arguments
        ``EVENT`` stand for the event), under ``name``: each event starts a run of it,
        from a message in ``queue`` (default: the app's)."""
        if not isinstance(target, str | TaskFunction) and (
            not isinstance(target, Call) or target.then
        ):
            return self._subscribe_workflow(target, patterns, name, queue)
        task = target.task if isinstance(target, Call) else target
        function = self._registry.lookup(task if isinstance(task, str) else task.name)
        self._registry.subscribe(function, patterns)
        subscription = subscription_of(function, self._registry.subscriptions[function.name])
        subscriptions.install(self.backend, [subscription], self._parts.backend_clock.now_ms())
        return subscription

    def _subscribe_workflow(
        self,
        workflow: Workflow | Call,
        patterns: Sequence[str],
        name: str | None,
        queue: str | None,
    ) -> Subscription:
        if not name or name in self._registry.tasks:
            raise InvalidMessage(
                "a workflow subscribes under a name= of its own (not a task's name)"
            )
        spec = workflow if isinstance(workflow, Graph) else compile_spec(workflow)
        stored = check_workflow(spec)
        sample = Event(id="e0", name="sample", emitted_at=to_datetime(0)).model_dump(mode="json")
        build_graph(  # every step checked as a run builds it: bad input fails here, not later
            self._parts.builder,
            with_event(stored, sample),
            self._parts.backend_clock.now_ms(),
            timedelta(seconds=self._parts.settings.batch_retention_s),
            self._parts.settings.default_queue,
        )
        first = spec.nodes[0].call.task
        subscription = Subscription(
            task=name,
            patterns=tuple(dict.fromkeys(check_pattern(p) for p in patterns)) or _none(name),
            queue=queue or self._parts.settings.default_queue,
            max_attempts=11,
            timeout_s=10.0,
            owner=first.rpartition(".")[0] or first,
            workflow=stored.model_dump(mode="json", exclude_defaults=True),
        )
        self._workflows[name] = subscription
        subscriptions.install(self.backend, [subscription], self._parts.backend_clock.now_ms())
        return subscription

    def unsubscribe(self, target: TaskFunction[..., Any] | str) -> bool:
        """Remove a task's subscription (or a workflow's, by its name), in code and in the
        backend; False if it had none stored."""
        name = target if isinstance(target, str) else target.name
        self._registry.subscriptions.pop(name, None)
        self._workflows.pop(name, None)
        return subscriptions.uninstall(self.backend, name)

    def subscriptions(self) -> list[Subscription]:
        """Every subscription stored in the backend (of every app sharing it)."""
        return stored_subscriptions(self.backend)

    def recent(self, limit: int = 50) -> list[Delivered]:
        """The newest ``limit`` events delivered (kept 7 days, at most 1,000), newest
        first, each with the subscribers it reached and the waits it woke."""
        return read_recent(self.backend, limit)


def _none(name: str) -> tuple[str, ...]:
    raise InvalidMessage(f"workflow {name!r} subscribes to no event pattern")
