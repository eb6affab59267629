"""What the producer API reports back, and how it reads its ``on_conflict`` argument."""

from __future__ import annotations

from dataclasses import dataclass, field

from tickwork.scheduler.backends import OnConflict, Outcome
from tickwork.scheduler.errors import InvalidMessage


@dataclass
class EnqueueReport:
    """What ``enqueue_many`` did: ids in input order, a count per outcome, and how long it
    waited for room in bounded queues."""

    ids: list[str] = field(default_factory=list)
    outcomes: dict[Outcome, int] = field(default_factory=dict)
    waited_s: float = 0.0

    @property
    def enqueued(self) -> int:
        return self.outcomes.get(Outcome.ENQUEUED, 0) + self.outcomes.get(Outcome.REPLACED, 0)

    @property
    def skipped(self) -> int:
        return self.outcomes.get(Outcome.IGNORED, 0) + self.outcomes.get(Outcome.DUPLICATE, 0)

    def __repr__(self) -> str:
        """The counts, and the first ids only (a bulk enqueue may hold millions)."""
        shown = ", ".join(self.ids[:3]) + (
            f", ... ({len(self.ids)} ids)" if len(self.ids) > 3 else ""
        )
        counts = ", ".join(f"{outcome.value} {n}" for outcome, n in self.outcomes.items())
        return f"EnqueueReport(ids=[{shown}], {counts or 'nothing'}, waited {self.waited_s:.3f} s)"


def conflict_mode(value: str | OnConflict) -> OnConflict:
    """``on_conflict`` as given by a caller, or ``InvalidMessage``."""
    try:
        return OnConflict(value)
    except ValueError:
        raise InvalidMessage(
            f"on_conflict must be 'error', 'ignore' or 'replace', not {value!r}"
        ) from None
