"""A graph as stored (see ``scheduler.workflows.graphs``): its description, its steps'
messages, the key it holds, and how its record reads.

Ids: a graph is ``g…`` (a fresh time-ordered id); step ``name`` is ``{graph}.{name}``,
and its fan-in record is kept under that id. In the graph's own record (a batch record
under the graph's id) step ``i`` counts its success at ``2i`` and its failure for good
at ``2i + 1``, so a step that failed and was replayed shows both; a cancel writes
``CANCELLED``. A graph with a key holds it with a parked anchor message (task
``GRAPH_TASK``, never claimed) that names the graph, deleted when the graph completes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict

from tickwork.scheduler.backends import Backend, BatchRecord, Envelope, MemberOutcome
from tickwork.scheduler.clock import to_datetime, to_ms
from tickwork.scheduler.errors import DecodeError
from tickwork.scheduler.ids import keyed_chain_id, new_chain_id
from tickwork.scheduler.model.headers import LAST_RUN
from tickwork.scheduler.model.message import PAUSED_DUE, Message
from tickwork.scheduler.model.places import Edge, Node, StepRule
from tickwork.scheduler.producing.building import MessageBuilder
from tickwork.scheduler.runs.results import failed_record
from tickwork.scheduler.workflows.graphs import FailureRule, Graph

#: the task name of a graph's anchor: the parked message that holds the graph's key
GRAPH_TASK = "tickwork.graph"

#: the index under which a cancel is written in the graph's record
CANCELLED = -1

PARKED_MS = to_ms(PAUSED_DUE)


class GraphStep(BaseModel):
    """One step as the graph's description lists it."""

    model_config = ConfigDict(frozen=True)

    name: str
    id: str
    queue: str
    task: str
    parents: list[str] = []
    when: StepRule = "success"


class GraphDescription(BaseModel):
    """What is stored when a graph is enqueued (its record's description)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["graph"] = "graph"
    created_ms: int
    expires_ms: int  # its records (and its steps' fan-ins) are kept until then
    failure: FailureRule
    key: str | None = None
    queue: str | None = None  # where its anchor holds the key
    steps: list[GraphStep]
    #: a group or batch that runs as a graph: each member's steps, and the first step of
    #: each callback (by name), for its status as a batch
    members: list[list[str]] = []
    callbacks: dict[Literal["success", "complete", "failure"], str] = {}

    @classmethod
    def decode(cls, body: bytes) -> GraphDescription:
        return cls.model_validate_json(body)

    def encode(self) -> bytes:
        return self.model_dump_json(exclude_defaults=True).encode()


@dataclass(frozen=True, slots=True)
class BuiltGraph:
    """A graph ready to write: its id, description and expiry, its anchor (if it holds a
    key), then its steps (those without parents due now, the others parked)."""

    id: str
    description: GraphDescription
    expires_ms: int
    anchor: Envelope | None
    steps: list[Envelope]


def is_graph_id(workflow_id: str) -> bool:
    """Whether ``workflow_id`` names a graph (batches are ``b…``)."""
    return workflow_id.startswith("g")


def step_id(graph_id: str, name: str) -> str:
    """The message id of step ``name`` of graph ``graph_id``."""
    return f"{graph_id}.{name}"


def build_graph(
    builder: MessageBuilder,
    spec: Graph,
    now_ms: int,
    retention: timedelta,
    default_queue: str,
    graph_id: str | None = None,
) -> BuiltGraph:
    """Validate every step and build its envelope; writes nothing. Raises
    ``InvalidMessage`` naming the first bad call. ``graph_id``: a run of a scheduled
    graph is named by its occurrence (else a fresh id)."""
    now = to_datetime(now_ms)
    graph_id = graph_id or "g" + new_chain_id(now_ms)
    expires_ms = now_ms + retention // timedelta(milliseconds=1)
    queues = {
        node.name: node.call.queue or builder.registry.lookup(node.call.task).options.queue
        for node in spec.nodes
    }
    children: dict[str, list[Edge]] = {}
    for position, node in enumerate(spec.nodes):
        for index, parent in enumerate(node.parents):
            edge = Edge(
                id=step_id(graph_id, node.name),
                queue=queues[node.name],
                step=position,
                index=index,
                size=len(node.parents),
                when=node.when,
            )
            children.setdefault(parent, []).append(edge)
    size = len(spec.nodes)
    envelopes, steps = [], []
    for index, node in enumerate(spec.nodes):
        place = Node(
            graph=graph_id,
            name=node.name,
            index=index,
            size=size,
            parents=list(node.parents),
            takes=node.takes,
            children=children.get(node.name, []),
            stop=spec.failure == "stop",
            when=node.when,
            condition=node.condition,
            expires_ms=expires_ms,
        )
        sid = step_id(graph_id, node.name)
        _, envelope = builder.build(node.call, now_ms, now, chain=sid, node=place)
        if node.parents:
            envelope = envelope._replace(due_ms=PARKED_MS)
        envelopes.append(envelope)
        steps.append(
            GraphStep(
                name=node.name,
                id=sid,
                queue=envelope.queue,
                task=node.call.task,
                parents=list(node.parents),
                when=node.when,
            )
        )
    key_queue = spec.queue or default_queue
    description = GraphDescription(
        created_ms=now_ms,
        expires_ms=expires_ms,
        failure=spec.failure,
        key=spec.key,
        queue=key_queue if spec.key is not None else None,
        steps=steps,
        members=[list(names) for names in spec.members],
        callbacks=dict(spec.callbacks),
    )
    anchor = None
    if spec.key is not None:
        anchor = anchor_envelope(graph_id, spec.key, key_queue, now)
    # parked steps first: a step that is due at once may finish before the rest is stored
    envelopes.sort(key=lambda envelope: envelope.due_ms != PARKED_MS)
    return BuiltGraph(graph_id, description, expires_ms, anchor, envelopes)


def anchor_envelope(graph_id: str, key: str, queue: str, now: datetime) -> Envelope:
    """The parked message that holds ``key`` in ``queue`` for graph ``graph_id``."""
    anchor_id = keyed_chain_id(queue, key)
    message = Message(
        id=anchor_id,
        queue=queue,
        task=GRAPH_TASK,
        args=[graph_id],
        key=key,
        scheduled_at=to_datetime(PARKED_MS),
        enqueued_at=now,
    )
    return message.envelope(PARKED_MS)


def graph_of_anchor(body: bytes) -> str | None:
    """The graph an anchor's stored body names, or None if it is no anchor (a scheduled
    graph's schedule names the run it started last in its ``LAST_RUN`` header)."""
    if GRAPH_TASK.encode() not in body:
        return None
    try:
        message = Message.decode(body)
    except DecodeError:
        return None
    if message.task != GRAPH_TASK or not message.args:
        return None
    if message.trigger is not None:
        return message.headers.get(LAST_RUN)
    return str(message.args[0])


