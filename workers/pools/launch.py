"""Starting admitted work: what the run takes (a batch's outcome, a graph step's parents'
results), its ``RunInfo`` (time limits, trace parent, lateness), the ``before_run`` hooks,
then the pool. Work whose workflow cannot be read yet goes back (due again) or waits
(a graph step held for its parents); one whose workflow can never run is poisoned, and a
graph step whose condition says no is settled as skipped without running."""

from __future__ import annotations

import logging

from tickwork.scheduler import BackendError, TickworkError
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.hooks import notify
from tickwork.scheduler.runs.context import RunInfo
from tickwork.scheduler.runs.skip import SKIPPED
from tickwork.scheduler.runs.tracing import TRACEPARENT
from tickwork.workers.context import WorkerContext
from tickwork.workers.intake.holdings import Work, log_fields
from tickwork.workers.pools.execution import HandlerResult, Verdict
from tickwork.workers.pools.pool import HandlerPool
from tickwork.workers.pools.time_limits import limits_of
from tickwork.workers.settling.settler import Settler
from tickwork.workers.workflows.fanin import run_args, value_needed
from tickwork.workers.workflows.graph_fanin import Held, SkipStep

log = logging.getLogger("tickwork.worker")


class Launcher:
    """Hands admitted work to the pool (set by the worker once it has started it)."""

    def __init__(self, context: WorkerContext, settler: Settler) -> None:
        self._context = context
        self._settler = settler
        self._metrics = context.counting  # None: nothing counts, no call per run
        self.pool: HandlerPool[Work] | None = None

    def start(self, work: Work) -> None:
        """Start ``work``'s handler (its caller's thread: the consumer's or the timer's)."""
        pool = self.pool
        assert pool is not None
        context = self._context
        message = work.message
        try:  # a batch's outcome or a graph step's parents' results first, if it takes them
            args = run_args(context.backend, self._settler.counts.graphs, message)
        except Held:
            self._settler.hold(work)
            return
        except SkipStep as skip:  # its condition said no: done without running
            why = f"condition {skip} said no"
            self._settler.finished(work, HandlerResult(Verdict.ACK, "Skip", why, rule=SKIPPED))
            return
        except BackendError as err:
            log.warning("cannot read the workflow of %s (due again): %s", message.id, err)
            self._settler.release([work])
            return
        except TickworkError as err:
            self._settler.finished(
                work, HandlerResult(Verdict.POISON, type(err).__name__, str(err))
            )
            return
        work.started_ms = context.now_ms()
        if self._metrics is not None:
            self._metrics.started(work)
        if log.isEnabledFor(logging.DEBUG):  # a line per run: at debug, off by default
            log.debug(
                "fire %s id=%s scheduled=%s actual=%s late=%dms attempt=%d",
                message.task,
                message.id,
                message.scheduled_at.isoformat(timespec="milliseconds"),
                to_datetime(work.started_ms).isoformat(timespec="milliseconds"),
                work.lateness_ms,
                work.claim.attempt,
                extra=log_fields(work),
            )
        time_limit_s, soft_limit_s = limits_of(
            context.app, message.task, context.config.time_limit_s
        )
        info = RunInfo(
            message.id,
            message.task,
            message.queue,
            message.key,
            work.claim.attempt,
            # a chain's next step or a batch's callbacks take what the handler returns
            value_needed(message),
            message.headers.get(TRACEPARENT),
            work.lateness_ms,
            time_limit_s,
            soft_limit_s,
            message.rate,
        )
        work.info = info
        hooks = context.hooks
        if hooks.before_run:
            notify(hooks.before_run, info)
        pool.submit(work, message.task, args, message.kwargs, info)
