"""What a workflow is, before it is stored: a group of calls, a batch (a group with
callbacks), a chain with a group or a batch in it. Plain data, checked and stored by
``scheduler.workflows.batches`` (a flat group or batch) and
``scheduler.workflows.graphs`` (one that nests)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal, cast

from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.model.handles import WorkflowHandle
from tickwork.scheduler.model.tasks import Call, Producer

#: when a batch's callback runs: every member succeeded, all settled, or one failed
When = Literal["success", "complete", "failure"]


@dataclass(frozen=True, slots=True)
class Group:
    """Calls that run independently (in parallel on as many workers as there are) and
    settle together: enqueue it alone, or give it to ``batch`` for callbacks."""

    calls: tuple[Call | Sequenced, ...]

    def delay(self) -> WorkflowHandle:
        """Enqueue the group (Celery's ``group(...).delay()``); ``result()`` of its handle
        is the members' results in order."""
        return enqueue_workflow(self, self.calls)

    apply_async = delay
    __call__ = delay


@dataclass(frozen=True, slots=True)
class Batch:
    """A group with callbacks (see ``batch``)."""

    members: tuple[Call | Sequenced, ...]
    callbacks: dict[When, Call | Group | Sequenced] = field(default_factory=dict)
    retention: timedelta | None = None

    def delay(self) -> WorkflowHandle:
        """Enqueue the batch; ``result()`` of its handle is the members' results."""
        return enqueue_workflow(self, (*self.members, *self.callbacks.values()))

    apply_async = delay
    __call__ = delay


def group(calls: Iterable[Call | Sequenced]) -> Group:
    """The calls, as one group (at least one). A member that is a chain makes the group
    run as a graph (``scheduler.workflows.graphs``)."""
    found = tuple(calls)
    if not found:
        raise InvalidMessage("a group needs at least one call")
    return Group(found)


def batch(
    members: Group | Iterable[Call | Sequenced],
    *,
    on_success: Call | Group | Sequenced | None = None,
    on_complete: Call | Group | Sequenced | None = None,
    on_failure: Call | Group | Sequenced | None = None,
    retention: timedelta | None = None,
) -> Batch:
    """A group whose callbacks fire once, when its last member settles: ``on_success`` if
    every member succeeded, ``on_failure`` if one failed for good (poisoned or aborted),
    ``on_complete`` either way. A callback made with ``task.s()`` takes the outcome as its
    first argument (``on_success``: the members' results in order; the others: a
    ``BatchOutcome`` dict), one made with ``task.si()`` does not. ``retention``: how long
    the batch's records are kept after its last member's due time (default: the
    ``batch_retention_s`` setting, 7 days); it must outlast the batch. A member that is
    a chain, or a callback that is a group or a chain with a group in it, makes the
    batch run as a graph (``scheduler.workflows.graphs``)."""
    calls = members.calls if isinstance(members, Group) else group(members).calls
    callbacks: dict[When, Call | Group | Sequenced] = {}
    if on_success is not None:
        callbacks["success"] = on_success
    if on_complete is not None:
        callbacks["complete"] = on_complete
    if on_failure is not None:
        callbacks["failure"] = on_failure
    return Batch(calls, callbacks, retention)


@dataclass(frozen=True, slots=True)
class Sequenced:
    """A chain whose steps are not all plain calls (``chain`` with a group or a batch in
    it): enqueued as the graph ``scheduler.workflows.graphs.compile_spec`` makes of it."""

    parts: tuple[Call | Group | Batch | Sequenced, ...]

    def delay(self) -> WorkflowHandle:
        """Enqueue the chain (it runs as a graph); ``result()`` of its handle is each
        step's result by name."""
        return enqueue_workflow(self, self.parts)

    apply_async = delay
    __call__ = delay


def enqueue_workflow(workflow: object, parts: Iterable[object]) -> WorkflowHandle:
    """Enqueue ``workflow`` through the app its first call (found in ``parts``) was made
    for: the canvas form ``workflow.delay()`` of ``app.enqueue(workflow)``."""
    producer = producer_of(parts)
    return cast(WorkflowHandle, producer.enqueue(workflow))


def producer_of(parts: Iterable[object]) -> Producer:
    """The app the first call in ``parts`` (searched through groups, batches and chains)
    was made for by a task's ``.s()``, ``.si()`` or ``.call()``."""
    waiting = list(parts)
    while waiting:
        part = waiting.pop(0)
        if isinstance(part, Call):
            if part.producer is not None:
                return part.producer
        elif isinstance(part, Group):
            waiting += part.calls
        elif isinstance(part, Batch):
            waiting += [*part.members, *part.callbacks.values()]
        elif isinstance(part, Sequenced):
            waiting += part.parts
        elif (call := getattr(part, "call", None)) is not None:  # a graph's step
            waiting.append(call)
    raise InvalidMessage(
        "no call of this workflow was made by a task's .s(), .si() or .call(): enqueue it "
        "with app.enqueue(...)"
    )
