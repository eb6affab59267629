"""What ``tickwork workflow show`` prints: a batch with its members and callbacks, or a
chain with its steps, each with its state, attempts and timing (``app.batches.workflow``).

A batch is read from its records (``scheduler.workflows.status``). A chain is found by its
first step's id: step ``k`` is ``{id}.{k}`` and only the live step is stored (waiting,
running, or in the poison queue), carrying the steps after it, so the steps before it
succeeded. Those that keep results show them; the others show as ``succeeded`` without
timing. Finding the live step reads up to ``max_steps`` step ids.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tickwork.scheduler.backends import Backend
from tickwork.scheduler.clock import to_datetime, to_ms
from tickwork.scheduler.ids import occurrence_id
from tickwork.scheduler.model.handles import RunStatus
from tickwork.scheduler.model.message import PAUSED_DUE, Message
from tickwork.scheduler.producing.chains import chain_start, recurring_step_id, step_id
from tickwork.scheduler.runs.results import read
from tickwork.scheduler.workflows.status import read_status


class StepView(BaseModel):
    """One member, callback or chain step."""

    model_config = ConfigDict(frozen=True)

    name: str  # "member 3", "on_success", "step 2"
    id: str
    task: str | None = None
    state: str
    attempt: int | None = None
    at: datetime | None = None  # when it settled, or when it is due
    value: Any = None
    error: str | None = None
    after: list[str] = []  # in a graph: the steps it waits for

    def facts(self) -> list[str]:
        """What is known of it, as words: state, task, attempt, time, result or error."""
        parts = [self.state]
        if self.task:
            parts.append(self.task)
        if self.attempt:
            parts.append(f"attempt {self.attempt}")
        if self.at is not None:
            parts.append(self.at.isoformat(timespec="milliseconds"))
        if self.error:
            parts.append(self.error)
        elif self.value is not None:
            parts.append(f"-> {json.dumps(self.value)}")
        return parts


class WorkflowView(BaseModel):
    """A batch or a chain, as ``tickwork workflow show`` prints it."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind: Literal["batch", "chain", "graph"]
    state: str
    summary: str
    steps: list[StepView]


def batch_view(backend: Backend, batch_id: str) -> WorkflowView:
    """The batch with each member and callback; raises ``BatchNotFound``."""
    status = read_status(backend, batch_id, members=True)
    steps = [
        StepView(
            name=f"member {m.index}",
            id=m.id,
            state=m.status,
            attempt=m.attempt or None,
            at=m.settled_at,
            value=m.value,
            error=f"{m.error_type}: {m.error}" if m.status == "failed" else None,
        )
        for m in status.members
    ]
    for when, callback_id in status.callbacks.items():
        stored = backend.messages.get(callback_id)
        if stored is not None:
            parked = stored.envelope.due_ms >= to_ms(PAUSED_DUE)
            state = "waiting for the batch" if parked else str(stored.state)
            task = Message.decode(stored.envelope.body).task
            steps.append(StepView(name=f"on_{when}", id=callback_id, task=task, state=state))
        else:
            applies = when == "complete" or (when == "failure") == (status.failed > 0)
            state = ("fired" if applies else "dropped") if status.complete else "cancelled"
            steps.append(StepView(name=f"on_{when}", id=callback_id, state=state))
    pending = status.size - status.settled
    summary = (
        f"{status.size} members: {status.succeeded} succeeded, {status.failed} failed, "
        f"{pending} pending"
    )
    return WorkflowView(
        id=batch_id,
        kind="batch",
        state="settled" if status.complete else "running",
        summary=summary,
        steps=steps,
    )


