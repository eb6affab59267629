"""Debounce at enqueue (a task's ``debounce=``, ``scheduler/model/debounce.py``): a call is
stored under its group's key, due one quiet period from now, replacing the call before it
in the group; the first call's time rides in a header so that the run is due at the
latest ``max`` after it. One read (the key's holder) before the write: a debounced call
costs a round trip more than a plain one.

A call that arrives while the group's run has started (or is due and claimed, about to
start) starts a new period in the group's second slot (``KEY~next``), so the run goes
on, its ack written, and the next run is due a period after that call at the soonest. A
run claimed but not due yet (parked in a worker's timer within its lookahead) has not
started: a call joins its period, and the worker forgets the claim it no longer holds."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from pydantic_core import ValidationError

from tickwork.scheduler.backends import Backend, State, StoredMessage
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.model.debounce import Debounce
from tickwork.scheduler.model.limits import limit_value
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.model.tasks import Call, TaskFunction

#: the header holding the time (ms) of the first call of the message's period
FIRST_CALL = "tw-debounce-first"
#: the suffix of a group's second slot (``_slot``)
NEXT_SLOT = "~next"
_MS = timedelta(milliseconds=1)


def debounced(call: Call, task: TaskFunction[..., Any], backend: Backend, now_ms: int) -> Call:
    """``call`` as its debounced message is written (with ``OnConflict.REPLACE``): under
    its group's key, due a period from now (at most ``max`` after the period's first call),
    with the first call's arguments when the task keeps them."""
    rule = task.options.debounce
    assert rule is not None
    if call.at is not None or call.delay_by is not None or call.trigger is not None:
        raise InvalidMessage(
            f"task {task.name!r} is debounced: its calls run a quiet period after the last "
            "one, not at a time of their own (at=, delay=, trigger=)"
        )
    group = call.key or group_key(task, rule, call)
    queue = call.queue or task.options.queue
    key, holder = _slot(backend, queue, group, now_ms)
    first_ms = now_ms
    if holder is not None:  # the period waiting: this call joins it
        try:
            pending = Message.decode(holder.envelope.body)
        except (ValidationError, ValueError):
            pending = None
        if pending is not None and (first := pending.headers.get(FIRST_CALL)) is not None:
            first_ms = int(first)
            if rule.keep == "first":
                call = replace(call, args=tuple(pending.args), kwargs=dict(pending.kwargs))
    due_ms = now_ms + rule.period // _MS
    if rule.max is not None:
        due_ms = min(due_ms, first_ms + rule.max // _MS)
    headers = {**(call.headers or {}), FIRST_CALL: str(first_ms)}
    return replace(call, key=key, at=to_datetime(max(due_ms, now_ms)), headers=headers)


def _slot(
    backend: Backend, queue: str, group: str, now_ms: int
) -> tuple[str, StoredMessage | None]:
    """Where a call of ``group`` is written, and the waiting message it joins (None: it
    starts a period). A group has two slots, its key and ``KEY~next``: the period waiting
    is in one; while the other's run has started, or is due and claimed (about to start:
    replacing it would cancel it), a new period goes in the free slot instead, so no
    started run is ever cancelled by a call. A message claimed within a worker's
    lookahead but not due yet has not started: it is still waiting."""
    slots = (group, f"{group}{NEXT_SLOT}")
    holders = [backend.messages.get_by_key(queue, key) for key in slots]
    for key, holder in zip(slots, holders, strict=True):
        if holder is not None and not _started(holder, now_ms):
            return key, holder
    for key, holder in zip(slots, holders, strict=True):
        if holder is None:
            return key, None
    # both started (a run, and the next one due while it still runs): the earlier is
    # replaced, as a call replaced a running message before there were two slots
    first, second = holders
    assert first is not None and second is not None
    return slots[0 if first.envelope.due_ms <= second.envelope.due_ms else 1], None


def _started(holder: StoredMessage, now_ms: int) -> bool:
    return holder.state is State.RUNNING and holder.envelope.due_ms <= now_ms


def group_key(task: TaskFunction[..., Any], rule: Debounce, call: Call) -> str:
    """The key of ``call``'s debounce group: one per task, or per value of ``rule.key``."""
    if rule.key is None:
        return f"debounce:{task.name}"
    value = limit_value(
        task.name, task.arguments.signature, rule.key, call.args, call.kwargs, "debounce key"
    )
    return f"debounce:{task.name}:{value}"
