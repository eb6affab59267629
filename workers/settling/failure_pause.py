"""``pause_after_failures=N`` on a schedule's trigger: after an occurrence fails for good,
the worker reads the schedule's history and, when its last N occurrences that ran all
failed for good (poisoned), pauses it, recording in its action log why (actor
``tickwork``). A success between failures starts the count again; retries are attempts,
not occurrences, and occurrences that did not run (missed, skipped...) do not count. The
count comes from the ledger: with the ledger off (``history_keep=0``) nothing pauses."""

from __future__ import annotations

import logging

from tickwork.scheduler import TickworkError
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.schedules.ledger import RunOutcome
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.settling.plan import Settled

log = logging.getLogger("tickwork.worker")

#: the outcomes that end an occurrence that ran
_ENDS = frozenset({RunOutcome.SUCCEEDED, RunOutcome.POISONED, RunOutcome.ABORTED})

#: who pauses, in the action log
ACTOR = "tickwork"


def pause_if_failing(app: WorkerApp, message: Message) -> bool:
    """Pause ``message``'s schedule (which just failed for good) if its last occurrences
    all failed, as many as its trigger's ``pause_after_failures``; True if paused."""
    trigger, key = message.trigger, message.key
    if trigger is None or key is None or trigger.pause_after_failures is None:
        return False
    needed = trigger.pause_after_failures
    try:
        history = app.schedules.history(key, queue=message.queue)
    except TickworkError as err:
        log.warning("cannot read the history of %s to count its failures: %s", key, err)
        return False
    ended = [entry.outcome for entry in history if entry.outcome in _ENDS]
    streak = 0
    for outcome in ended:
        if outcome is not RunOutcome.POISONED:
            break
        streak += 1
    if streak < needed:
        return False
    note = f"paused after {streak} occurrences in a row failed (pause_after_failures={needed})"
    try:
        paused = app.schedules.pause(key, queue=message.queue, note=note, actor=ACTOR)
    except TickworkError as err:  # its next occurrence runs already, or it is gone
        log.warning("cannot pause %s after %d failures: %s", key, streak, err)
        return False
    if paused:
        log.warning("schedule %s is paused: %s", key, note)
    return paused


class PauseAfterFailures:
    """Follows a written poison (``followers.AFTER_POISON``): a schedule whose trigger sets
    ``pause_after_failures`` is paused when its last occurrences all failed."""

    def follow(self, item: Settled, app: WorkerApp) -> None:
        message = item.work.message
        if message.trigger is not None and message.trigger.pause_after_failures is not None:
            pause_if_failing(app, message)
