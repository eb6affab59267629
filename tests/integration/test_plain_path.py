"""A task that uses no optional feature runs through no optional step: every entry point
of the optional features is replaced by one that raises, and a plain task still runs,
succeeds, retries and is poisoned on every backend; a task that keeps its results trips
the same entry points (so they are live)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App
from tickwork.scheduler.model.retry import RetryPolicy
from tickwork.scheduler.runs import tracing
from tickwork.workers.admission import admission
from tickwork.workers.admission.limits import LimitGate
from tickwork.workers.admission.rates import RateGate
from tickwork.workers.reporting.live import LiveChanges
from tickwork.workers.reporting.metrics import NoMetrics
from tickwork.workers.settling import failure_pause, riders, settler
from tickwork.workers.settling.ledger import RunLedger
from tickwork.workers.settling.plan import Planning
from tickwork.workers.workflows import fanin
from tickwork.workers.workflows.fanin import FanIn
from tickwork.workers.workflows.graph_fanin import GraphFanIn

#: (where, name) of each optional step's entry point
OPTIONAL_STEPS: list[tuple[Any, str]] = [
    (RunLedger, "entry"),  # the occurrence ledger
    (Planning, "next"),  # next occurrences, chain steps, unique windows
    (riders, "succeeded_record"),  # results kept
    (riders, "failed_record"),
    (riders, "member_outcome"),  # batches
    (riders.NextOccurrence, "ride"),  # every rider
    (riders.LedgerRecord, "ride"),
    (riders.ResultRecord, "ride"),
    (riders.BatchMember, "ride"),
    (FanIn, "settle"),
    (fanin, "callback_args"),
    (GraphFanIn, "start_args"),  # graphs
    (GraphFanIn, "succeeded"),
    (GraphFanIn, "failed"),
    (failure_pause, "pause_if_failing"),  # pause_after_failures
    (RateGate, "admit"),  # rate limits
    (LimitGate, "admit"),  # concurrency limits
    (LimitGate, "settled"),
    (NoMetrics, "claimed"),  # metrics
    (NoMetrics, "started"),
    (NoMetrics, "settled"),
    (NoMetrics, "claim_took"),
    (LiveChanges, "started"),  # live changes (told of runs only while a stream listens)
    (LiveChanges, "settled"),
    (tracing, "_span"),  # tracing
]


class StepEntered(AssertionError):
    pass


def _trip_every_optional_step(monkeypatch: pytest.MonkeyPatch, entered: list[str]) -> None:
    for owner, name in OPTIONAL_STEPS:

        def trip(*_args: Any, _name: str = f"{owner.__name__}.{name}", **_kw: Any) -> Any:
            entered.append(_name)
            raise StepEntered(f"an optional step was entered: {_name}")

        monkeypatch.setattr(owner, name, trip)
    assert admission and settler  # the modules whose calls these are


def test_a_plain_task_enters_no_optional_step(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[int] = []

    @app.task(retry=RetryPolicy(retries=1, base_s=0.05, jitter=False))
    def plain(n: int) -> None:
        ran.append(n)
        if n < 0:
            raise ValueError("negative")

    for n in range(20):
        plain.delay(n)
    plain.delay(-1)  # retried once, then poisoned
    entered: list[str] = []
    _trip_every_optional_step(monkeypatch, entered)
    with running(app) as worker:
        wait_for(lambda: len(app.backend.poison.list()) == 1 and len(ran) == 22)
        wait_for(lambda: app.backend.queues.stats("default")[0].pending == 0)
    assert entered == [] and worker.failed is None
    assert sorted(ran) == [-1, -1, *range(20)]


def test_the_same_steps_are_entered_by_a_task_that_uses_a_feature(
    sqlite_app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the test above: it could pass by patching names nobody calls."""

    @sqlite_app.task(keep_result=True)
    def kept() -> int:
        return 1

    kept.delay()
    entered: list[str] = []
    _trip_every_optional_step(monkeypatch, entered)
    with running(sqlite_app) as worker:
        wait_for(lambda: worker.failed is not None)
    assert "NextOccurrence.ride" in entered  # the first rider asked
