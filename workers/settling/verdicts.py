"""The settler's decision: from finished runs to a plan of writes, writing nothing.

Each run is settled by the first outcome (``outcomes.py``) that claims it, among those
its handler's verdict may reach; each rider (``riders.py``) then adds its write to the
item (next occurrence, ledger entry, result record, batch member). Each planned item
carries everything its write needs, so ``workers/settling/settler.py`` only writes, in
its order.

A plain message (``Decider.plain``: a one-off without key, steps, batch, schedule or
durable parent of its own, of a task that keeps no results and no history) is asked of no
rider, and the followers of acks are not told of it: no next occurrence is looked for, no
ledger entry, result record or batch outcome is built.
"""

from __future__ import annotations

from tickwork.scheduler.model.headers import PARENT, SCHEDULE
from tickwork.scheduler.model.message import Message
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.intake.holdings import Work
from tickwork.workers.pools.execution import HandlerResult, Verdict
from tickwork.workers.settling.ledger import RunLedger
from tickwork.workers.settling.outcomes import OUTCOMES, Outcome
from tickwork.workers.settling.plan import Plan, Planning
from tickwork.workers.settling.riders import RIDERS


class Decider:
    """Plans the settling of finished runs for an app (its tasks' options, its builder),
    with the outcomes and riders registered when it was made."""

    def __init__(self, app: WorkerApp) -> None:
        self._app = app
        self._planning = Planning(app)
        outcomes = list(OUTCOMES)
        #: verdict -> the outcomes that may claim it, in order
        self._outcomes: dict[Verdict, tuple[Outcome, ...]] = {
            verdict: tuple(o for o in outcomes if verdict in o.verdicts) for verdict in Verdict
        }
        self._riders = tuple(RIDERS)
        self._plain_tasks: dict[str, bool] = {}  # task name -> it keeps no results or history

    def plain(self, message: Message) -> bool:
        """Whether ``message`` uses no optional feature: settling it is an ack, a retry
        or a poison and nothing else."""
        if (
            message.trigger is not None
            or message.key is not None
            or message.then
            or message.member is not None
            or message.callback is not None
            or message.node is not None
            or (message.headers and (SCHEDULE in message.headers or PARENT in message.headers))
        ):
            return False
        plain = self._plain_tasks.get(message.task)
        if plain is None:
            task = self._app.registry.tasks.get(message.task)
            plain = task is not None and (
                task.options.result_retention is None and not task.options.history
            )
            self._plain_tasks[message.task] = plain
        return plain

    @property
    def ledger(self) -> RunLedger:
        return self._planning.ledger

    def plan(self, batch: list[tuple[Work, HandlerResult]], now: int) -> Plan:
        plan = Plan()
        planning = self._planning
        outcomes = self._outcomes
        for work, result in batch:
            for outcome in outcomes[result.verdict]:
                item = outcome.settled(work, result, now, planning)
                if item is not None:
                    break
            else:
                raise AssertionError(f"no outcome settles a run of verdict {result.verdict}")
            if not self.plain(work.message):
                for rider in self._riders:
                    rider.ride(item, now, planning)
                plan.followed.append(item)
            plan.add(item)
        return plan
