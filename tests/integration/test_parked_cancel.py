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

    def parked() -> bool:  # all three claimed into the timer: none is waiting in storage
        return sum(stats.scheduled + stats.ready for stats in app.queues.stats()) == 0

    with running(app, lookahead_ms=40_000):
        # the cancel must come before the due time: a machine too slow to park three
        # messages and cancel one well before it tries again with twice the margin (a
        # cancel after the due time may find the message running, which it lets finish)
        for margin_s in (4, 8, 16):
            due = datetime.now(UTC) + timedelta(seconds=margin_s)
            doomed = remind.schedule(args=(f"doomed-{margin_s}",), at=due)
            remind.schedule(args=(f"kept-{margin_s}",), at=due)
            sentinel = f"sentinel-{margin_s}"
            remind.schedule(args=(sentinel,), at=due + timedelta(milliseconds=500))
            wait_for(parked, timeout_s=30)
            cancelled = app.cancel(id=doomed)
            in_time = datetime.now(UTC) < due - timedelta(milliseconds=200)
            wait_for(lambda sentinel=sentinel: sentinel in ran, timeout_s=60)  # type: ignore[misc]
            if in_time:
                assert cancelled, "a cancel of a parked message found nothing"
                break
        else:
            raise AssertionError("never parked and cancelled before the due time")
    assert f"doomed-{margin_s}" not in ran
    assert {f"kept-{margin_s}", sentinel} <= set(ran)
    assert app.get(id=doomed) is None
