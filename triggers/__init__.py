"""Triggers: when a message runs. Pure time arithmetic, no I/O, nothing of ours imported."""

from typing import Annotated

from pydantic import Field

from tickwork.triggers.base import Misfire, Overlap, Trigger
from tickwork.triggers.calendars import Exclusions, Window
from tickwork.triggers.cron import Cron
from tickwork.triggers.once import RunOnce
from tickwork.triggers.preview import Occurrence, preview
from tickwork.triggers.repeating import Repeating
from tickwork.triggers.specs import Specs

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