def read_description(
    backend: Backend, graph_id: str, outcomes: bool
) -> tuple[GraphDescription, BatchRecord] | None:
    """The graph's description and record, or None when it is not stored (or expired)."""
    record = backend.batches.read(graph_id, outcomes=outcomes)
    if record is None or record.description is None:
        return None
    return GraphDescription.decode(record.description), record


def halted(record: BatchRecord) -> bool:
    """Whether a graph (its record read with outcomes) is stopped: cancelled, or a step
    failed for good and has not succeeded since."""
    if CANCELLED in record.outcomes:
        return True
    failed = {index // 2 for index in record.outcomes if index % 2}
    return any(2 * index not in record.outcomes for index in failed)


def cancel_graph(backend: Backend, graph_id: str) -> int | None:
    """Cancel a graph: written as cancelled in its record first (a step finishing now
    then wakes none after it), then every step not yet run is deleted (running ones
    finish) and its anchor too. How many steps were deleted; None if it is not stored."""
    found = read_description(backend, graph_id, outcomes=False)
    if found is None:
        return None
    description, _ = found
    now_ms = backend.now_ms()
    mark = failed_record("Cancelled", "the graph was cancelled", 0, now_ms)
    cancel = MemberOutcome(graph_id, CANCELLED, True, mark, description.expires_ms)
    backend.batches.settle([cancel])
    deleted = sum(backend.messages.delete(step.id, step.queue) for step in description.steps)
    if description.key is not None and description.queue is not None:
        drop_anchor(backend, description, graph_id)
    return deleted


def drop_anchor(backend: Backend, description: GraphDescription, graph_id: str) -> bool:
    """Let go of the graph's key: delete its anchor if it still names this graph. True
    (done, or nothing to do)."""
    assert description.key is not None and description.queue is not None
    stored = backend.messages.get_by_key(description.queue, description.key)
    if stored is not None and graph_of_anchor(stored.envelope.body) == graph_id:
        backend.messages.delete(stored.envelope.id, description.queue)
    return True
