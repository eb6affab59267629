"""How a message is born (``build``: a validated ``Call`` becomes an id and an
``Envelope``) and reborn (``next_occurrence``: the envelope of a chain's next run).

Nothing here touches a backend: ``App`` writes what this module builds, and workers ask
it for next occurrences when they settle. Ids follow ``scheduler.ids``: a keyed chain's
id derives from (queue, key), so building the same call twice names the same message.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from tickwork.scheduler.backends import Envelope
from tickwork.scheduler.clock import Clock, to_datetime, to_ms
from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.ids import first_chain_id, new_chain_id, occurrence_id
from tickwork.scheduler.model import headers as header_names
from tickwork.scheduler.model.batching import batch_value
from tickwork.scheduler.model.limits import fair_value, limit_keys
from tickwork.scheduler.model.message import (
    UNIQUE_FOR,
    UNIQUE_UNTIL,
    Message,
    encode_fields,
    is_unique_window,
    reencode,
)
from tickwork.scheduler.model.places import Callback, Membership, Node
from tickwork.scheduler.model.registry import TaskRegistry
from tickwork.scheduler.model.tasks import Call, TaskFunction
from tickwork.scheduler.producing.chains import (
    head_of,
    result_taking_arguments,
    step_after,
    stored_steps,
)
from tickwork.scheduler.producing.plain import PlainPath, is_plain
from tickwork.scheduler.producing.planning import (
    check_cost,
    check_overlap,
    check_scalars,
    expiry_ms,
    plan,
)
from tickwork.scheduler.runs.tracing import with_traceparent
from tickwork.triggers import Trigger


class MessageBuilder:
    """Builds first and next occurrences for the tasks of one registry.

    ``max_payload_bytes`` bounds an encoded body; ``clock`` stamps enqueue times.
    """

    def __init__(
        self,
        registry: TaskRegistry,
        clock: Clock,
        max_payload_bytes: int,
        rng: random.Random | None = None,
    ) -> None:
        self.registry = registry
        self.clock = clock
        self.max_payload_bytes = max_payload_bytes
        self._rng = rng or random.Random()
        #: attach a trigger's named calendar before planning it (the app sets them:
        #: ``scheduler.schedules.calendars``); ``shared_required`` refuses an unknown one
        self.shared: Callable[[Trigger], Trigger] = _unchanged
        self.shared_required: Callable[[Trigger], Trigger] = _unchanged
        self._plain = PlainPath()

    def build(
        self,
        call: Call,
        now_ms: int | None = None,
        now: datetime | None = None,
        *,
        chain: str | None = None,
        member: Membership | None = None,
        callback: Callback | None = None,
        node: Node | None = None,
    ) -> tuple[str, Envelope]:
        """Validate ``call`` and build its first message: (id, envelope). Raises
        ``InvalidMessage``; writes nothing. ``now_ms``/``now`` let a bulk caller pass the
        clock reading once. A batch (``scheduler.workflows.batches``) names its members and
        callbacks itself (``chain``) and marks them (``member``, ``callback``), a graph its
        nodes (``node``); a callback or node that takes results first has its other
        arguments checked for arity."""
        task = self.registry.lookup(call.task)
        if now_ms is None:
            now_ms = self.clock.now_ms()
            now = None
        if now is None:
            now = to_datetime(now_ms)
        if (
            chain is None
            and member is None
            and callback is None
            and node is None
            and is_plain(call, task.options)
        ):
            return self._plain.build(call, task, now_ms, now, self.envelope)
        return self._build_general(call, task, now_ms, now, chain, member, callback, node)

    def _build_general(
        self,
        call: Call,
        task: TaskFunction[..., Any],
        now_ms: int,
        now: datetime,
        chain: str | None = None,
        member: Membership | None = None,
        callback: Callback | None = None,
        node: Node | None = None,
    ) -> tuple[str, Envelope]:
        """``build`` for any call (the plain one's too, which ``PlainPath`` builds
        faster): every option checked, every field encoded through ``encode_fields``."""
        if call.takes_result and node is not None and node.takes is not None:
            args, kwargs = result_taking_arguments(call, task, "its parents' results")
        elif call.takes_result:
            if callback is None:
                raise InvalidMessage(
                    f"{task.name} was made with .s(), to take a previous result, but it "
                    "has no previous result to take here: make it with .si() or .call() "
                    "(.s() is for a later step of a chain, or a batch's callback)"
                )
            args, kwargs = result_taking_arguments(call, task, "the batch's outcome")
        else:
            args, kwargs = task.arguments.to_json(call.args, call.kwargs)
        options = task.options
        limit, rate = limit_keys(
            task.name,
            task.arguments.signature,
            (options.concurrency_limit, options.rate_limit),
            options.limit_key,
            call.args,
            call.kwargs,
        )
        fair = fair_value(
            task.name, task.arguments.signature, options.fair_key, call.args, call.kwargs
        )
        if options.batch is not None:  # its batch key must be had from what is stored
            batch_value(task.name, options.batch, args, kwargs)
        queue = task.options.queue if call.queue is None else call.queue
        check_scalars(call, queue)
        check_overlap(call, task.name, limited=limit is not None)
        cost = check_cost(call.cost, task.name, options.rate_limit)
        if call.trigger is not None and call.trigger.calendar is not None:
            call = replace(call, trigger=self.shared_required(call.trigger))
        stored, fire, jitter_s = plan(call, now)
        if chain is None:
            chain = first_chain_id(queue, call.key, call.identity, now_ms)
        message_id = occurrence_id(chain, fire.occurrence)
        priority = task.options.priority if call.priority is None else call.priority
        expire_after_ms = expiry_ms(call, task.options.expires, fire.at, stored is not None)
        # every field was validated above, so encode directly instead of through a model
        body = encode_fields(
            id=message_id,
            queue=queue,
            task=task.name,
            chain=chain,
            scheduled_at=fire.at,
            enqueued_at=now,
            args=args,
            kwargs=kwargs,
            key=call.key,
            priority=priority,
            trigger=None
            if stored is None
            else stored.model_dump(mode="json", exclude_defaults=True),
            occurrence=fire.occurrence,
            max_attempts=task.options.retry.max_attempts,
            timeout_s=task.options.timeout_s,
            headers=with_traceparent(call.headers),
            misfires=fire.misfires,
            limit=limit,
            rate=rate,
            fair=fair,
            cost=cost,
            then=stored_steps(call, queue, self.registry.lookup),
            member=None if member is None else member.model_dump(),
            callback=None if callback is None else callback.model_dump(),
            node=None if node is None else node.model_dump(exclude_defaults=True),
            expire_after_ms=expire_after_ms,
        )
        envelope = self.envelope(
            message_id,
            queue,
            call.key,
            priority,
            task.options.timeout_s,
            body,
            fire.at,
            jitter_s,
            now,
            now_ms,
            fair,
            limit,
        )
        return message_id, waiting(envelope, task.options.max_wait)

    def next_step(self, message: Message, now_ms: int, value: bytes | None) -> Envelope:
        """The envelope of the step after ``message`` (which succeeded and returned
        ``value``, JSON) in its chain (``scheduler.producing.chains.step_after``): due now."""
        now = to_datetime(now_ms)
        return self.restored(step_after(message, now, value, self.registry.tasks), now)

    def envelope(
        self,
        message_id: str,
        queue: str,
        key: str | None,
        priority: int,
        timeout_s: float,
        body: bytes,
        at: datetime,
        jitter_s: float,
        now: datetime | None = None,
        now_ms: int | None = None,
        fair: str | None = None,
        limit: str | None = None,
    ) -> Envelope:
        """The envelope of an encoded body due ``at`` (plus up to ``jitter_s``); raises
        ``InvalidMessage`` for a body over ``max_payload_bytes``."""
        if len(body) > self.max_payload_bytes:
            raise InvalidMessage(
                f"message {message_id} is {len(body)} bytes, over the "
                f"{self.max_payload_bytes}-byte limit (max_payload_bytes)"
            )
        due = at + timedelta(seconds=self._rng.uniform(0, jitter_s)) if jitter_s else at
        due_ms = now_ms if now_ms is not None and due is now else to_ms(due)
        timeout_ms = int(timeout_s * 1000)
        return Envelope(message_id, queue, key, priority, due_ms, timeout_ms, body, fair, limit)

    def restored(self, message: Message, due: datetime) -> Envelope:
        """The envelope of ``message`` (already built, maybe changed) due at ``due``."""
        return self.envelope(
            message.id,
            message.queue,
            message.key,
            message.priority,
            message.timeout_s,
            message.encode(),
            due,
            0.0,
            fair=message.fair,
            limit=message.limit,
        )

    def one_off(
        self,
        message: Message,
        at: datetime,
        now_ms: int,
        origin: str,
        chain: str | None = None,
        key: str | None = None,
        unique_for: timedelta | None = None,
    ) -> Envelope:
        """A non-recurring run of ``message``'s task and arguments, scheduled at ``at`` and
        due at once: a manual run, a caught-up or a backfilled occurrence of a schedule.
        ``origin`` goes to the ``tickwork-origin`` header; ``chain`` (else a fresh id)
        names it, so a deterministic one makes a repeat a duplicate. With ``key`` and
        ``unique_for`` the run holds its key that long after it succeeds."""
        now = to_datetime(now_ms)
        chain = chain or new_chain_id(now_ms)
        message = head_of(message)  # a recurring chain runs from its first step
        headers = {**message.headers, header_names.ORIGIN: origin}
        if message.key is not None:  # its record goes to the schedule's ledger
            headers[header_names.SCHEDULE] = message.key
        if unique_for is not None:
            headers[UNIQUE_FOR] = str(unique_for // timedelta(milliseconds=1))
        run = message.model_copy(
            update={
                "id": chain,
                "chain": chain,
                "key": key,
                "trigger": None,
                "occurrence": 0,
                "scheduled_at": at,
                "enqueued_at": now,
                "last_run_at": None,
                "misfires": 0,
                "paused_at": None,
                "headers": headers,
            }
        )
        return self.restored(run, now)

    def unique_window(self, message: Message, now_ms: int) -> Envelope | None:
        """What holds the key of ``message`` (keyed, one-off, just succeeded) for its task's
        ``unique_for`` window: a message due at the window's end that no worker runs
        (``is_unique_window``); None when the task has no window. Stored in the ack's
        atomic step, like a next occurrence."""
        task = self.registry.tasks.get(message.task)
        window = task.options.unique_for if task is not None else None
        if UNIQUE_FOR in message.headers:  # the message's own window (a backfilled run)
            window = timedelta(milliseconds=int(message.headers[UNIQUE_FOR]))
        if window is None or message.key is None or is_unique_window(message):
            return None
        until = to_datetime(now_ms) + window
        holder = message.model_copy(
            update={
                "id": occurrence_id(message.chain, message.occurrence + 1),
                "occurrence": message.occurrence + 1,
                "scheduled_at": until,
                "enqueued_at": to_datetime(now_ms),
                "last_run_at": message.scheduled_at,
                "last_success_at": message.scheduled_at,
                "headers": {**message.headers, UNIQUE_UNTIL: str(to_ms(until))},
            }
        )
        return self.restored(holder, until)

    def next_occurrence(
        self, message: Message, now_ms: int, succeeded: bool = True, value: bytes | None = None
    ) -> Envelope | None:
        """The envelope of the occurrence after ``message``, or None if the chain ends.
        ``succeeded``: whether ``message``'s run succeeded (it becomes the chain's last
        success) or failed for good. A keyed one-off message of a task with ``unique_for``
        that succeeded is followed by its unique window (``unique_window``); a step of a
        workflow chain that succeeded (returning ``value``) by the next step. A recurring
        chain's next occurrence (its first step again) follows its last step, or the step
        that failed for good: an occurrence never overlaps the one before it."""
        return self.following_run(message, now_ms, succeeded, value)[0]

    def following_run(
        self,
        message: Message,
        now_ms: int,
        succeeded: bool = True,
        value: bytes | None = None,
        body: bytes | None = None,
    ) -> tuple[Envelope | None, int]:
        """``next_occurrence``, and how many grid occurrences between ``message``'s and it
        will never run (the misfire policy dropped them: the run ended late). One without
        steps is written from ``body`` (``message`` as stored) when given: ``reencode``."""
        if message.then and succeeded:
            return self.next_step(message, now_ms, value), 0
        if message.trigger is None:
            if message.then:
                return None, 0
            return (self.unique_window(message, now_ms) if succeeded else None), 0
        planner = self.shared(message.trigger).with_misfires(message.misfires)
        fire = planner.following(message.scheduled_at, message.occurrence, to_datetime(now_ms))
        if fire is None:
            return None, 0
        now, next_id = to_datetime(now_ms), occurrence_id(message.chain, fire.occurrence)
        changes = {
            "id": next_id,
            "occurrence": fire.occurrence,
            "scheduled_at": fire.at,
            "enqueued_at": now,
            "last_run_at": message.scheduled_at,
            "misfires": message.misfires + fire.misfires,
            "last_success_at": message.scheduled_at if succeeded else message.last_success_at,
        }
        head = head_of(message)
        if body is not None and head is message and not message.then:
            encoded = reencode(body, changes)
        else:
            head = head.model_copy(update=changes)
            encoded = head.encode()
        envelope = self.envelope(
            next_id,
            head.queue,
            head.key,
            head.priority,
            head.timeout_s,
            encoded,
            planner.due_after(fire, now),
            message.trigger.jitter.total_seconds(),
            fair=head.fair,
            limit=head.limit,
        )
        task = self.registry.tasks.get(head.task)
        return waiting(envelope, None if task is None else task.options.max_wait), fire.misfires


def waiting(envelope: Envelope, max_wait: timedelta | None) -> Envelope:
    """``envelope`` to be promoted ahead of every priority ``max_wait`` after its due time
    if it is still waiting then (unchanged without a ``max_wait``)."""
    if max_wait is None:
        return envelope
    return envelope._replace(promote_ms=envelope.due_ms + int(max_wait.total_seconds() * 1000))


def _unchanged(trigger: Trigger) -> Trigger:
    return trigger
