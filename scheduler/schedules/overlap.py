"""Schedules whose occurrences do not wait for the run before them to end (every
``overlap`` policy but ``serial``): the schedule's own message becomes a ticker that never
runs the task. When an occurrence of it is due, a worker enqueues the occurrence's run as
a message of its own, then acks the ticker with its next occurrence (due on time whatever
the run does). With ``allow`` runs start on the grid even while earlier ones still run.
The other policies run one at a time: each run holds the one slot of its schedule's
concurrency limit (``overlap_limit``), so a run that falls while another runs waits for it
(woken when its slot frees, never polled), and the ticker remembers the last two runs it
enqueued (the ``LAST_RUN`` header of its next occurrence): ``buffer_one`` skips an
occurrence while the older of them is still stored, so the newer one waits behind it
(recorded as ``skipped_overlap``), ``buffer_all`` queues every one, ``cancel_other`` and
``terminate_other`` abort them first (each ends as ``aborted`` in the ledger;
``terminate_other`` kills it at once on the process pool).

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

from tickwork.scheduler.backends import Envelope
from tickwork.scheduler.clock import to_ms
from tickwork.scheduler.ids import identity_chain_id
from tickwork.scheduler.model.headers import LAST_RUN, OVERLAP
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.producing.building import MessageBuilder
from tickwork.triggers import Overlap

#: how long a run of an overlapping schedule keeps its key after it succeeded, at least
#: (twice the ticker's lease when that is longer): longer than a ticker can wait to be
#: redelivered
RUN_KEY_KEPT = timedelta(minutes=10)


#: the prefix of a schedule's own concurrency limit (capacity 1), held by its runs
OVERLAP_LIMIT = "overlap:"

#: the policies whose runs go one at a time
ONE_AT_A_TIME = frozenset(
    {Overlap.BUFFER_ONE, Overlap.BUFFER_ALL, Overlap.CANCEL_OTHER, Overlap.TERMINATE_OTHER}
)


def is_ticker(message: Message) -> bool:
    """Whether ``message`` is an occurrence of a schedule whose runs are messages of
    their own (every overlap policy but ``serial``)."""
    trigger = message.trigger
    return trigger is not None and trigger.overlap is not Overlap.SERIAL


def overlap_limit(ticker: Message) -> str:
    """The concurrency limit (capacity 1) the runs of ``ticker``'s schedule hold."""
    return OVERLAP_LIMIT + ticker.chain


def is_overlap_limit(limit: str) -> bool:
    """Whether ``limit`` is a schedule's own (capacity 1), not a task's."""
    return limit.startswith(OVERLAP_LIMIT)


def last_runs(ticker: Message) -> list[str]:
    """The ids of the last two runs ``ticker``'s schedule enqueued, oldest first."""
    return ticker.headers.get(LAST_RUN, "").split()


def with_last_run(ticker: Message, run_id: str) -> Message:
    """``ticker`` remembering ``run_id`` as the last run its schedule enqueued (and the
    one before it: while that one is stored, the last one waits behind it)."""
    remembered = " ".join([*last_runs(ticker)[-1:], run_id])
    return ticker.model_copy(update={"headers": {**ticker.headers, LAST_RUN: remembered}})


def run_of(builder: MessageBuilder, ticker: Message, due_ms: int, now_ms: int) -> Envelope:
    """The run of the ticker's occurrence: a one-off message of its task and arguments,
    scheduled at the occurrence's time and due at ``due_ms`` (the ticker's due time),
    holding its schedule's one slot when its policy runs them one at a time."""
    assert ticker.trigger is not None
    policy = ticker.trigger.overlap
    if policy in ONE_AT_A_TIME:
        headers = {k: v for k, v in ticker.headers.items() if k != LAST_RUN}
        headers[OVERLAP] = str(policy)
        limited = {"limit": overlap_limit(ticker), "headers": headers}
        ticker = ticker.model_copy(update=limited)
    base = ticker.key if ticker.key is not None else ticker.chain
    at_ms = to_ms(ticker.scheduled_at)
    run_key = f"{base}/run/{at_ms}"
    chain = identity_chain_id(ticker.queue, f"overlap\x00{ticker.chain}\x00{at_ms}")
    kept = max(RUN_KEY_KEPT, 2 * timedelta(seconds=ticker.timeout_s))
    run = builder.one_off(ticker, ticker.scheduled_at, now_ms, "scheduled", chain, run_key, kept)
    return run._replace(due_ms=due_ms)
