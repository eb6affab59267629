"""The kill loop the crash tests share: worker processes two at a time, the older one
SIGKILLed each round once the test's condition for that round holds. A test whose task
bodies pass the gate (``tests.support.gate``) has the loop open it round by round, so
each kill lands while work still runs, however fast the workers are."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from functools import partial
from pathlib import Path

from tests.support.gate import open_gate
from tests.support.helpers import start_record_worker, stop_workers, wait_until
from tickwork.scheduler import App


class KillLoop:
    """Workers of ``module`` (logs in ``logs``) started and killed in rounds; ``killed``
    holds the pids of the workers it killed."""

    def __init__(self, env: dict[str, str], logs: Path, module: str) -> None:
        self._gate = logs / "gate"
        self._env = {**env, "TICKWORK_TEST_GATE": str(self._gate)}
        self._logs, self._module = logs, module
        self.workers: list[subprocess.Popen[bytes]] = []
        self.killed: set[int] = set()

    def rounds(
        self,
        count: int,
        reached: Callable[[int], bool],
        opens: Callable[[int], int] | None = None,
    ) -> None:
        """``count`` rounds: two workers running, then, once ``reached(round)``, the
        older one SIGKILLed mid-run. With ``opens``, the gate lets ``opens(round)``
        recorded runs through in all by that round, and holds the rest back."""
        for round_ in range(count):
            if opens is not None:
                open_gate(self._gate, opens(round_))
            while len(self.workers) < 2:
                log = self._logs / f"worker-{round_}-{len(self.workers)}.log"
                self.workers.append(start_record_worker(self._env, log, self._module))
            assert wait_until(partial(reached, round_), 120), f"stalled in round {round_}"
            victim = self.workers.pop(0)
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            self.killed.add(victim.pid)

    def start_last(self) -> None:
        """One more worker, to finish what the killed ones left (the gate open)."""
        open_gate(self._gate, None)
        self.workers.append(start_record_worker(self._env, self._logs / "last.log", self._module))

    def stop(self) -> None:
        """Stop the workers still running (gracefully)."""
        stop_workers(self.workers)


def share(total: int, parts: int, round_: int) -> int:
    """How many of ``total`` runs the gate lets through by ``round_``: ``round_ + 1`` of
    ``parts`` (``partial(share, N, parts)`` is a loop's ``opens``)."""
    return (round_ + 1) * total // parts


def idle(app: App) -> bool:
    """Whether no queue holds a message still to run: ready, scheduled or in flight."""
    stats = app.backend.queues.stats()
    return all(s.ready + s.scheduled + s.in_flight == 0 for s in stats)
