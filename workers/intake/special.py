"""Claimed messages that are not runs of their task, settled at intake: plug-ins the
consumer asks, in order, about each claim it decoded. A unique window that came due
frees its key; a scheduled graph's occurrence starts a run of the graph; an occurrence
of a schedule whose runs are messages of their own (an overlap policy but ``serial``)
enqueues its run. A new kind is a class in a module of its own and a line adding it to
``SPECIAL_MESSAGES``; the consumer reads the list when it is made. A special message
carries a trigger or a header: a message with neither is asked of no kind (the fast
path of a plain message).

A special message whose ``needs_task`` is set is taken only by a worker that knows its
task: elsewhere it goes on to admission, which gives it back for a worker that does
(``workers/admission/unknown_tasks.py``)."""

from __future__ import annotations

from typing import Protocol

from tickwork.scheduler.backends import Claim
from tickwork.scheduler.model.message import Message, is_unique_window
from tickwork.scheduler.schedules.overlap import is_ticker
from tickwork.scheduler.workflows.graph_schedules import is_graph_schedule
from tickwork.workers.registered import Registered
from tickwork.workers.settling.settler import Settler


class SpecialMessage(Protocol):
    """A kind of claimed message settled at intake rather than run."""

    #: taken only where its task is registered (else admission decides)
    needs_task: bool

    def matches(self, message: Message) -> bool:
        """Whether ``message`` is of this kind."""
        ...

    def take(self, claim: Claim, message: Message, settler: Settler) -> None:
        """Settle ``claim`` (its permit is given back by what settles it)."""
        ...


class UniqueWindowEnd:
    """A ``unique_for`` window came due: its key is free again; nothing runs."""

    needs_task = False

    def matches(self, message: Message) -> bool:
        return is_unique_window(message)

    def take(self, claim: Claim, message: Message, settler: Settler) -> None:
        settler.close_window(claim)


class GraphOccurrence:
    """A scheduled graph's occurrence: it starts a run of the graph."""

    needs_task = False

    def matches(self, message: Message) -> bool:
        return is_graph_schedule(message)

    def take(self, claim: Claim, message: Message, settler: Settler) -> None:
        settler.tickers.start_graph(claim, message)


class OverlapTicker:
    """An occurrence of a schedule whose runs are messages of their own (``overlap``
    other than ``serial``): it enqueues its run as its policy says."""

    needs_task = True

    def matches(self, message: Message) -> bool:
        return is_ticker(message)

    def take(self, claim: Claim, message: Message, settler: Settler) -> None:
        settler.tickers.fire(claim, message)


def may_be_special(message: Message) -> bool:
    """Whether any kind may claim ``message``: a special message carries a trigger or a
    header, so one with neither (a plain run) is asked of no kind."""
    return message.trigger is not None or bool(message.headers)


#: the kinds of special message, asked in order
SPECIAL_MESSAGES: Registered[SpecialMessage] = Registered(
    UniqueWindowEnd(), GraphOccurrence(), OverlapTicker()
)
