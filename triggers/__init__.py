"""Triggers: when a message runs. Pure time arithmetic, no I/O, nothing of ours imported."""

from typing import Annotated

from pydantic import Field

from triggers.base import Misfire, Overlap, Trigger
from triggers.calendars import Exclusions, Window
from triggers.cron import Cron
from triggers.once import RunOnce
from triggers.preview import Occurrence, preview
from triggers.repeating import Repeating
from triggers.specs import Specs

#: A trigger as stored in a message: pydantic picks the class from ``kind``.
AnyTrigger = Annotated[RunOnce | Repeating | Cron | Specs, Field(discriminator="kind")]

__all__ = [
    "AnyTrigger",
    "Cron",
    "Exclusions",
    "Misfire",
    "Occurrence",
    "Overlap",
    "Repeating",
    "RunOnce",
    "Specs",
    "Trigger",
    "Window",
    "preview",
]
