"""Units a run charges to its rate limit after the fact (``current_run().charge(n)``):
the tokens a model's answer took, beyond the call's ``cost=``. Each charge is a start of
that many units reserved in the limit's window (in pieces of at most the limit's count),
at its next room: it counts from then on, so the limit's later starts wait for the
budget; a charge never waits itself."""

from __future__ import annotations

import secrets
from typing import Protocol

from tickwork.scheduler.backends import Backend, RateRequest
from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.model.registry import TaskRegistry
from tickwork.scheduler.runs.context import RunInfo


class ChargeSink(Protocol):
    """What a charge needs of the app: its tasks (for the rate) and its backend."""

    @property
    def registry(self) -> TaskRegistry: ...

    @property
    def backend(self) -> Backend: ...


def charge_rate(app: ChargeSink, info: RunInfo, units: int) -> None:
    """Reserve ``units`` of the rate limit of the run ``info`` (its ``rate`` key)."""
    task = app.registry.tasks.get(info.task)
    rate = task.options.rate_limit if task is not None else None
    if rate is None or info.rate is None:
        raise InvalidMessage(f"task {info.task!r} has no rate_limit or throttle to charge units to")
    member = f"{info.message_id}:{info.attempt}:charge:{secrets.token_hex(4)}"
    pieces: list[RateRequest] = []
    while units > 0:
        piece = min(units, rate.count)
        pieces.append(
            RateRequest(info.rate, rate.count, rate.period_ms, f"{member}:{len(pieces)}", piece)
        )
        units -= piece
    app.backend.rates.reserve(pieces)
