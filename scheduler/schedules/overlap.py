"""Schedules that may overlap themselves (``overlap="allow"``): the schedule's own message
becomes a ticker that never runs the task. When an occurrence of it is due, a worker
enqueues the occurrence's run as a message of its own, then acks the ticker with its next
occurrence (due on time whatever the run does), so runs start on the grid even while
earlier ones still run.

Each run is keyed by the schedule and its occurrence's time (``KEY/run/<epoch ms>``) and
keeps that key for a while after it succeeds (``RUN_KEY_KEPT``, a unique window): a
ticker redelivered after its worker died between the two writes enqueues nothing twice.
The fences hold: a ticker cancelled or replaced between the two writes cannot be acked,
so its chain ends there (the run already enqueued runs once, like a run in progress of a
cancelled schedule). A run records to the schedule's ledger like its own occurrences
(origin ``scheduled``).
"""

from __future__ import annotations

from datetime import timedelta

from scheduler.backends import Envelope
from scheduler.clock import to_ms
from scheduler.model.ids import identity_chain_id
from scheduler.model.message import Message
from scheduler.producing.building import MessageBuilder
from triggers import Overlap

#: how long a run of an overlapping schedule keeps its key after it succeeded, at least
#: (twice the ticker's lease when that is longer): longer than a ticker can wait to be
#: redelivered
RUN_KEY_KEPT = timedelta(minutes=10)


def is_ticker(message: Message) -> bool:
    """Whether ``message`` is an occurrence of a schedule with ``overlap="allow"``."""
    trigger = message.trigger
    return trigger is not None and trigger.overlap is Overlap.ALLOW


def run_of(builder: MessageBuilder, ticker: Message, due_ms: int, now_ms: int) -> Envelope:
    """The run of the ticker's occurrence: a one-off message of its task and arguments,
    scheduled at the occurrence's time and due at ``due_ms`` (the ticker's due time)."""
    base = ticker.key if ticker.key is not None else ticker.chain
    at_ms = to_ms(ticker.scheduled_at)
    run_key = f"{base}/run/{at_ms}"
    chain = identity_chain_id(ticker.queue, f"overlap\x00{ticker.chain}\x00{at_ms}")
    kept = max(RUN_KEY_KEPT, 2 * timedelta(seconds=ticker.timeout_s))
    run = builder.one_off(ticker, ticker.scheduled_at, now_ms, "scheduled", chain, run_key, kept)
    return run._replace(due_ms=due_ms)
