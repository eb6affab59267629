"""What a workflow is, before it is stored: a group of calls, a batch (a group with
callbacks), a chain with a group or a batch in it. Plain data, checked and stored by
``scheduler.workflows.batches`` (a flat group or batch) and
``scheduler.workflows.graphs`` (one that nests)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.model.tasks import Call

#: when a batch's callback runs: every member succeeded, all settled, or one failed
When = Literal["success", "complete", "failure"]


@dataclass(frozen=True, slots=True)
class Group:
    """Calls that run independently (in parallel on as many workers as there are) and
    settle together: enqueue it alone, or give it to ``batch`` for callbacks."""

    calls: tuple[Call | Sequenced, ...]


@dataclass(frozen=True, slots=True)
class Batch:
    """A group with callbacks (see ``batch``)."""

    members: tuple[Call | Sequenced, ...]
    callbacks: dict[When, Call | Group | Sequenced] = field(default_factory=dict)
    retention: timedelta | None = None


def group(calls: Iterable[Call | Sequenced]) -> Group:
    """The calls, as one group (at least one). A member that is a chain makes the group
    run as a graph (``scheduler.workflows.graphs``)."""
    found = tuple(calls)
    if not found:
        raise InvalidMessage("a group needs at least one call")
    return Group(found)


def batch(
    members: Group | Iterable[Call | Sequenced],
    *,
    on_success: Call | Group | Sequenced | None = None,
    on_complete: Call | Group | Sequenced | None = None,
    on_failure: Call | Group | Sequenced | None = None,
    retention: timedelta | None = None,
) -> Batch:
    """A group whose callbacks fire once, when its last member settles: ``on_success`` if
    every member succeeded, ``on_failure`` if one failed for good (poisoned or aborted),
    ``on_complete`` either way. A callback made with ``task.s()`` takes the outcome as its
    first argument (``on_success``: the members' results in order; the others: a
    ``BatchOutcome`` dict), one made with ``task.si()`` does not. ``retention``: how long
    the batch's records are kept after its last member's due time (default: the
    ``batch_retention_s`` setting, 7 days); it must outlast the batch. A member that is
    a chain, or a callback that is a group or a chain with a group in it, makes the
    batch run as a graph (``scheduler.workflows.graphs``)."""
    calls = members.calls if isinstance(members, Group) else group(members).calls
    callbacks: dict[When, Call | Group | Sequenced] = {}
    if on_success is not None:
        callbacks["success"] = on_success
    if on_complete is not None:
        callbacks["complete"] = on_complete
    if on_failure is not None:
        callbacks["failure"] = on_failure
    return Batch(calls, callbacks, retention)


@dataclass(frozen=True, slots=True)
class Sequenced:
    """A chain whose steps are not all plain calls (``chain`` with a group or a batch in
    it): enqueued as the graph ``scheduler.workflows.graphs.compile_spec`` makes of it."""

    parts: tuple[Call | Group | Batch | Sequenced, ...]
