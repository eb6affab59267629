"""Preview: the next fire times of a trigger, each with the wall time it runs at and a note
when a daylight-saving change moved, repeated or dropped a wall time.

Pure, like every trigger: the caller passes the instant to start after. Notes follow the
schedule's DST policy (``triggers.cron``): a wall time in a gap either runs at the first
instant after it ("shifted") or is dropped (listed on the next fire as "skipped"); a wall
time that occurs twice runs on one pass ("first pass; the second is not run", "second
pass; the first is not run") or on both ("first pass", "second pass"). By default a
fixed-time schedule shifts and runs the first pass, an interval schedule skips and runs
both.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple
from zoneinfo import ZoneInfo

from croniter import croniter

from tickwork.triggers.base import Fire, Trigger, require_aware
from tickwork.triggers.cron import Cron, rule_matches

#: the most occurrences one preview computes
MAX_PREVIEW = 1000


class Occurrence(NamedTuple):
    """One planned fire: the instant (UTC), the wall time in the trigger's zone, its number
    in the chain, and a note when a DST change touched it (else None)."""

    at: datetime
    wall: datetime
    occurrence: int
    note: str | None = None


def preview(trigger: Trigger, count: int, after: datetime) -> list[Occurrence]:
    """The next ``count`` grid fire times strictly after ``after`` (at most
    ``MAX_PREVIEW``), ignoring misfires: what the schedule will do if workers keep up. A
    trigger relative to "now" (a ``delay``, a ``Repeating`` without ``start``) is anchored
    at ``after``. Occurrences on excluded dates are listed too, noted "not run: ..."
    (they do not count towards ``count``)."""
    if not 1 <= count <= MAX_PREVIEW:
        raise ValueError(f"count must be between 1 and {MAX_PREVIEW}")
    after = require_aware(after, "after")
    anchored = trigger.anchored(after)
    zone = ZoneInfo(trigger.zone)
    fires: list[tuple[Fire, str | None]] = []  # and why it is excluded
    # the grid within the calendar's time windows (outside them is no occurrence at all)
    fire = anchored._in_window(anchored._candidate(after))
    while fire is not None and fire.at <= after:
        fire = anchored._grid_after(fire.at, fire.occurrence)
    runs = 0
    while fire is not None and runs < count and len(fires) < MAX_PREVIEW:
        if anchored.end is not None and fire.at > anchored.end:
            break
        excluded = anchored.excluded(fire)
        fires.append((fire, excluded))
        runs += excluded is None
        fire = anchored._grid_after(fire.at, fire.occurrence) if anchored.recurring else None
    occurrences = []
    previous = after
    for fire, excluded in fires:
        note = _dst_note(trigger, previous, fire.at) if isinstance(trigger, Cron) else None
        if excluded is not None:
            note = f"not run: {excluded}" + (f"; {note}" if note else "")
        occurrences.append(Occurrence(fire.at, fire.at.astimezone(zone), fire.occurrence, note))
        previous = fire.at
    return occurrences


def _dst_note(cron: Cron, previous: datetime, at: datetime) -> str | None:
    """What a DST change did to the fire at ``at`` (the previous fire was ``previous``)."""
    zone = ZoneInfo(cron.tz)
    expr, seconds_first, _, _ = cron._parsed
    wall = at.astimezone(zone)
    naive = wall.replace(tzinfo=None)
    notes = []
    skipped = _skipped_walls(cron, previous, at) if cron.gap_policy == "skip" else []
    if skipped:
        shown = ", ".join(w.strftime("%H:%M:%S" if seconds_first else "%H:%M") for w in skipped)
        notes.append(f"skipped {shown} (not on the clock: it goes forward)")
    if not croniter.match(expr, naive, second_at_beginning=seconds_first):
        notes.append("shifted: the scheduled wall time does not exist today (clock goes forward)")
    other = wall.replace(fold=1 - wall.fold)
    if other.utcoffset() != wall.utcoffset():
        which, other_pass = ("first", "second") if wall.fold == 0 else ("second", "first")
        if cron.repeat_policy == "both":
            notes.append(f"repeated wall time (clock goes back): {which} pass")
        else:
            notes.append(
                f"repeated wall time (clock goes back): {which} pass; the {other_pass} is not run"
            )
    return "; ".join(notes) or None


def _skipped_walls(cron: Cron, previous: datetime, at: datetime) -> list[datetime]:
    """Wall times the expression names between two fires that do not exist (a gap)."""
    zone = ZoneInfo(cron.tz)
    expr, seconds_first, _, rule = cron._parsed
    start = previous.astimezone(zone).replace(tzinfo=None)
    end = at.astimezone(zone).replace(tzinfo=None)
    walls = croniter(expr, start, second_at_beginning=seconds_first)
    skipped = []
    for _ in range(MAX_PREVIEW):
        wall: datetime = walls.get_next(datetime)
        if wall >= end:
            break
        if rule is not None and not rule_matches(rule, wall.date()):
            continue
        local = wall.replace(tzinfo=zone)
        if local.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != wall:
            skipped.append(wall)
    return skipped
