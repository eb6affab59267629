"""A graph step by step, as ``tickwork workflow show`` and the dashboard draw it: each
step's state (succeeded, skipped, failed, running, due, waiting for its parents,
cancelled), its attempts, timing, result or error, and the steps it comes after. Read
from the graph's record (``scheduler.workflows.graph_records``) and, for each step not
settled, its stored message."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tickwork.scheduler.backends import Backend
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.errors import TickworkError, WorkflowNotFound
from tickwork.scheduler.model.handles import IdHandle, ResultTimeout
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.runs.results import ResultRecord
from tickwork.scheduler.workflows.graph_records import (
    CANCELLED,
    PARKED_MS,
    graph_of_anchor,
    halted,
    read_description,
)
from tickwork.scheduler.workflows.status import BatchReader
from tickwork.scheduler.workflows.view import StepView, WorkflowView


def graph_view(backend: Backend, graph_id: str, again: bool = True) -> WorkflowView | None:
    """The graph with each step; None when it is not stored (a wrong id, or expired).
    A step records its outcome before its message is deleted, so one found in neither
    settled between the two reads: the graph is read ``again`` once then."""
    found = read_description(backend, graph_id, outcomes=True)
    if found is None:
        return None
    description, record = found
    cancelled = CANCELLED in record.outcomes
    steps: list[StepView] = []
    counts = {"succeeded": 0, "skipped": 0, "failed": 0}
    for index, step in enumerate(description.steps):
        succeeded = record.outcomes.get(2 * index)
        failed = record.outcomes.get(2 * index + 1)
        settled = succeeded if succeeded is not None else failed
        view = StepView(name=step.name, id=step.id, task=step.task, state="", after=step.parents)
        if settled is not None:
            outcome = ResultRecord.decode(settled)
            # a step skipped (trigger rules) is counted done without an attempt
            done = "succeeded" if outcome.attempt else "skipped"
            state = "failed" if succeeded is None else done
            view = view.model_copy(
                update={
                    "state": state,
                    "attempt": outcome.attempt or None,
                    "at": to_datetime(outcome.at_ms) if outcome.at_ms else None,
                    "value": outcome.value,
                    "error": None
                    if succeeded is not None
                    else f"{outcome.error_type}: {outcome.error}",
                }
            )
            counts[view.state] += 1
        if succeeded is None:
            stored = None if cancelled else backend.messages.get(step.id, step.queue)
            if stored is not None:  # not yet run, or replayed from the poison queue
                parked = stored.envelope.due_ms >= PARKED_MS
                state = "waiting" if parked else str(stored.state)
                due = None if parked else to_datetime(stored.envelope.due_ms)
                if failed is None:
                    task = Message.decode(stored.envelope.body).task
                    view = view.model_copy(update={"task": task, "at": due})
                view = view.model_copy(
                    update={"state": state if failed is None else f"replayed, {state}"}
                )
            elif not cancelled and again:  # a replayed step too may have settled since
                return graph_view(backend, graph_id, again=False)
            elif failed is None:
                view = view.model_copy(update={"state": "cancelled" if cancelled else "gone"})
        steps.append(view)
    size = len(description.steps)
    pending = size - sum(counts.values())
    if counts["succeeded"] + counts["skipped"] == size:
        state = "succeeded"
    elif cancelled:
        state = "cancelled"
    elif halted(record) and description.failure == "stop":
        state = "stopped"
    else:
        state = "running"
    skipped = f"{counts['skipped']} skipped, " if counts["skipped"] else ""
    summary = (
        f"{size} steps: {counts['succeeded']} succeeded, {skipped}{counts['failed']} failed, "
        f"{pending} pending (on failure: {description.failure})"
    )
    return WorkflowView(id=graph_id, kind="graph", state=state, summary=summary, steps=steps)


class GraphFailed(TickworkError):
    """Raised by ``GraphHandle.results()`` when the graph cannot complete: a step failed
    for good (until it is replayed), or it was cancelled."""

    def __init__(self, view: WorkflowView) -> None:
        failed = [step for step in view.steps if step.state == "failed"]
        why = f"step {failed[0].name} failed: {failed[0].error}" if failed else view.state
        super().__init__(f"graph {view.id} ({view.state}): {why}")
        self.view = view


class GraphHandle(IdHandle):
    """The id of an enqueued graph (a ``str``), and what its caller can ask of it."""

    _app: BatchReader
    _schedule: tuple[str, str] | None  # a scheduled graph's (queue, key)

    def __new__(
        cls, graph_id: str, app: BatchReader, schedule: tuple[str, str] | None = None
    ) -> GraphHandle:
        handle = super().__new__(cls, graph_id)
        handle._app = app
        handle._schedule = schedule
        return handle

    def status(self) -> WorkflowView:
        """Each step's state, read now; ``WorkflowNotFound`` if it is not stored. The
        handle of a scheduled graph follows the run it started last."""
        graph_id = self._graph_id()
        view = graph_view(self._app.backend, graph_id)
        if view is None:
            raise WorkflowNotFound(f"no graph {graph_id} is stored (a wrong id, or it expired)")
        return view

    def _graph_id(self) -> str:
        if self._schedule is None:
            return str(self)
        stored = self._app.backend.messages.get_by_key(*self._schedule)
        live = None if stored is None else graph_of_anchor(stored.envelope.body)
        if live is None:
            raise WorkflowNotFound(f"the scheduled graph {self} has no run (yet, or any more)")
        return live

    def wait(self, timeout: float | None = None) -> WorkflowView:
        """Wait until the graph succeeded, was cancelled, or can go no further (a step
        failed for good and nothing else is running or due); its view then.
        ``ResultTimeout`` after ``timeout`` seconds (None: as long as it takes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.01
        while not settled(view := self.status()):
            if deadline is not None and time.monotonic() + pause > deadline:
                raise ResultTimeout(f"graph {self}: {view.summary}")
            time.sleep(pause)
            pause = min(pause * 2, 0.25)
        return view

    def results(self, timeout: float | None = None) -> dict[str, Any]:
        """Each step's result by name (None for a task that returns nothing), once every
        step succeeded; ``GraphFailed`` if the graph cannot complete."""
        view = self.wait(timeout)
        if view.state != "succeeded":
            raise GraphFailed(view)
        return {step.name: step.value for step in view.steps}

    def result(self, timeout: float | None = None) -> dict[str, Any]:
        """``results``: the name every handle shares (``WorkflowHandle``)."""
        return self.results(timeout)

    async def aresult(self, timeout: float | None = None) -> dict[str, Any]:
        """``results`` for code in an event loop (the waits run in a thread)."""
        return await asyncio.to_thread(self.results, timeout)


def settled(view: WorkflowView) -> bool:
    """Whether the graph can go no further without a replay or a cancel. A step seen as
    gone (its message no longer stored, its outcome not yet read: a read racing its
    settle) keeps it unsettled: the next look sees it as it is."""
    if any(step.state == "gone" for step in view.steps):
        return False
    if view.state in ("succeeded", "cancelled", "stopped"):
        return view.state != "stopped" or not _moving(view)
    return any(step.state == "failed" for step in view.steps) and not _moving(view)


def _moving(view: WorkflowView) -> bool:
    """Whether a step is running or due (not waiting for its parents or done)."""
    return any(
        step.state not in ("succeeded", "skipped", "failed", "waiting", "cancelled", "gone")
        for step in view.steps
    )


def levels(view: WorkflowView) -> dict[str, int]:
    """Each step's depth in a graph's view: 0 without parents, else one more than its
    deepest parent (what a drawing lays out in columns)."""
    depth: dict[str, int] = {}
    steps = {step.name: step for step in view.steps}
    for step in view.steps:
        stack = [step.name]
        while stack:  # iterative: a graph may be deeper than Python's recursion
            name = stack[-1]
            parents = steps[name].after
            missing = [p for p in parents if p not in depth]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            depth[name] = 1 + max((depth[p] for p in parents), default=-1)
    return depth
