"""The limits roles: concurrency slots (leased, with a waiting line) and rate-limit
starts in a sliding window, both enforced in the backend across every worker."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from tickwork.scheduler.backends.records import RateRequest, SlotRequest, Waiter


class Limits(ABC):
    """Concurrency limits: slots with leases, and the messages waiting for one."""

    @abstractmethod
    def acquire(self, requests: Sequence[SlotRequest]) -> list[int | None]:
        """For each request, in one atomic step per limit: forget holders whose lease ran
        out (backend clock); if the message holds a slot already, or fewer than
        ``capacity`` are held, take (or renew) one for ``lease_ms`` and answer None (the
        message leaves the limit's waiting line, where the backend can do so in the same
        step); else answer when the earliest holder's lease ends (epoch ms), when to look
        again."""

    @abstractmethod
    def wait(self, request: SlotRequest) -> bool:
        """Add the request's message to its limit's waiters (first come, first served;
        once however often it is added). True when a slot is free now: a slot given back
        between a refused ``acquire`` and this call woke nobody, so the caller wakes the
        message itself."""

    @abstractmethod
    def release(self, held: Sequence[tuple[str, str]]) -> list[Waiter]:
        """Give back the slots ``(limit, message_id)`` and, for each one that was held,
        take the longest waiter of that limit off its list: the caller wakes them."""

    @abstractmethod
    def pop_waiters(self, limit: str, count: int) -> list[Waiter]:
        """Take up to ``count`` of the longest waiters of ``limit`` off its line (when a
        waiter handed a slot turned out to be gone or running already)."""

    @abstractmethod
    def extend(self, held: Sequence[tuple[str, str]], lease_ms: int) -> None:
        """Push the lease of each held slot ``(limit, message_id)`` to now + ``lease_ms``."""

    @abstractmethod
    def wake(self, waiters: Sequence[Waiter]) -> list[bool]:
        """Make each waiting message due now; False for one that is gone or running."""

    @abstractmethod
    def usage(self, limits: Sequence[str]) -> dict[str, tuple[int, int]]:
        """For each limit: (slots held under a live lease, messages waiting)."""


class Rates(ABC):
    """Rate limits: starts reserved in a sliding window."""

    @abstractmethod
    def reserve(self, requests: Sequence[RateRequest]) -> list[int | None]:
        """For each request in order, a start of its rate limit: None when it may start now
        (its ``units`` fit under ``starts`` with the units of the last period), else the
        time (ms, backend clock) reserved for it: a period after the unit
        ``starts - units + 1`` places before (each start counts as ``units`` units at its
        time). Starts are recorded for their member: asking again returns the same
        reservation (None once it is due). A request with ``reserve`` False that cannot
        start now is not recorded, and answers the time it would have had. Units older
        than the period are forgotten."""

    @abstractmethod
    def usage(self, limits: Sequence[str], period_ms: int) -> dict[str, tuple[int, int]]:
        """For each rate limit: (starts in the last ``period_ms``, starts reserved ahead)."""