def keyed_view(backend: Backend, queue: str, key: str) -> WorkflowView | None:
    """The chain holding ``key`` in ``queue`` (its live step, those before it and those
    after it), or None if nothing holds the key. For a recurring chain, the current
    occurrence."""
    stored = backend.messages.get_by_key(queue, key)
    if stored is None:
        return None
    message = Message.decode(stored.envelope.body)
    start = message.start or (chain_start(message) if message.trigger is not None else None)
    live_state = str(stored.state) if message.paused_at is None else "paused"
    steps: list[StepView] = []
    if start is not None:  # a recurring chain: every step is known from how it starts
        plan = [start.first, *start.then]
        for index, step in enumerate(plan):
            sid = (
                occurrence_id(message.chain, message.occurrence)
                if index == 0
                else recurring_step_id(message.chain, message.occurrence, index)
            )
            state = "succeeded" if index < message.step else "not started"
            if index == message.step:
                state = live_state
            at = to_datetime(stored.envelope.due_ms) if index == message.step else None
            steps.append(StepView(name=f"step {index}", id=sid, task=step.task, state=state, at=at))
        kind = f"occurrence {message.occurrence} of a recurring chain"
    else:  # steps before the live one are not carried: their ids are
        live = message.occurrence
        steps = [
            StepView(name=f"step {i}", id=step_id(message.chain, i), state="succeeded")
            for i in range(live)
        ]
        steps.append(
            StepView(
                name=f"step {live}",
                id=message.id,
                task=message.task,
                state=live_state,
                attempt=stored.attempt or None,
                at=to_datetime(stored.envelope.due_ms),
                error=stored.last_error,
            )
        )
        steps += [
            StepView(
                name=f"step {live + 1 + n}",
                id=step_id(message.chain, live + 1 + n),
                task=step.task,
                state="not started",
            )
            for n, step in enumerate(message.then)
        ]
        kind = "a chain"
    live_index = message.step if start is not None else message.occurrence
    summary = f"key {key!r}: {kind} of {len(steps)} step(s); step {live_index} is {live_state}"
    return WorkflowView(
        id=message.chain, kind="chain", state="running", summary=summary, steps=steps
    )


def chain_view(backend: Backend, first_id: str, max_steps: int = 1000) -> WorkflowView | None:
    """The chain whose first step is ``first_id``, or None if no step of it is found."""
    steps: list[StepView] = []
    for index in range(max_steps):
        sid = step_id(first_id, index)
        stored = backend.messages.get(sid)
        poisoned = backend.poison.get(sid) if stored is None else None
        if stored is None and poisoned is None:
            info = read(backend, sid)
            done = info.status in (RunStatus.SUCCEEDED, RunStatus.FAILED)
            steps.append(
                StepView(
                    name=f"step {index}",
                    id=sid,
                    state=str(info.status) if done else "succeeded",
                    attempt=info.attempt or None,
                    at=info.updated_at,
                    value=info.value,
                    error=info.error,
                )
            )
            continue
        if stored is not None:
            message = Message.decode(stored.envelope.body)
            live = StepView(
                name=f"step {index}",
                id=sid,
                task=message.task,
                state=str(stored.state),
                attempt=stored.attempt or None,
                at=to_datetime(stored.envelope.due_ms),
                error=stored.last_error,
            )
        else:
            assert poisoned is not None
            message = Message.decode(poisoned.envelope.body)
            live = StepView(
                name=f"step {index}",
                id=sid,
                task=message.task,
                state="failed",
                attempt=poisoned.attempts,
                at=to_datetime(poisoned.failed_at_ms),
                error=f"{poisoned.failure.error_type}: {poisoned.failure.message}",
            )
        later = [
            StepView(
                name=f"step {index + 1 + n}",
                id=step_id(first_id, index + 1 + n),
                task=step.task,
                state="not started",
            )
            for n, step in enumerate(message.then)
        ]
        all_steps = [*steps, live, *later]
        state = "stopped" if poisoned is not None else "running"
        summary = f"{len(all_steps)} steps: {index} done, step {index} {live.state}"
        return WorkflowView(
            id=first_id, kind="chain", state=state, summary=summary, steps=all_steps
        )
    known = [s for s in steps if s.at is not None]
    if not known:
        return None
    summary = f"no step is stored: finished (or cancelled); {len(known)} step(s) kept results"
    return WorkflowView(id=first_id, kind="chain", state="finished", summary=summary, steps=known)
