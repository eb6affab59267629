"""Every backend the contract suite runs against, and how to get a fresh one.

SQLite runs on a ``ManualClock`` (tests move time instantly). Server backends use the
server's clock, so ``advance`` sleeps for real there; tests are written to work either way.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from scheduler import Backend, ManualClock, open_backend

BACKEND_NAMES = ["sqlite"]


@dataclass
class BackendHarness:
    name: str
    url: str
    backend: Backend
    clock: ManualClock | None

    def advance(self, ms: int) -> None:
        """Let ``ms`` milliseconds of backend time pass."""
        if self.clock is not None:
            self.clock.advance(ms)
        else:
            time.sleep(ms / 1000)

    def now_ms(self) -> int:
        return self.backend.now_ms()

    def reopen(self) -> Backend:
        """A second, independent client of the same storage."""
        return open_backend(self.url, clock=self.clock)


@contextmanager
def make_harness(name: str, tmp_path: Path) -> Iterator[BackendHarness]:
    if name == "sqlite":
        clock = ManualClock()
        url = f"sqlite:///{tmp_path / 'contract.db'}"
        backend = open_backend(url, clock=clock)
        try:
            yield BackendHarness(name, url, backend, clock)
        finally:
            backend.close()
        return
    raise ValueError(f"unknown backend {name!r}")
