"""A durable run's child wakes its parent once it ended: a child (``spawn``) carries its
parent's queue and run id in the ``tickwork-parent`` header; once the child's ack or its
poison is written, its worker makes the parent due now (``Limits.wake``, as an event
wakes a wait), so a parent waiting in ``gather`` looks at its children at once instead of
at its next look (0.5 s to 30 s later). A parent that is running, or no longer stored,
is not woken: it looks again on its own (a child that ended while its parent was still
deciding to wait is seen at that next look).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from tickwork.scheduler import BackendError
from tickwork.scheduler.backends import Waiter
from tickwork.scheduler.model.headers import PARENT
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.settling.plan import Settled

log = logging.getLogger("tickwork.worker")


def parent_of(item: Settled) -> Waiter | None:
    """The parent run ``item``'s message names, as a waiter to wake (None: no parent)."""
    header = item.work.message.headers.get(PARENT)
    if header is None:
        return None
    try:
        queue, run_id = json.loads(header)
    except ValueError:
        log.warning("message %s has an unreadable %s header", item.work.message.id, PARENT)
        return None
    return Waiter("", str(queue), None, str(run_id))


class WakeParents:
    """Follows written acks and poisons (``followers.py``): wakes the parents they name."""

    def follow(self, item: Settled, app: WorkerApp) -> bool:
        return self.follow_acked([item], app)

    def follow_acked(self, items: Sequence[Settled], app: WorkerApp) -> bool:
        """Wake the parent of each of ``items`` that has one; True if one was woken."""
        parents = [parent for item in items if (parent := parent_of(item)) is not None]
        if not parents:
            return False
        try:
            woken = app.backend.limits.wake(parents)
        except BackendError as err:  # each parent looks again on its own
            log.warning("cannot wake %d durable parent run(s): %s", len(parents), err)
            return False
        return any(woken)
