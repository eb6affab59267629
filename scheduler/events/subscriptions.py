"""Subscriptions as stored: which task receives which events.

A subscription is kept in the backend, not only in code, so that an event emitted by any
process (a producer that never imported the subscriber's module, ``tickwork emit``)
reaches every subscriber, and so that the dashboard can list them. Each is a parked
message (never due) in the queue ``SUBSCRIPTIONS_QUEUE``, keyed by its task's name, of
task ``SUBSCRIPTION_TASK``, whose one argument is the ``Subscription``; workers install
their app's subscriptions at start (as they install ``@app.periodic`` schedules) and
uninstall those of their tasks' modules that the code no longer declares.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from tickwork.scheduler.backends import Backend, Envelope, OnConflict
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.errors import DecodeError
from tickwork.scheduler.model.event_names import check_pattern, matches
from tickwork.scheduler.model.message import Message, kept_record
from tickwork.scheduler.model.tasks import TaskFunction

#: the queue holding the subscriptions (no worker claims from it: nothing in it is due)
SUBSCRIPTIONS_QUEUE = "tickwork.subscriptions"

#: the task name of a stored subscription's message
SUBSCRIPTION_TASK = "tickwork.subscription"


class Subscription(BaseModel):
    """Task ``task`` receives every event whose name matches one of ``patterns``: a
    message in ``queue`` per event, with the task's priority, attempts and lease as
    they were when it was installed. With ``workflow`` (a subscribed workflow's steps,
    ``scheduler.events.workflows``), ``task`` is the subscription's name and each event
    starts a run of the workflow."""

    model_config = ConfigDict(frozen=True)

    task: str
    patterns: tuple[str, ...]
    queue: str
    priority: int = 0
    max_attempts: int = 1
    timeout_s: float = 300.0
    #: the module that declared it: a worker of that module's app uninstalls it once the
    #: code no longer declares it
    owner: str = ""
    workflow: dict[str, Any] | None = None

    def wants(self, name: str) -> bool:
        """Whether this subscription receives events named ``name``."""
        return any(matches(pattern, name) for pattern in self.patterns)


def subscription_of(task: TaskFunction[..., object], patterns: Sequence[str]) -> Subscription:
    """The subscription of ``task`` to ``patterns`` (each checked), with its options."""
    options = task.options
    return Subscription(
        task=task.name,
        patterns=tuple(dict.fromkeys(check_pattern(p) for p in patterns)),
        queue=options.queue,
        priority=options.priority,
        max_attempts=options.retry.retries + 1,
        timeout_s=options.timeout_s,
        owner=task.name.rpartition(".")[0] or task.name,
    )


def subscription_envelope(subscription: Subscription, now: datetime) -> Envelope:
    """The parked message that stores ``subscription``."""
    record = subscription.model_dump(mode="json")
    return kept_record(SUBSCRIPTIONS_QUEUE, SUBSCRIPTION_TASK, subscription.task, record, now)


def stored_subscriptions(backend: Backend) -> list[Subscription]:
    """Every subscription stored in ``backend`` (one read), by task name."""
    found = []
    for stored in backend.messages.keyed(SUBSCRIPTIONS_QUEUE):
        subscription = _decode(stored.envelope.body)
        if subscription is not None:
            found.append(subscription)
    return sorted(found, key=lambda s: s.task)


def stored_subscription(backend: Backend, task: str) -> Subscription | None:
    """The subscription stored for ``task`` (a task's name, or a workflow's), or None."""
    stored = backend.messages.get_by_key(SUBSCRIPTIONS_QUEUE, task)
    return None if stored is None else _decode(stored.envelope.body)


def _decode(body: bytes) -> Subscription | None:
    try:
        message = Message.decode(body)
    except DecodeError:
        return None
    if message.task != SUBSCRIPTION_TASK or not message.args:
        return None
    try:
        return Subscription.model_validate(message.args[0])
    except ValidationError:
        return None


def install(backend: Backend, declared: Sequence[Subscription], now_ms: int) -> int:
    """Store each of ``declared`` unless the same is stored already; how many were
    written (a changed subscription replaces the stored one)."""
    stored = {s.task: s for s in stored_subscriptions(backend)} if declared else {}
    fresh = [s for s in declared if stored.get(s.task) != s]
    if fresh:
        now = to_datetime(now_ms)
        envelopes = [subscription_envelope(s, now) for s in fresh]
        backend.messages.enqueue(envelopes, OnConflict.REPLACE)
    return len(fresh)


def uninstall(backend: Backend, task: str) -> bool:
    """Remove ``task``'s subscription; False if it had none."""
    return backend.messages.delete_by_key(SUBSCRIPTIONS_QUEUE, task)


def reconcile(backend: Backend, declared: Sequence[Subscription], owners: set[str]) -> list[str]:
    """Uninstall the stored subscriptions declared by one of ``owners`` (this app's task
    modules) that are not among ``declared``; the tasks whose subscription went."""
    keep = {s.task for s in declared}
    gone = [
        s.task for s in stored_subscriptions(backend) if s.owner in owners and s.task not in keep
    ]
    return [task for task in gone if uninstall(backend, task)]
