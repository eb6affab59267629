"""What a run's context reaches through (``current_run()``): its progress reports, a
durable run's journal, charges to its rate limit. Built once a worker (the worker's
reports add the live progress notices to ``report``) and shared by its pools."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from tickwork.scheduler.runs.charges import charge_rate
from tickwork.scheduler.runs.context import (
    Charger,
    DurableOpener,
    ProgressReporter,
    RunContext,
    RunInfo,
)
from tickwork.scheduler.runs.durable_opening import open_durable
from tickwork.scheduler.runs.results import report_progress
from tickwork.workers.app_needs import WorkerApp


@dataclass(frozen=True, slots=True)
class RunServices:
    """The services of a run's context: ``report`` writes progress, ``durable`` opens a
    journal, ``charge`` counts rate-limit units."""

    report: ProgressReporter
    durable: DurableOpener
    charge: Charger

    @classmethod
    def of(cls, app: WorkerApp, report: ProgressReporter | None = None) -> RunServices:
        """``app``'s services; ``report`` in place of writing progress to its results."""
        return cls(
            report or partial(report_progress, app),
            partial(open_durable, app, lambda: app.builder.clock.now_ms()),
            partial(charge_rate, app),
        )

    def context(self, info: RunInfo) -> RunContext:
        """A new run's context (one a run)."""
        return RunContext(info, self.report, self.durable, self.charge)
