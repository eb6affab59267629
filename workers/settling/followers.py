"""What follows a settle once it is written: plug-ins told of each acked or poisoned item
after its write landed (a schedule's failure pause, ``failure_pause.py``; a durable
child waking its parent, ``parent_wake.py``). A new one is a class in a module of its own
and a line that adds it to ``AFTER_POISON`` or ``AFTER_ACK``; the settler reads the lists
when it is made. A follower returns True when it made work due now (the consumer then
claims at once instead of finishing its idle wait).

Acks are the hot path: their followers are told only of items that are not plain
(``verdicts.Decider.plain``), in one call per settled batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.registered import Registered
from tickwork.workers.settling.failure_pause import PauseAfterFailures
from tickwork.workers.settling.parent_wake import WakeParents
from tickwork.workers.settling.plan import Settled


class AfterPoison(Protocol):
    """Told of a poisoned run once its poison was written."""

    def follow(self, item: Settled, app: WorkerApp) -> bool | None: ...


class AfterAck(Protocol):
    """Told of the acked runs of a batch (not the plain ones) once their acks landed."""

    def follow_acked(self, items: Sequence[Settled], app: WorkerApp) -> bool: ...


#: the followers of a written poison, in order
AFTER_POISON: Registered[AfterPoison] = Registered(PauseAfterFailures(), WakeParents())

#: the followers of written acks, in order
AFTER_ACK: Registered[AfterAck] = Registered(WakeParents())
