"""What follows a poison once it is written: plug-ins told of each poisoned item after its
write landed (a schedule's failure pause, ``failure_pause.py``). A new one is a class in a
module of its own and a line that adds it to ``AFTER_POISON``; the settler reads the list
when it is made."""

from __future__ import annotations

from typing import Protocol

from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.registered import Registered
from tickwork.workers.settling.failure_pause import PauseAfterFailures
from tickwork.workers.settling.plan import Settled


class AfterPoison(Protocol):
    """Told of a poisoned run once its poison was written."""

    def follow(self, item: Settled, app: WorkerApp) -> None: ...


#: the followers of a written poison, in order
AFTER_POISON: Registered[AfterPoison] = Registered(PauseAfterFailures())
