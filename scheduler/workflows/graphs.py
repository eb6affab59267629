"""Graphs: workflows of steps where a step may have several parents.

``graph({"fetch": fetch.si(url), "parse": after("fetch", parse.s()), ...})`` names each
step; a step made with ``after(parents, call)`` starts once every parent succeeded, and
if it was made with ``.s()`` it takes their results first: after one parent named alone
(``after("fetch", ...)``), that parent's result, as a chain's step takes the step
before it; after a list of parents, a dict by parent name.
Chains, groups and batches that nest (a chain of groups, a group of chains, a batch whose
member is a chain, a callback that is a group) are compiled into a graph as well
(``compile_spec``): a step after a group takes the group's results as a list, in order,
as Celery's chords do.

How a graph runs (``workers/workflows/graph_fanin.py``): every step is stored when the graph is
enqueued; the steps without parents are due at once, the others parked (stored, never
claimed). Each step with parents has a fan-in counter, a batch record kept under its own
message id, in which each parent counts once when it succeeds, in the same atomic step
that records its result (the backend's ``Batches.settle``: one script, transaction or
lightweight transaction); whoever sees the count reach the number of parents wakes the
step. The graph itself has a record too (``GraphDescription``, under the graph's id),
where every step counts its success, or its failure for good, so the graph's state reads
in one place and a replayed failure lifts the stop.

Trigger rules (``after(..., rule=)``): a step runs once every parent has settled and
``"all_succeeded"`` (the default) every one succeeded; ``"all_done"`` whatever they did (a
``finally``); ``"any_failed"`` at least one failed for good (a failure handler);
``"none_failed"`` each succeeded or was skipped (the join after a branch that may be
skipped); ``"one_succeeded"`` as soon as one parent succeeded (an or-join: the first
success wakes it; made with ``.s()`` it takes that parent's result). A failure handler
none of whose parents failed is skipped: not run, counted done; as in Airflow, a step
after a skipped step is skipped too unless its rule is ``"all_done"``, ``"none_failed"``
or ``"one_succeeded"``, which count the skipped parent as done (its result ``None``; an
or-join whose parents were all skipped is skipped). A step's handler may raise ``Skip``
to be skipped the same way, and a step with a ``condition`` (a module-level function of
what it would take from its parents, stored by its import path) is skipped without
running when the condition says no: the worker asks it when the step is about to start.
A step with ``"all_done"`` or ``"any_failed"`` made with ``.s()`` takes the parents'
outcome (a ``BatchOutcome``: results, failures), as a batch's callbacks do; such steps
run even in a graph stopped by a failure.

Failure rules: ``failure="stop"`` (the default): once a step failed for good, no step of
the graph that has not started starts, until the failed step is replayed from the poison
queue (``app.poison.replay``) and succeeds, and the graph resumes where it stood.
``failure="continue"``: the branches that do not depend on the failed step run on; the
steps after it wait for its replay.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.model.handles import WorkflowHandle
from tickwork.scheduler.model.places import StepCondition, StepRule, Takes
from tickwork.scheduler.model.shapes import Batch, Group, Sequenced, When, enqueue_workflow
from tickwork.scheduler.model.tasks import Call
from tickwork.scheduler.workflows.step_conditions import Condition, condition_path
from tickwork.triggers import Trigger

FailureRule = Literal["stop", "continue"]
TriggerRule = Literal["all_succeeded", "all_done", "any_failed", "none_failed", "one_succeeded"]
#: each trigger rule as the fan-in stores it
_WHEN: dict[str, StepRule] = {
    "all_succeeded": "success",
    "all_done": "complete",
    "any_failed": "failure",
    "none_failed": "none_failed",
    "one_succeeded": "first_success",
}
#: the rules whose steps take their parents' outcome (made with ``.s()``)
_TAKE_OUTCOME = frozenset({"complete", "failure"})

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class After:
    """A call that starts once its ``parents`` (step names of its graph) succeeded."""

    parents: tuple[str, ...]
    call: Call
    #: its one parent was named alone (not in a list): made with ``.s()``, it takes that
    #: parent's result itself rather than a dict by name
    alone: bool = False
    when: StepRule = "success"  # its trigger rule, as stored
    condition: str | None = None  # its condition's import path (``module:qualname``)


def after(
    parents: str | Iterable[str],
    call: Call,
    *,
    rule: TriggerRule = "all_succeeded",
    condition: Condition | None = None,
) -> After:
    """``call`` as a step of a graph that starts once every step named in ``parents``
    has settled and, by ``rule``, all succeeded (the default), whatever they did
    (``"all_done"``), one failed for good (``"any_failed"``), or none failed, each
    having succeeded or been skipped (``"none_failed"``). Made with ``.s()``, it takes
    their results first: after one parent named alone (``after("fetch", parse.s())``)
    that parent's result, as a chain's step; after a list (``after(["a", "b"],
    merge.s())``) a dict by parent name (``None`` for a skipped one); with
    ``"all_done"`` or ``"any_failed"``, their outcome (a ``BatchOutcome``); with
    ``"one_succeeded"``, the value of the parent that succeeded first.

    ``condition``: a module-level function given what the step would take (as above,
    whether or not it is made with ``.s()``); when it returns false the step is skipped
    (not run, recorded ``skipped``), and the steps after it follow their rule."""
    if rule not in _WHEN:
        raise InvalidMessage(
            f"step {call.task}: rule must be one of {', '.join(_WHEN)}, not {rule!r}"
        )
    path = None if condition is None else condition_path(call.task, condition)
    if isinstance(parents, str):
        return After((parents,), call, alone=True, when=_WHEN[rule], condition=path)
    names = tuple(parents)
    if not names:
        raise InvalidMessage(f"step {call.task}: after() needs at least one parent")
    return After(names, call, when=_WHEN[rule], condition=path)


@dataclass(frozen=True, slots=True)
class GraphNode:
    """One step of a compiled graph: its call, its parents and how it takes them."""

    name: str
    call: Call
    parents: tuple[str, ...] = ()
    takes: Takes | None = None  # how a call made with .s() takes its parents' results
    when: StepRule = "success"  # when it runs (its trigger rule, as stored)
    condition: StepCondition | None = None  # whether it runs, asked when it would start


@dataclass(frozen=True, slots=True)
class Graph:
    """A workflow of named steps (``graph``); enqueue it with ``app.enqueue``."""

    nodes: tuple[GraphNode, ...]
    failure: FailureRule = "stop"
    key: str | None = None  # held while the graph runs: cancel(key=...) cancels it
    queue: str | None = None  # where the key is held (default: the app's default queue)
    trigger: Trigger | None = None  # a graph that runs at each occurrence (under its key)
    #: compiled from a group or a batch: each member's steps (its result is its last
    #: step's) and the first step of each callback, read back as the batch's status
    members: tuple[tuple[str, ...], ...] = ()
    callbacks: Mapping[When, str] = field(default_factory=dict)

    def delay(self) -> WorkflowHandle:
        """Enqueue the graph (``app.enqueue(graph)``); ``result()`` of its handle is each
        step's result by name."""
        return enqueue_workflow(self, self.nodes)

    apply_async = delay
    __call__ = delay


