"""Chains: steps that run one after another, each once the step before it succeeded.

``chain(a.si(1), b.s(), c.s(x=2))`` is enqueued like any call (``app.enqueue``) and
returns the first step's handle. A chain is stored in its running step: the message of
a step carries the steps after it (``Message.then``), and when it succeeds the worker
writes the next step's message in the same atomic step as the ack (where a recurring
message writes its next occurrence), so a chain never loses a step and never runs one
twice on any backend. A step made with ``task.s()`` takes the previous step's return
value as its first argument; one made with ``task.si()`` (or ``task.call()``) does not,
as in Celery's mutable and immutable signatures. A step that fails for good goes to the
poison queue with the rest of the chain in its message: the chain stops there, and
replaying that message from the poison queue resumes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, overload

from pydantic_core import PydanticSerializationError, from_json, to_jsonable_python

from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.ids import occurrence_id
from tickwork.scheduler.model.limits import fair_value, limit_keys
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.model.places import ChainStart, Step
from tickwork.scheduler.model.shapes import Batch, Group, Sequenced
from tickwork.scheduler.model.tasks import Call, TaskFunction

log = logging.getLogger("tickwork.worker")


@overload
def chain(*calls: Call) -> Call: ...  # type: ignore[overload-overlap]


@overload
def chain(*calls: Call | Group | Batch | Sequenced) -> Sequenced: ...


def chain(*calls: Call | Group | Batch | Sequenced) -> Call | Sequenced:
    """The first call, carrying the others as the steps after it. The first step keeps its
    own options (``at``, ``delay``, ``queue``, ``priority``); a later step may choose its
    priority and its queue. The first step takes a previous result (``.s()``) only as a
    batch's callback, which takes the batch's. A chain nested in a chain is spliced in; a
    chain with a group or a batch in it, or with steps in more than one queue, runs as a
    graph (``scheduler.workflows.graphs``), in which a step after a group takes the
    group's results as a list. (A chain of one queue is stored in its running step, its
    next step written with the ack; on Redis Cluster another queue may be on another
    shard, out of that atomic step's reach, so a chain that changes queue runs as a
    graph, whose fan-in works across shards.)"""
    if not calls:
        raise InvalidMessage("a chain needs at least one step")
    if not all(isinstance(call, Call) for call in calls):
        return Sequenced(tuple(calls))
    steps: list[Call] = []
    for call in calls:
        assert isinstance(call, Call)
        steps += [call.options(then=()), *call.then]  # a nested chain is spliced in
    first, rest = steps[0], steps[1:]
    for call in rest:
        if call.key or call.trigger or call.at or call.delay_by or call.identity:
            raise InvalidMessage(
                f"step {call.task} of a chain cannot have its own key, trigger or time: "
                "it runs when the step before it succeeds"
            )
    if len({queue for step in steps if (queue := _queue_of(step)) is not None}) > 1:
        return Sequenced(tuple(steps))  # its steps change queue: it runs as a graph
    return first.options(then=tuple(rest))


def _queue_of(call: Call) -> str | None:
    """The queue ``call`` runs in: its own, else its task's default (when the app that
    made it knows the task), else unknown (None)."""
    if call.queue is not None or call.producer is None:
        return call.queue
    return call.producer.task_queue(call.task)


def resolve_step(call: Call, task: TaskFunction[..., Any]) -> Step:
    """The stored form of a later step: its arguments validated now (a step that takes
    the previous result has its arity checked now and its types when it runs)."""
    if call.cost is not None:
        raise InvalidMessage(
            f"cost= of {task.name}: a later step of a chain counts one unit of its rate "
            "limit; give cost= to a call enqueued on its own, or first in its chain"
        )
    if call.takes_result:
        args, kwargs = result_taking_arguments(call, task, "the previous result")
    else:
        args, kwargs = task.arguments.to_json(call.args, call.kwargs)
    options = task.options
    limit, rate, fair = step_keys(task, call, takes_result=call.takes_result)
    return Step(
        task=task.name,
        args=args,
        kwargs=kwargs,
        takes_result=call.takes_result,
        queue=options.queue if call.queue is None else call.queue,
        priority=options.priority if call.priority is None else call.priority,
        timeout_s=options.timeout_s,
        max_attempts=options.retry.max_attempts,
        limit=limit,
        rate=rate,
        fair=fair,
    )


def stored_steps(
    call: Call, queue: str, lookup: Callable[[str], TaskFunction[..., Any]]
) -> list[dict[str, Any]] | None:
    """The stored form of the steps after ``call`` in a chain (validated now, each task
    found by ``lookup``); every step runs in the first step's ``queue`` (its next step is
    written where it is acked: on Redis, in its queue's shard)."""
    if not call.then:
        return None
    steps = [resolve_step(step, lookup(step.task)) for step in call.then]
    for step in steps:
        if step.queue != queue:
            raise InvalidMessage(
                f"step {step.task} of a chain would run in queue {step.queue!r}, the "
                f"chain in {queue!r}: make the chain with chain(...) of the tasks' "
                ".s() and .si() calls (one that changes queue runs as a graph), or "
                f"give the step queue={queue!r}"
            )
    return [step.model_dump(mode="json", exclude_defaults=True) for step in steps]


def step_keys(
    task: TaskFunction[..., Any], call: Call, takes_result: bool = False
) -> tuple[str | None, str | None, str | None]:
    """The concurrency limit, rate limit and fair-share keys a step's message carries
    (``Message.limit``, ``rate``, ``fair``). A step that takes the previous result lacks
    its first argument until it is written: a key that comes from the arguments is
    then None here and worked out by ``MessageBuilder.next_step``."""
    options = task.options
    limits = (options.concurrency_limit, options.rate_limit)
    signature = task.arguments.signature
    if takes_result:
        limit, rate = (
            limit_keys(task.name, signature, limits, None, (), {})
            if options.limit_key is None
            else (None, None)
        )
        return limit, rate, None
    limit, rate = limit_keys(
        task.name, signature, limits, options.limit_key, call.args, call.kwargs
    )
    fair = fair_value(task.name, signature, options.fair_key, call.args, call.kwargs)
    return limit, rate, fair


