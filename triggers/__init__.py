"""Triggers: when a message runs. Pure time arithmetic, no I/O, nothing of ours imported."""

from typing import Annotated

from pydantic import Field

from triggers.base import Misfire, Overlap, Trigger
from triggers.calendars import Exclusions
from triggers.cron import Cron
from triggers.once import RunOnce
from triggers.preview import Occurrence, preview
from triggers.repeating import Repeating

#: A trigger as stored in a message: pydantic picks the class from ``kind``.
AnyTrigger = Annotated[RunOnce | Repeating | Cron, Field(discriminator="kind")]

__all__ = [
    "AnyTrigger",
    "Cron",
    "Exclusions",
    "Misfire",
    "Occurrence",
    "Overlap",
    "Repeating",
    "RunOnce",
    "Trigger",
    "preview",
]
