"""Capacities changed at run time, on the worker's side: the concurrency and rate limits
this worker enforces take the capacity an operator set (``app.limits.set``, stored in the
backend: ``scheduler/limits/capacities.py``) in place of the declared one.

A thread of the worker reads the settings every ``REFRESH_S`` seconds (one read; only in
a worker whose tasks declare a limit). The gates ask ``concurrency`` and ``rate`` per
limited run (a dictionary look-up); the capacities a claim takes slots with (Redis on
one node takes them in the claim) are updated in place, their names never changing, so
the consumer reading them needs no lock. A read that fails keeps the capacities last
read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tickwork.scheduler import BackendError
from tickwork.scheduler.backends import Backend
from tickwork.scheduler.limits.capacities import REFRESH_S, LimitKind, read_settings

log = logging.getLogger("tickwork.worker")


class LiveCapacities:
    """The capacities set at run time, as this worker last read them."""

    def __init__(
        self,
        backend: Backend,
        claim_capacities: dict[str, int],
        widened: Callable[[str, int], None] | None = None,
        declared: dict[str, int] | None = None,
    ) -> None:
        """``claim_capacities``: the concurrency capacities a claim takes slots with
        (name -> the declared capacity), updated in place; ``widened(name, more)``: a
        concurrency limit (of ``declared``: name -> capacity) allows ``more`` at once
        than before (its waiters are woken)."""
        self._backend = backend
        self._widened = widened
        self._claim = claim_capacities
        self._declared_claim = dict(claim_capacities)
        self._declared = declared or {}
        self._set: dict[tuple[LimitKind, str], int] = {}

    def concurrency(self, name: str, declared: int) -> int:
        """The capacity of concurrency limit ``name`` (``declared`` unless set)."""
        return self._set.get(("concurrency", name), declared) if self._set else declared

    def rate(self, name: str, declared: int) -> int:
        """The starts per period of rate limit ``name`` (``declared`` unless set)."""
        return self._set.get(("rate", name), declared) if self._set else declared

    def refresh(self) -> None:
        """Read the settings once (a failed read keeps the last)."""
        try:
            settings = read_settings(self._backend)
        except BackendError as err:
            log.warning("cannot read the limits' capacities (keeping the last): %s", err)
            return
        found = {key: setting.amount for key, setting in settings.items()}
        if found != self._set:
            shown = ", ".join(f"{kind} {name}: {n}" for (kind, name), n in sorted(found.items()))
            log.info("limit capacities set at run time: %s", shown or "none")
        before, self._set = self._set, found
        for name, declared in self._declared_claim.items():
            self._claim[name] = found.get(("concurrency", name), declared)
        if self._widened is None:
            return
        for name, declared in self._declared.items():
            key: tuple[LimitKind, str] = ("concurrency", name)
            more = found.get(key, declared) - before.get(key, declared)
            if more > 0:
                self._widened(name, more)

    def run(self, until: threading.Event) -> None:
        """Refresh every ``REFRESH_S`` seconds until ``until`` is set."""
        while True:
            self.refresh()
            if until.wait(REFRESH_S):
                return
