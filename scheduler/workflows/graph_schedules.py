"""Graphs on a trigger (``graph(..., key=..., trigger=...)``): a nightly DAG.

The graph's key is held by its schedule: a message of task ``GRAPH_TASK`` carrying the
trigger and the graph's steps as JSON (``StoredGraph``), claimed like any recurring
message. At each occurrence a worker (``workers/settling/tickers.py``) starts a run of the graph
(``instance_id``: named by the schedule and the occurrence's time, so a schedule message
delivered twice starts it once), unless the run before it is still going: then that
occurrence is skipped (``skipped_overlap`` in the schedule's history). The schedule's
next occurrence remembers the run it started (the ``LAST_RUN`` header), which
``app.cancel(key=...)`` cancels with the schedule, and ``workflow show --key`` shows.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticSerializationError, to_jsonable_python

from tickwork.scheduler.backends import Envelope
from tickwork.scheduler.clock import to_ms
from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.ids import keyed_chain_id
from tickwork.scheduler.model.headers import LAST_RUN
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.model.places import StepCondition, StepRule, Takes
from tickwork.scheduler.model.tasks import Call
from tickwork.scheduler.producing.planning import plan
from tickwork.scheduler.workflows.graph_records import GRAPH_TASK
from tickwork.scheduler.workflows.graphs import FailureRule, Graph, GraphNode


class StoredStep(BaseModel):
    """One step of a scheduled graph, as its schedule stores it."""

    model_config = ConfigDict(frozen=True)

    name: str
    task: str
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    queue: str | None = None
    priority: int | None = None
    headers: dict[str, str] | None = None
    takes_result: bool = False
    expires_s: float | None = None
    parents: list[str] = []
    takes: Takes | None = None
    when: StepRule = "success"
    condition: StepCondition | None = None


class StoredGraph(BaseModel):
    """A scheduled graph's steps and failure rule, as its schedule stores them."""

    model_config = ConfigDict(frozen=True)

    steps: list[StoredStep]
    failure: FailureRule = "stop"

    @classmethod
    def of(cls, spec: Graph) -> StoredGraph:
        """``spec``'s steps as JSON; ``InvalidMessage`` for an argument JSON cannot hold
        or an expiry at a fixed time (each run needs its own)."""
        return cls(steps=[_stored(node) for node in spec.nodes], failure=spec.failure)

    def graph(self) -> Graph:
        """The graph one run of the schedule enqueues (without key or trigger)."""
        nodes = tuple(
            GraphNode(
                step.name,
                Call(
                    step.task,
                    tuple(step.args),
                    step.kwargs,
                    queue=step.queue,
                    priority=step.priority,
                    headers=step.headers,
                    takes_result=step.takes_result,
                    expires=None if step.expires_s is None else timedelta(seconds=step.expires_s),
                ),
                tuple(step.parents),
                step.takes,
                step.when,
                step.condition,
            )
            for step in self.steps
        )
        return Graph(nodes, self.failure)


def _stored(node: GraphNode) -> StoredStep:
    call = node.call
    if isinstance(call.expires, datetime):
        raise InvalidMessage(
            f"step {node.name} of a scheduled graph expires at a fixed time: give it a "
            "timedelta (each run of the graph needs its own)"
        )
    try:
        args, kwargs = to_jsonable_python(list(call.args)), to_jsonable_python(dict(call.kwargs))
    except PydanticSerializationError as err:
        raise InvalidMessage(f"step {node.name} of a scheduled graph: {err}") from err
    return StoredStep(
        name=node.name,
        task=call.task,
        args=args,
        kwargs=kwargs,
        queue=call.queue,
        priority=call.priority,
        headers=None if call.headers is None else dict(call.headers),
        takes_result=call.takes_result,
        expires_s=None if call.expires is None else call.expires.total_seconds(),
        parents=list(node.parents),
        takes=node.takes,
        when=node.when,
        condition=node.condition,
    )


def schedule_envelope(spec: Graph, queue: str, now: datetime) -> Envelope:
    """The message that holds a scheduled graph's key and fires its runs."""
    assert spec.key is not None and spec.trigger is not None
    stored, fire, jitter_s = plan(Call(GRAPH_TASK, key=spec.key, trigger=spec.trigger), now)
    if stored is None:
        raise InvalidMessage("a graph's trigger must repeat (Repeating or Cron)")
    chain = keyed_chain_id(queue, spec.key)
    message = Message(
        id=chain,
        queue=queue,
        task=GRAPH_TASK,
        args=[StoredGraph.of(spec).model_dump(mode="json", exclude_defaults=True)],
        key=spec.key,
        trigger=stored,
        occurrence=fire.occurrence,
        scheduled_at=fire.at,
        enqueued_at=now,
    )
    return message.envelope(to_ms(fire.at) + int(jitter_s * 1000))


def is_graph_schedule(message: Message) -> bool:
    """Whether ``message`` is a scheduled graph's schedule (it fires runs of it)."""
    return message.task == GRAPH_TASK and message.trigger is not None


def stored_graph(message: Message) -> StoredGraph:
    """The graph a schedule message carries."""
    return StoredGraph.model_validate(message.args[0])


def instance_id(schedule: Message, at: datetime) -> str:
    """The id of the run of ``schedule``'s graph for its occurrence at ``at``."""
    digest = hashlib.blake2b(f"{schedule.chain}\x00{to_ms(at)}".encode(), digest_size=12)
    return "g" + digest.hexdigest()


def live_instance(schedule: Message) -> str | None:
    """The run of the graph its schedule started last (None before the first)."""
    return schedule.headers.get(LAST_RUN)


def with_live_instance(schedule: Message, graph_id: str) -> Message:
    """``schedule`` remembering ``graph_id`` as the run it started last."""
    return schedule.model_copy(update={"headers": {**schedule.headers, LAST_RUN: graph_id}})
