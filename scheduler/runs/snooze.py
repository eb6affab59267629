"""What a handler returns to run its message again later without a failed attempt.

``return Snooze(60)`` (or ``Snooze(timedelta(minutes=1))``): the message is given back,
due again that much later, its attempt not counted, as Oban's ``{:snooze, seconds}``
does: for work that is not ready yet (an export still being built, a partner's API
asking to come back). The run is recorded as ``snoozed`` in the ledger and the metrics;
a chain, batch or graph waits on the message as it was.
"""

from __future__ import annotations

import math
from datetime import timedelta

#: the longest snooze: a message snoozed further is a schedule, not a snooze
MOST_S = 366 * 24 * 3600.0


class Snooze:
    """Return it from a handler: run the message again in ``delay`` (seconds, or a
    ``timedelta``), not counted as a failed attempt. A delay that is not a positive
    number of seconds (at most a year) raises ``ValueError`` where it is made, which fails
    the run like any error."""

    __slots__ = ("delay_s",)

    def __init__(self, delay: float | timedelta) -> None:
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
        if not (math.isfinite(seconds) and 0 < seconds <= MOST_S):
            raise ValueError(f"a snooze must be a positive delay of at most a year, not {delay!r}")
        self.delay_s = seconds

    def __repr__(self) -> str:
        return f"Snooze({self.delay_s:g})"


class Retry(Exception):
    """Raise it in a handler to run the message again after ``delay`` (seconds, or a
    ``timedelta``): for example the ``Retry-After`` of a 429. By default the attempt is not
    counted against the task's ``retries`` (a snooze with a reason); with ``counts=True`` it
    is a failed attempt retried after ``delay`` instead of the policy's backoff, and
    poisoned once the retries are used."""

    def __init__(self, delay: float | timedelta, *, counts: bool = False, reason: str = "") -> None:
        self.delay_s = Snooze(delay).delay_s  # the same bounds as a snooze
        self.counts = counts
        self.reason = reason
        super().__init__(reason or f"retry in {self.delay_s:g} s")
