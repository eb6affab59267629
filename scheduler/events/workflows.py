"""Workflows that events start: a chain, group, batch or graph subscribed under a name
(``app.events.subscribe(graph({...}), "order.placed", name="fulfil")``).

Where a step's argument is ``EVENT``, each run gets the event instead (as a dict: ``id``,
``name``, ``key``, ``payload``, ``emitted_at``). The workflow is stored with its
subscription (the steps as JSON, as a scheduled graph's are: ``StoredGraph``). An event
it matches is delivered as one message of the built-in task ``WORKFLOW_TASK`` in the
subscription's queue; its run starts a run of the workflow, named by the event and the
subscription (``run_id``), so a delivery run twice starts it once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from tickwork.scheduler.backends import Backend
from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.events.subscriptions import stored_subscription
from tickwork.scheduler.model.event_names import Event
from tickwork.scheduler.workflows.graph_schedules import StoredGraph
from tickwork.scheduler.workflows.graphs import Graph

#: the built-in task whose run starts a subscribed workflow for one event
WORKFLOW_TASK = "tickwork.workflow"

#: a step's argument that each run of a subscribed workflow replaces with the event
#: (typed ``Any``: it stands for the event whatever the parameter's annotation)
EVENT: Any = "$tickwork:event"


def run_id(event_id: str, subscription: str) -> str:
    """The graph id of the run that event ``event_id`` starts of ``subscription``."""
    digest = hashlib.blake2b(f"{event_id}\x00{subscription}".encode(), digest_size=12)
    return "g" + digest.hexdigest()


def with_event(stored: StoredGraph, event: dict[str, Any]) -> Graph:
    """The graph one run starts: ``EVENT`` replaced by ``event`` in every step."""
    steps = [
        step.model_copy(
            update={
                "args": [event if arg == EVENT else arg for arg in step.args],
                "kwargs": {k: event if v == EVENT else v for k, v in step.kwargs.items()},
            }
        )
        for step in stored.steps
    ]
    return stored.model_copy(update={"steps": steps}).graph()


class WorkflowStarts:
    """Runs ``WORKFLOW_TASK`` messages: starts one run of a subscribed workflow."""

    def __init__(
        self,
        backend: Callable[[], Backend],
        start_run: Callable[[Graph, str, int], None],
        now_ms: Callable[[], int],
    ) -> None:
        self._backend = backend
        self._start_run = start_run
        self._now_ms = now_ms

    def run(self, name: str, event: Event) -> str | None:
        """Start workflow ``name``'s run for ``event``; its graph id (None when the
        subscription is gone: nothing to start)."""
        backend = self._backend()
        subscription = stored_subscription(backend, name)
        if subscription is None or subscription.workflow is None:
            return None
        graph_id = run_id(event.id, name)
        if backend.batches.read(graph_id, outcomes=False) is not None:
            return graph_id  # started already (this delivery ran before)
        stored = StoredGraph.model_validate(subscription.workflow)
        self._start_run(with_event(stored, event.model_dump(mode="json")), graph_id, self._now_ms())
        return graph_id


def check_workflow(spec: Graph) -> StoredGraph:
    """``spec`` as stored with its subscription (``InvalidMessage`` for one that cannot
    be: an argument JSON cannot hold, a step expiring at a fixed time, a key or a
    trigger of its own)."""
    if spec.key is not None or spec.trigger is not None:
        raise InvalidMessage(
            "a subscribed workflow starts a run per event: give it no key or trigger"
        )
    return StoredGraph.of(spec)