def graph(
    steps: Mapping[str, Call | After],
    *,
    failure: FailureRule = "stop",
    key: str | None = None,
    queue: str | None = None,
    trigger: Trigger | None = None,
) -> Graph:
    """A workflow of named steps: a plain call has no parents and starts at once; one
    made with ``after(parents, call)`` starts when each of its parents succeeded.
    ``failure``: ``"stop"`` (no step starts after a failure for good until it is
    replayed) or ``"continue"`` (independent branches finish). ``key``: held while the
    graph runs (``app.cancel(key=...)`` cancels every step not yet run; a second graph
    under a key that is held raises ``KeyConflict``). ``trigger`` (with a ``key``): the
    graph runs at each occurrence, a new run of it each time, unless the one before is
    still running (that occurrence is skipped); cancelling the key ends the schedule and
    cancels the run in progress."""
    if trigger is not None and key is None:
        raise InvalidMessage("a graph with a trigger needs a key (to read and cancel it by)")
    if failure not in ("stop", "continue"):
        raise InvalidMessage(f"failure must be 'stop' or 'continue', not {failure!r}")
    nodes = []
    for name, step in steps.items():
        call, parents = (step.call, step.parents) if isinstance(step, After) else (step, ())
        if not isinstance(step, After):
            nodes.append(GraphNode(name, call))
            continue
        shape = _taken(step)
        condition = (
            None if step.condition is None else StepCondition(function=step.condition, takes=shape)
        )
        takes = shape if call.takes_result else None
        nodes.append(GraphNode(name, call, parents, takes, step.when, condition))
    return checked(Graph(tuple(nodes), failure, key, queue, trigger))


