"""A message cancelled after the worker claimed it into its timer (within the lookahead,
before its due time) never runs (issue 54): the timer checks a parked claim's lease
before it starts it. On every backend; a sentinel due after it proves the worker went
past its time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App


def test_a_message_cancelled_while_parked_in_the_timer_never_runs(app: App) -> None:
    ran: list[str] = []

    @app.task
    def remind(name: str) -> None:
        ran.append(name)

    due = datetime.now(UTC) + timedelta(seconds=4)
    doomed = remind.schedule(args=("doomed",), at=due)
    remind.schedule(args=("kept",), at=due)
    remind.schedule(args=("sentinel",), at=due + timedelta(milliseconds=500))

    def parked() -> bool:  # all three claimed into the timer: none is waiting in storage
        return sum(stats.scheduled + stats.ready for stats in app.queues.stats()) == 0

    with running(app, lookahead_ms=10_000):
        wait_for(parked, timeout_s=30)
        assert app.cancel(id=doomed) is True
        wait_for(lambda: "sentinel" in ran, timeout_s=30)
    assert sorted(ran) == ["kept", "sentinel"]
    assert app.get(id=doomed) is None
