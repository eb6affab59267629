"""What a settled run counts in its workflow, before its ack or poison: a batch member's
outcome in its batch (``workers/workflows/fanin.py``), a graph step's in its graph and in the
fan-ins of the steps after it (``workers/workflows/graph_fanin.py``). A count that cannot be
written (a forced stop) leaves the run unsettled, to be redelivered and counted then."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tickwork.scheduler.backends import Backend, MemberOutcome
from tickwork.scheduler.runs.skip import SKIPPED
from tickwork.workers.intake.holdings import Work
from tickwork.workers.settling.plan import Settled
from tickwork.workers.workflows.fanin import FanIn, member_outcome
from tickwork.workers.workflows.graph_fanin import GraphFanIn


class WorkflowCounts:
    """The batch and graph fan-ins of a worker's settler."""

    def __init__(
        self,
        backend: Backend,
        with_retries: Callable[[Callable[[], Any]], Any],
        nudge: Callable[[], None],
        now_ms: Callable[[], int],
    ) -> None:
        self.batches = FanIn(backend, with_retries, nudge)
        self.graphs = GraphFanIn(backend, with_retries, nudge)
        self._now_ms = now_ms

    def acked(self, acked: list[Settled]) -> list[Settled]:
        """Count the batch members and graph steps among ``acked``: those that may be
        acked now (on a forced stop, the ones left uncounted are not)."""
        members = [(item.work, item.member) for item in acked if item.member is not None]
        unsettled: set[str] = set()
        if members and not self.batches.settle(members):
            unsettled = {work.claim.id for work, _ in members}
        now = self._now_ms()
        for item in acked:
            work = item.work
            if work.message.node is not None and not self.graphs.succeeded(
                work.message,
                work.claim.attempt,
                item.result.value,
                now,
                skipped=item.result.rule == SKIPPED,
            ):
                unsettled.add(work.claim.id)
        if not unsettled:
            return acked
        return [item for item in acked if item.work.claim.id not in unsettled]

    def failed(
        self, work: Work, error: tuple[str, str], member: MemberOutcome | None = None
    ) -> bool:
        """Count ``work``'s failure for good (``error``: type, message) as a batch member
        (``member``, or built now) or a graph step; False if that could not be written."""
        now = self._now_ms()
        outcome = member if member is not None else member_outcome(work, now, error=error)
        if outcome is not None and not self.batches.settle([(work, outcome)]):
            return False
        if work.message.node is None:
            return True
        return self.graphs.failed(work.message, work.claim.attempt, error, now)