def _taken(step: After) -> Takes:
    """How ``step`` takes its parents' results (made with ``.s()``, or by its condition)."""
    if step.when in _TAKE_OUTCOME:
        return "outcome"
    if step.when == "first_success":
        return "first"
    return "value" if step.alone else "dict"


def checked(spec: Graph) -> Graph:
    """``spec`` if it is a graph that can run: named steps, known parents, no cycle, no
    step that cannot be a step. Raises ``InvalidMessage`` naming the first fault."""
    if not spec.nodes:
        raise InvalidMessage("a graph needs at least one step")
    names = {node.name for node in spec.nodes}
    if len(names) != len(spec.nodes):
        raise InvalidMessage("two steps of the graph have the same name")
    for node in spec.nodes:
        _check_node(node, names)
    _check_acyclic(spec.nodes)
    return spec


def _check_node(node: GraphNode, names: set[str]) -> None:
    call = node.call
    if not _NAME.match(node.name):
        raise InvalidMessage(f"step name {node.name!r}: use 1-64 letters, digits, '_' or '-'")
    if call.key or call.identity or call.trigger or call.at or call.delay_by:
        raise InvalidMessage(
            f"step {node.name} ({call.task}) of a graph cannot have its own key, identity, "
            "trigger or time: it runs when its parents succeeded (give the graph its key)"
        )
    if call.then:
        raise InvalidMessage(
            f"step {node.name} ({call.task}) is a chain: give its steps to the graph"
        )
    if call.takes_result and not node.parents:
        raise InvalidMessage(
            f"step {node.name} ({call.task}) has no parents whose results it could take: "
            "make it with .si() or .call(), or give it parents with after()"
        )
    for parent in node.parents:
        if parent not in names:
            raise InvalidMessage(f"step {node.name} comes after {parent!r}, which is no step")
    if len(set(node.parents)) != len(node.parents) or node.name in node.parents:
        raise InvalidMessage(f"step {node.name} names a parent twice, or itself")


def _check_acyclic(nodes: Sequence[GraphNode]) -> None:
    """Kahn's algorithm: a step left when no step without waiting parents remains is on
    a cycle."""
    waiting = {node.name: len(node.parents) for node in nodes}
    children: dict[str, list[str]] = {}
    for node in nodes:
        for parent in node.parents:
            children.setdefault(parent, []).append(node.name)
    ready = [name for name, count in waiting.items() if count == 0]
    seen = 0
    while ready:
        name = ready.pop()
        seen += 1
        for child in children.get(name, ()):
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    if seen != len(nodes):
        stuck = sorted(name for name, count in waiting.items() if count > 0)
        raise InvalidMessage(f"the graph has a cycle through {', '.join(stuck[:5])}")


# -- nesting: chains, groups and batches compiled into a graph ---------------------------

Spec = Call | Group | Batch

#: what ``app.enqueue`` takes besides a call: stored whole by ``app.batches.enqueue``
Workflow = Batch | Group | Graph | Sequenced