def result_taking_arguments(
    call: Call, task: TaskFunction[..., Any], what: str
) -> tuple[list[Any], dict[str, Any]]:
    """The JSON arguments of a call whose first argument (``what``) arrives when it runs:
    their arity is checked now against the task's signature, their types when it runs."""
    try:
        task.arguments.signature.bind(None, *call.args, **call.kwargs)
    except TypeError as err:
        raise InvalidMessage(
            f"arguments for {task.name!r} (which takes {what} first) do not match its "
            f"signature: {err}"
        ) from err
    try:
        return to_jsonable_python(list(call.args)), to_jsonable_python(dict(call.kwargs))
    except PydanticSerializationError as err:
        raise InvalidMessage(
            f"arguments for {task.name!r} are not JSON-serialisable: {err}"
        ) from err


def step_id(first_id: str, index: int) -> str:
    """The message id of step ``index`` (0 is the first) of the chain whose first step is
    ``first_id`` (what ``app.enqueue(chain(...))`` returned)."""
    return occurrence_id(first_id, index)


def recurring_step_id(chain: str, occurrence: int, step: int) -> str:
    """The id of step ``step`` (from 1) of occurrence ``occurrence`` of a recurring chain
    (``~`` keeps it apart from the occurrence ids ``{chain}.{n}``)."""
    return f"{occurrence_id(chain, occurrence)}~{step}"


def chain_start(message: Message) -> ChainStart:
    """How the recurring chain whose first step is ``message`` starts each occurrence."""
    first = Step(
        task=message.task,
        args=message.args,
        kwargs=message.kwargs,
        queue=message.queue,
        priority=message.priority,
        timeout_s=message.timeout_s,
        max_attempts=message.max_attempts,
        limit=message.limit,
        rate=message.rate,
        fair=message.fair,
    )
    return ChainStart(
        first=first, then=message.then, limit=message.limit, rate=message.rate, fair=message.fair
    )


def head_of(message: Message) -> Message:
    """A recurring chain's step as its occurrence's first step (other messages as they
    are): what a next occurrence, a manual run or a backfilled run starts from."""
    start = message.start
    if start is None:
        return message
    first = start.first
    return message.model_copy(
        update={
            "id": occurrence_id(message.chain, message.occurrence),
            "queue": first.queue,
            "task": first.task,
            "args": first.args,
            "kwargs": first.kwargs,
            "priority": first.priority,
            "max_attempts": first.max_attempts,
            "timeout_s": first.timeout_s,
            "limit": start.limit,
            "rate": start.rate,
            "fair": start.fair,
            "then": start.then,
            "step": 0,
            "start": None,
        }
    )


def step_after(
    message: Message,
    now: datetime,
    value: bytes | None,
    tasks: Mapping[str, TaskFunction[..., Any]],
) -> Message:
    """The message of the step after ``message`` (which succeeded at ``now`` and returned
    ``value``, JSON) in its chain: the chain's next occurrence number, or within a
    recurring chain's occurrence the next step number. ``tasks``: the registered tasks,
    for the keys of a step that takes the previous result."""
    step, rest = message.then[0], message.then[1:]
    args = list(step.args)
    if step.takes_result:
        args.insert(0, from_json(value) if value is not None else None)
    limit, rate, fair = _written_step_keys(step, args, tasks.get(step.task))
    if message.trigger is not None:  # a recurring chain: its occurrence goes on
        return message.model_copy(
            update={
                "id": recurring_step_id(message.chain, message.occurrence, message.step + 1),
                "queue": step.queue,
                "task": step.task,
                "args": args,
                "kwargs": step.kwargs,
                "priority": step.priority,
                "max_attempts": step.max_attempts,
                "timeout_s": step.timeout_s,
                "enqueued_at": now,
                "limit": limit,
                "rate": rate,
                "fair": fair,
                "then": rest,
                "step": message.step + 1,
                "start": message.start or chain_start(message),
            }
        )
    return Message(
        id=occurrence_id(message.chain, message.occurrence + 1),
        queue=step.queue,
        task=step.task,
        args=args,
        kwargs=step.kwargs,
        priority=step.priority,
        key=message.key,
        chain=message.chain,
        occurrence=message.occurrence + 1,
        scheduled_at=now,
        enqueued_at=now,
        max_attempts=step.max_attempts,
        timeout_s=step.timeout_s,
        headers=message.headers,
        limit=limit,
        rate=rate,
        fair=fair,
        then=rest,
    )


def _written_step_keys(
    step: Step, args: list[Any], task: TaskFunction[..., Any] | None
) -> tuple[str | None, str | None, str | None]:
    """The limit and fair-share keys of ``step``'s message: as stored with the chain,
    or, for a step that takes the previous result, from its arguments now (its task
    registered here); a key that cannot be had then is left out, with a warning."""
    if not step.takes_result or task is None:
        return step.limit, step.rate, step.fair
    if task.options.limit_key is None and task.options.fair_key is None:
        return step.limit, step.rate, step.fair
    try:
        return step_keys(task, Call(step.task, tuple(args), step.kwargs))
    except InvalidMessage as err:
        log.warning("chain step %s runs without its limit or fair-share key: %s", step.task, err)
        return step.limit, step.rate, step.fair
