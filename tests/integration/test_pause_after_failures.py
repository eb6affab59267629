"""``pause_after_failures`` on every backend: a schedule whose last N occurrences failed
for good is paused, with why in its action log; a success between failures starts the
count again."""

from __future__ import annotations

import threading
from datetime import timedelta

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, RetryPolicy
from tickwork.triggers import Repeating
from tickwork.workers.settling.failure_pause import ACTOR


def _paused(app: App, key: str) -> bool:
    found = app.get(key=key)
    return found is not None and found.message.paused_at is not None


def test_a_schedule_failing_again_and_again_is_paused(app: App) -> None:
    runs: list[int] = []
    lock = threading.Lock()

    @app.task(retry=RetryPolicy(retries=0))
    def sync() -> None:
        with lock:
            runs.append(1)
            count = len(runs)
        if count != 2:  # the second occurrence succeeds: the count starts again after it
            raise ConnectionError("the partner is down")

    trigger = Repeating(interval=timedelta(milliseconds=200), pause_after_failures=3)
    assert "paused after 3 failures in a row" in trigger.describe()
    sync.schedule(trigger=trigger, key="sync")
    with running(app):
        wait_for(lambda: _paused(app, "sync"), timeout_s=40)
    # fail, succeed, then three failures in a row (a sixth occurrence a worker had
    # claimed ahead of its time when the pause came still runs, as with any pause)
    assert 5 <= len(runs) <= 6
    (pause,) = app.schedules.actions("sync")
    assert (pause.action, pause.actor) == ("pause", ACTOR)
    assert "3 occurrences in a row failed" in (pause.note or "")
