"""Where a message stands in a workflow: the steps of a chain after it (``Step``), how a
recurring chain starts each occurrence (``ChainStart``), its place in a batch
(``Membership``) or as a batch's callback (``Callback``), its place in a graph (``Node``,
with an ``Edge`` to each step after it). Carried in the message's body, each resolved
when the workflow was enqueued, so a worker needs nothing else to go on."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Step(BaseModel):
    """A step after the first, stored in the message of the step before it, with every
    option resolved when the chain was enqueued (a worker need not know its task)."""

    model_config = ConfigDict(frozen=True)

    task: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    takes_result: bool = False
    queue: str
    priority: int = 0
    timeout_s: float = 300.0
    max_attempts: int = 1
    #: its task's limit and fair-share keys, as ``Message`` carries them; for a step that
    #: takes the previous result and whose keys come from its arguments, worked out when
    #: it is written (``MessageBuilder.next_step``)
    limit: str | None = None
    rate: str | None = None
    fair: str | None = None


class ChainStart(BaseModel):
    """How a recurring chain starts each occurrence: its first step and the steps after it
    (carried by every later step, whose ack writes the chain's next occurrence)."""

    model_config = ConfigDict(frozen=True)

    first: Step
    then: list[Step] = Field(default_factory=list)
    limit: str | None = None
    rate: str | None = None
    fair: str | None = None


class Membership(BaseModel):
    """Where a message stands in a batch: member ``index`` of ``size``; the batch's
    records are kept until ``expires_ms`` (see ``scheduler.workflows.batches``)."""

    model_config = ConfigDict(frozen=True)

    batch: str
    index: int
    size: int
    expires_ms: int


#: when a graph's step runs (its trigger rule, as stored): every parent succeeded, all
#: settled, one failed for good, none failed (each succeeded or was skipped), or as soon
#: as one succeeded (an or-join)
StepRule = Literal["success", "complete", "failure", "none_failed", "first_success"]
#: how a graph step made with ``.s()`` (or its condition) takes its parents' results: a
#: dict by parent name, the one parent's value, their values in order, a batch's outcome,
#: or the value of the parent that succeeded first (an or-join)
Takes = Literal["dict", "value", "list", "outcome", "first"]


class StepCondition(BaseModel):
    """A graph step's condition: a function (``module:qualname``) of its parents'
    results (taken as ``takes``) that says whether the step runs or is skipped."""

    model_config = ConfigDict(frozen=True)

    function: str
    takes: Takes


class Callback(BaseModel):
    """A batch's callback: which batch, when it fires (every member succeeded, all
    settled, or some failed) and whether it takes the batch's outcome first."""

    model_config = ConfigDict(frozen=True)

    batch: str
    when: Literal["success", "complete", "failure"]
    takes_result: bool = False


class Edge(BaseModel):
    """Where a graph node's outcome is counted when it settles: the fan-in of a child (a
    batch record kept under the child's message id, see ``scheduler.workflows.graphs``)."""

    model_config = ConfigDict(frozen=True)

    id: str  # the child's message id, which names its fan-in record
    queue: str
    step: int  # the child's index in the graph
    index: int  # this node's place among the child's parents
    size: int  # how many parents the child has
    #: when the child runs (``StepRule``)
    when: StepRule = "success"


class Node(BaseModel):
    """A message's place in a graph (``scheduler.workflows.graphs``): node ``index`` of
    ``size``, named ``name``; a node with parents waits parked until its fan-in counts them
    all. ``takes``: how a node made with ``.s()`` takes its parents' results first (a dict
    by parent name, the one parent's value, their values in order, or a batch's
    outcome)."""

    model_config = ConfigDict(frozen=True)

    graph: str
    name: str
    index: int
    size: int
    parents: list[str] = Field(default_factory=list)
    takes: Takes | None = None
    children: list[Edge] = Field(default_factory=list)
    stop: bool = True  # a failure for good stops the graph until it is replayed
    #: when it runs (``StepRule``; a batch's callback in a graph: its ``when``); a step
    #: that handles a failure runs in a stopped graph
    when: StepRule = "success"
    condition: StepCondition | None = None  # run only if it says so (else skipped)
    expires_ms: int
