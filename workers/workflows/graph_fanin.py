"""The fan-in of graphs, worker side (see ``scheduler.workflows.graphs``).

When a step succeeds, before its ack, its result is counted in the graph's record and in
the fan-in of each step after it, in one ``Batches.settle`` call (each counted once, in
one atomic step per record); each step whose fan-in that completes is woken. When a
step fails for good, before it goes to the poison queue, its failure is counted in the
graph's record (and in the fan-in of a batch callback that runs on failure). Each step
is idempotent, so a crash anywhere before the ack only repeats it on redelivery.

In a graph that stops on failure, a step about to start first reads the graph's record:
if the graph is stopped it is held (parked again, its attempt not counted), unless it is
the failed step replayed, and a step that succeeds wakes none after it. When the failed
step, replayed, succeeds, the graph resumes: every parked step whose parents all
succeeded (and every parked step without parents) is woken.

An or-join (``"first_success"``) is woken by each parent's success (a wake is a no-op on
a step that runs or ran). A skipped step (its handler raised ``Skip``, its condition said
no, or a failure handler with nothing to handle) counts done without an attempt, and the
steps after it follow their rule (``_after_skip``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from tickwork.scheduler.backends import Backend, BatchRecord, MemberOutcome, Waiter
from tickwork.scheduler.errors import ConditionFailed
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.model.places import Edge, Node, StepCondition, Takes
from tickwork.scheduler.runs.results import ResultRecord, failed_record, succeeded_record
from tickwork.scheduler.workflows.graph_records import (
    CANCELLED,
    PARKED_MS,
    GraphDescription,
    drop_anchor,
    halted,
)
from tickwork.scheduler.workflows.step_conditions import resolve_condition

log = logging.getLogger("tickwork.worker")

#: the rules of the steps that wait, after a parent failed for good, for its replay (held
#: in a stopped graph, woken when it resumes): the failure is not counted in their fan-in
_WAIT_FOR_REPLAY = frozenset({"success", "none_failed", "first_success"})


class Held(Exception):
    """A step of a stopped graph: it does not start now (parked until the graph
    resumes)."""


class SkipStep(Exception):
    """A step whose condition says no: skipped without running."""


def parents_argument(backend: Backend, message: Message, takes: Takes | None = None) -> Any:
    """What a step made with ``.s()`` takes first (or its condition is given, ``takes``):
    its parents' results, read now from its fan-in record (a dict by parent name, the one
    value, a list, a batch outcome, or the value of the parent that succeeded first)."""
    node = message.node
    assert node is not None
    takes = takes or node.takes
    assert takes is not None
    record = backend.batches.read(message.id, outcomes=True)
    outcomes = {} if record is None else record.outcomes
    records = {index: ResultRecord.decode(outcomes[index]) for index in outcomes}
    values = [records[i].value if i in records else None for i in range(len(node.parents))]
    if takes == "dict":
        return dict(zip(node.parents, values, strict=True))
    if takes == "value":
        return values[0]
    if takes == "list":
        return values
    if takes == "first":
        ran = [r for r in records.values() if r.status == "succeeded" and r.attempt > 0]
        return min(ran, key=lambda r: r.at_ms).value if ran else None
    failures = [
        {"index": i, "id": "", "error_type": r.error_type or "", "error": r.error or ""}
        for i, r in sorted(records.items())
        if r.status != "succeeded"
    ]
    return {
        "batch": node.graph,
        "size": len(node.parents),
        "succeeded": len(records) - len(failures),
        "failed": len(failures),
        "results": values,
        "failures": failures,
    }


class GraphFanIn:
    """Counts graph steps' outcomes, wakes the steps they make ready, holds the steps
    of a stopped graph."""

    def __init__(
        self,
        backend: Backend,
        with_retries: Callable[[Callable[[], Any]], Any],
        nudge: Callable[[], None],
    ) -> None:
        self._backend = backend
        self._with_retries = with_retries
        self._nudge = nudge
        self._conditions: dict[str, Callable[[Any], Any]] = {}

    def start_args(self, message: Message) -> list[Any]:
        """The arguments step ``message`` runs with (its parents' results first if it
        takes them). Raises ``Held`` if its graph is stopped, ``BackendError`` if the
        records cannot be read (it is due again), ``SkipStep`` if its condition says no,
        ``ConditionFailed`` if that cannot be asked."""
        node = message.node
        assert node is not None
        if node.stop and node.when in _WAIT_FOR_REPLAY:
            counts = self._backend.batches.read(node.graph, outcomes=False)
            if counts is not None and counts.failed > 0:
                record = self._backend.batches.read(node.graph, outcomes=True)
                replayed = record is not None and 2 * node.index + 1 in record.outcomes
                if record is not None and halted(record) and not replayed:
                    raise Held(node.graph)
        if node.condition is not None and not self._holds(node.condition, message):
            raise SkipStep(node.condition.function)
        if node.takes is None:
            return message.args
        return [parents_argument(self._backend, message), *message.args]

    def _holds(self, condition: StepCondition, message: Message) -> bool:
        """Whether ``condition`` says ``message``'s step runs."""
        function = self._conditions.get(condition.function)
        if function is None:
            function = resolve_condition(condition.function)
            if not callable(function):
                raise ConditionFailed(f"condition {condition.function} is not found here")
            self._conditions[condition.function] = function
        argument = parents_argument(self._backend, message, condition.takes)
        try:
            return bool(function(argument))
        except Exception as err:
            raise ConditionFailed(
                f"condition {condition.function} raised {type(err).__name__}: {err}"
            ) from err

    def succeeded(
        self,
        message: Message,
        attempt: int,
        value: bytes | None,
        now: int,
        skipped: bool = False,
    ) -> bool:
        """Count step ``message``'s success (before its ack) and wake what it makes
        ready; ``skipped``: it was skipped (``Skip``, its condition), counted done without
        an attempt. False if that could not be written (a forced stop): leave it
        unacked."""
        node = message.node
        assert node is not None
        if skipped:
            attempt, value = 0, None
        record = succeeded_record(value if value is not None else b"null", attempt, now)
        outcomes = [MemberOutcome(node.graph, 2 * node.index, False, record, node.expires_ms)]
        outcomes += [_counted(edge, False, record, node) for edge in node.children]
        counts = self._with_retries(lambda: self._backend.batches.settle(outcomes))
        if counts is None:
            return False
        settled, failed = counts[0]
        graph: BatchRecord | None = None
        if failed > 0:  # a failure or a cancel in the graph: is it stopped?
            graph = self._with_retries(partial(self._backend.batches.read, node.graph))
            if graph is None:  # expired (or a forced stop): nothing to stop for
                pass
            elif CANCELLED in graph.outcomes or (node.stop and halted(graph)):
                log.info("graph %s is stopped: %s wakes no step", node.graph, message.id)
                return True
        if skipped:
            wake, drop = self._after_skip(node.children, counts[1:])
        else:
            wake, drop = _ready(node.children, counts[1:])
        if graph is not None and node.stop and 2 * node.index + 1 in graph.outcomes:
            wake += self._resumed(node, graph)  # this step had failed: the graph resumes
        if drop:
            cascade = self._skipped(node, drop, now)
            if cascade is None:
                return False
            (settled, failed), woken = cascade
            wake += woken
        if wake and not self._wake(wake):
            return False
        if settled - failed >= node.size:
            return self._completed(node.graph)
        return True

    def failed(self, message: Message, attempt: int, error: tuple[str, str], now: int) -> bool:
        """Count step ``message``'s failure for good (before it is poisoned) and wake a
        batch callback it completes. False if that could not be written."""
        node = message.node
        assert node is not None
        record = failed_record(error[0], error[1], attempt, now)
        handlers = [edge for edge in node.children if edge.when not in _WAIT_FOR_REPLAY]
        outcomes = [MemberOutcome(node.graph, 2 * node.index + 1, True, record, node.expires_ms)]
        outcomes += [_counted(edge, True, record, node) for edge in handlers]
        counts = self._with_retries(lambda: self._backend.batches.settle(outcomes))
        if counts is None:
            return False
        if node.stop:
            log.warning("graph %s stops: step %s failed for good", node.graph, node.name)
        wake, _ = _ready(handlers, counts[1:])
        return not wake or self._wake(wake)

    def _wake(self, steps: Sequence[tuple[str, str]]) -> bool:
        waiters = [Waiter("", queue, None, step) for step, queue in dict.fromkeys(steps)]
        if self._with_retries(lambda: self._backend.limits.wake(waiters)) is None:
            return False
        self._nudge()
        return True

    def _skipped(
        self, node: Node, skip: list[Edge], now: int
    ) -> tuple[tuple[int, int], list[tuple[str, str]]] | None:
        """Skip the steps in ``skip`` (failure handlers whose parents all succeeded) and,
        as Airflow does, what comes after them: a step after a skipped one is skipped too
        unless its rule is ``all_done`` or ``none_failed``, which count the skipped parent
        as done (and may be woken). Each skipped step is deleted and counted done
        (attempt 0) in the graph's record and in its children's fan-ins. The graph's
        counts after and the steps to wake, or None if a write could not be made (a
        forced stop)."""
        done = succeeded_record(b"null", 0, now)
        counts: tuple[int, int] = (0, 0)
        wake: list[tuple[str, str]] = []
        while skip:
            edge = skip.pop()
            stored = self._with_retries(partial(self._backend.messages.get, edge.id, edge.queue))
            if stored is None:
                continue  # gone already (skipped through another parent)
            step = Message.decode(stored.envelope.body).node
            children = [] if step is None else step.children
            if (
                self._with_retries(partial(self._backend.messages.delete, edge.id, edge.queue))
                is None
            ):
                return None
            outcomes = [MemberOutcome(node.graph, 2 * edge.step, False, done, node.expires_ms)]
            outcomes += [_counted(child, False, done, node) for child in children]
            settled = self._with_retries(partial(self._backend.batches.settle, outcomes))
            if settled is None:
                return None
            counts = max(counts, settled[0])
            woken, skipped = self._after_skip(children, settled[1:])
            wake += woken
            skip += skipped
        return counts, wake

    def _after_skip(
        self, children: Sequence[Edge], counts: Sequence[tuple[int, int]]
    ) -> tuple[list[tuple[str, str]], list[Edge]]:
        """Of the steps after a skipped step (with their fan-ins' counts after it):
        those to wake, and those skipped with it."""
        wake: list[tuple[str, str]] = []
        skip: list[Edge] = []
        for child, (count, failed) in zip(children, counts, strict=True):
            if child.when == "success":
                skip.append(child)  # a parent skipped: it can never run
            elif count < child.size:
                continue  # its other parents settle it
            elif child.when == "failure" and not failed:
                skip.append(child)
            elif child.when == "first_success":
                if not self._succeeded_once(child.id):
                    skip.append(child)  # every parent skipped (else a success woke it)
            else:
                wake.append((child.id, child.queue))
        return wake, skip

    def _succeeded_once(self, fan_in: str) -> bool:
        """Whether a parent counted in fan-in ``fan_in`` ran and succeeded (not skipped)."""
        record = self._with_retries(partial(self._backend.batches.read, fan_in, True))
        if record is None:
            return True  # cannot tell (expired, a forced stop): leave it be
        for body in record.outcomes.values():
            outcome = ResultRecord.decode(body)
            if outcome.status == "succeeded" and outcome.attempt > 0:
                return True
        return False

    def _resumed(self, node: Node, graph: BatchRecord) -> list[tuple[str, str]]:
        """Every step of a graph that resumes that is parked and whose parents all
        succeeded (or that has none): to wake."""
        if graph.description is None:
            return []
        description = GraphDescription.decode(graph.description)
        ready = []
        for index, step in enumerate(description.steps):
            if step.when not in _WAIT_FOR_REPLAY or 2 * index in graph.outcomes:
                continue
            stored = self._with_retries(partial(self._backend.messages.get, step.id, step.queue))
            if stored is None or stored.envelope.due_ms < PARKED_MS:
                continue  # run, cancelled, or due already: not held
            if step.when == "first_success":
                if not self._succeeded_once(step.id):
                    continue
            elif step.parents:
                fan = self._with_retries(partial(self._backend.batches.read, step.id, False))
                if fan is None or fan.settled < len(step.parents) or fan.failed:
                    continue
            ready.append((step.id, step.queue))
        log.info("graph %s resumes: %d step(s) ready", node.graph, len(ready))
        return ready

    def _completed(self, graph_id: str) -> bool:
        """Every step succeeded: let go of the graph's key."""
        found = self._with_retries(partial(self._backend.batches.read, graph_id, False))
        if found is None or found.description is None:
            return True  # its records expired: no key is held for it
        description = GraphDescription.decode(found.description)
        log.info("graph %s completed: %d step(s)", graph_id, len(description.steps))
        if description.key is None:
            return True
        ok = self._with_retries(partial(drop_anchor, self._backend, description, graph_id))
        return ok is not None


def _counted(edge: Edge, failed: bool, record: bytes, node: Node) -> MemberOutcome:
    return MemberOutcome(edge.id, edge.index, failed, record, node.expires_ms)


def _ready(
    edges: Sequence[Edge], counts: Sequence[tuple[int, int]]
) -> tuple[list[tuple[str, str]], list[Edge]]:
    """Of the steps after a step (``edges``, with their fan-ins' counts after its
    outcome): those to wake (``(id, queue)``), and the failure callbacks that will not
    run (every parent succeeded)."""
    wake: list[tuple[str, str]] = []
    drop: list[Edge] = []
    for edge, (settled, failed) in zip(edges, counts, strict=True):
        if edge.when == "first_success":
            wake.append((edge.id, edge.queue))  # an or-join: each success wakes it
            continue
        if settled < edge.size:
            continue
        if edge.when == "failure" and not failed:
            drop.append(edge)
        elif edge.when != "success" or not failed:
            wake.append((edge.id, edge.queue))
    return wake, drop