def nests(spec: Spec | Sequenced) -> bool:
    """Whether ``spec`` runs as a graph: a chain with a group or batch in it, a group
    whose member is a chain, a batch with such a member or a group as a callback."""
    if isinstance(spec, Sequenced):
        return True
    if isinstance(spec, Call):
        return False
    members = spec.calls if isinstance(spec, Group) else spec.members
    if any(not isinstance(call, Call) or call.then for call in members):
        return True
    return isinstance(spec, Batch) and any(
        not isinstance(callback, Call) for callback in spec.callbacks.values()
    )


def compile_spec(spec: Spec | Sequenced, failure: FailureRule = "stop") -> Graph:
    """The graph a nested chain, group or batch runs as (steps named by their place)."""
    compiler = _Compiler()
    if isinstance(spec, Sequenced | Call):
        compiler.add(spec, (), None, "success")
        return checked(Graph(tuple(compiler.nodes), failure))
    members: list[tuple[str, ...]] = []
    calls = spec.calls if isinstance(spec, Group) else spec.members
    for call in calls:
        first = len(compiler.nodes)
        compiler.add(call, (), None, "success")
        members.append(tuple(node.name for node in compiler.nodes[first:]))
    callbacks: dict[When, str] = {}
    if isinstance(spec, Batch):
        leaves = tuple(names[-1] for names in members)
        for when, callback in spec.callbacks.items():
            callbacks[when] = str(len(compiler.nodes))
            compiler.add(callback, leaves, "list", when)
    nodes = tuple(compiler.nodes)
    return checked(Graph(nodes, failure, members=tuple(members), callbacks=callbacks))


#: what flows out of a compiled part: the names of its last steps, and whether a step
#: after it takes one value (a single call) or a list (a group, a batch)
_Out = tuple[tuple[str, ...], Literal["value", "list"] | None]


class _Compiler:
    def __init__(self) -> None:
        self.nodes: list[GraphNode] = []

    def add(
        self,
        spec: Spec | Sequenced,
        parents: tuple[str, ...],
        flow: Literal["value", "list"] | None,
        when: When,
    ) -> _Out:
        if isinstance(spec, Sequenced):
            return self._sequence(spec.parts, parents, flow, when)
        if isinstance(spec, Call):
            if spec.then:
                first = spec.options(then=())
                return self._sequence((first, *spec.then), parents, flow, when)
            return self._call(spec, parents, flow, when)
        if isinstance(spec, Group):
            return self._group(spec.calls, parents, flow, when)
        return self._batch(spec, parents, flow, when)

    def _call(self, call: Call, parents: tuple[str, ...], flow: str | None, when: When) -> _Out:
        name = str(len(self.nodes))
        takes: Takes | None = None
        if call.takes_result and parents:
            takes = "outcome" if when != "success" else ("value" if flow == "value" else "list")
        self.nodes.append(GraphNode(name, call, parents, takes, when))
        return (name,), "value"

    def _sequence(
        self,
        parts: Sequence[Spec | Sequenced],
        parents: tuple[str, ...],
        flow: Literal["value", "list"] | None,
        when: When,
    ) -> _Out:
        for index, part in enumerate(parts):
            parents, flow = self.add(part, parents, flow, when if index == 0 else "success")
        return parents, flow

    def _group(
        self,
        members: Sequence[Call | Sequenced],
        parents: tuple[str, ...],
        flow: Literal["value", "list"] | None,
        when: When,
    ) -> _Out:
        leaves: list[str] = []
        for member in members:
            leaves.extend(self.add(member, parents, flow, when)[0])
        return tuple(leaves), "list"

    def _batch(
        self,
        spec: Batch,
        parents: tuple[str, ...],
        flow: Literal["value", "list"] | None,
        when: When,
    ) -> _Out:
        leaves, out = self._group(spec.members, parents, flow, when)
        last: _Out = (leaves, out)
        for callback_when, callback in spec.callbacks.items():
            ends = self.add(callback, leaves, "list", callback_when)
            if callback_when == "success":
                last = ends
        return last
