"""What every trigger shares: the misfire policy and the planning of the next fire.
(``Fire`` and the policies live in ``triggers.fires`` and ``triggers.policies``; they are
imported here too, where most callers look for them.)

A trigger is pure time arithmetic. Given the previous occurrence (its scheduled time and
number) and "now", it says when the next one is due. Nothing here reads a clock, sleeps
or does I/O; callers pass ``now`` in, which is what makes triggers property-testable.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from tickwork.triggers.calendars import Exclusions
from tickwork.triggers.errors import checked
from tickwork.triggers.fields import AwareTime, Duration, PositiveDuration
from tickwork.triggers.fires import Fire, format_duration, require_aware
from tickwork.triggers.policies import Misfire, Overlap

#: Upper bound on how many missed occurrences are counted one by one.
MISFIRE_COUNT_LIMIT = 1000
#: the most occurrences a catch-up window steps over one by one (past it, the policy
#: decides for what is left)
CATCH_UP_WALK = 100_000
#: the most consecutive excluded dates a trigger steps over before it gives up
MAX_EXCLUDED_DAYS = 3660


class Trigger(BaseModel, ABC):
    """Base of all triggers: immutable, serialisable, and free of I/O."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    misfire: Misfire = Misfire.COALESCE
    overlap: Overlap = Overlap.SERIAL
    max_catch_up: int = Field(default=100, ge=1)
    #: when runs are late (catching up after an outage), the least time between two of them
    catch_up_spacing: Duration = timedelta(0)
    #: an occurrence due longer ago than this is not run at all, whatever the misfire
    #: policy (recorded as missed); None: no limit (Temporal's ``catchup_window``)
    catch_up_window: PositiveDuration | None = None
    jitter: Duration = timedelta(0)
    end: AwareTime | None = None
    #: dates (in the trigger's timezone) on which it does not fire
    exclude: Exclusions | None = None
    #: a named calendar shared by many schedules and stored in the backend
    #: (``app.schedules.calendars``), applied on top of ``exclude``: whoever plans the
    #: trigger attaches its rules first (``with_shared``)
    calendar: str | None = None
    #: a keyed schedule is paused after this many occurrences in a row failed for good
    #: (None: never); counted from its history, so the ledger must be on
    pause_after_failures: int | None = Field(default=None, ge=1)

    #: the named calendar's rules, attached by the planner (never stored)
    _shared: Exclusions | None = PrivateAttr(default=None)

    def __init__(self, /, **data: Any) -> None:
        with checked(type(self).__name__):  # errors in tickwork's words, naming the field
            super().__init__(**data)

    def due_after(self, fire: Fire, finished: datetime) -> datetime:
        """When ``fire`` may run, its predecessor having finished at ``finished``: its own
        time, or, when it is already late (catching up), no sooner than
        ``catch_up_spacing`` after the predecessor."""
        if self.catch_up_spacing and fire.at <= finished:
            return max(fire.at, finished + self.catch_up_spacing)
        return fire.at

    @model_serializer(mode="wrap")
    def _always_kind(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        data["kind"] = getattr(self, "kind", None)  # the union tag survives exclude_defaults
        return data

    # -- what each trigger defines -------------------------------------------------------

    def anchored(self, now: datetime) -> Trigger:
        """A copy with every "relative to now" setting resolved against ``now``."""
        return self

    def with_misfires(self, misfires: int) -> Trigger:
        """The trigger to plan a chain's next occurrence with, given how many of its
        occurrences were missed so far (coalesced or skipped): itself, unless missed
        occurrences must not use up a count (``Repeating(count_missed=False)``)."""
        return self

    @abstractmethod
    def _candidate(self, now: datetime) -> Fire | None:
        """The first occurrence on the grid (``now`` anchors relative ones), exclusions
        not applied."""

    @abstractmethod
    def _after(self, at: datetime, occurrence: int) -> Fire | None:
        """The grid occurrence strictly after ``at`` (number ``occurrence``), exclusions
        not applied."""

    def candidate(self, now: datetime) -> Fire | None:
        """The first occurrence on the grid that is not on an excluded date, ignoring
        misfires (``now`` anchors relative ones)."""
        return self._allowed(self._in_window(self._candidate(now)))

    def after(self, at: datetime, occurrence: int) -> Fire | None:
        """The grid occurrence strictly after ``at``, which was occurrence number
        ``occurrence``, that is not on an excluded date."""
        return self._allowed(self._grid_after(at, occurrence))

    def next_after(self, at: datetime, occurrence: int = 0) -> Fire | None:
        """``after``, or None past the trigger's ``end``."""
        return self._within_end(self.after(at, occurrence))

    def within_end(self, fire: Fire | None) -> Fire | None:
        """``fire``, or None when it is past the trigger's ``end``."""
        return self._within_end(fire)

    def with_shared(self, calendar: Exclusions | None) -> Trigger:
        """A copy that applies ``calendar`` (the rules of the named calendar it names) on
        top of its own ``exclude``; itself when it names none."""
        if self.calendar is None:
            return self
        copy = self.model_copy()
        copy._shared = calendar
        return copy

    @property
    def rules(self) -> tuple[Exclusions, ...]:
        """The exclusions it applies: its own, then its named calendar's (if attached)."""
        own = () if self.exclude is None else (self.exclude,)
        return own if self._shared is None else (*own, self._shared)

    def excluded(self, fire: Fire) -> str | None:
        """Why ``fire`` falls on an excluded date, or None."""
        rules = self.rules
        if not rules:
            return None
        day = fire.at.astimezone(ZoneInfo(self.zone)).date()
        return next((why for rule in rules if (why := rule.reason(day)) is not None), None)

    def _grid_after(self, at: datetime, occurrence: int) -> Fire | None:
        """``_after`` within the exclusions' time windows, if any: occurrences outside
        every window are not on the grid at all (never recorded as excluded)."""
        return self._in_window(self._after(at, occurrence))

    def _in_window(self, fire: Fire | None) -> Fire | None:
        """``fire``, or the first grid occurrence after it inside a window (the grid is
        followed from each window's opening, not walked through the hours between)."""
        windowed = [rule for rule in self.rules if rule.windows]
        if not windowed:
            return fire
        zone = ZoneInfo(self.zone)
        for _ in range(MAX_EXCLUDED_DAYS * 4):
            if fire is None:
                return None
            wall = fire.at.astimezone(zone).replace(tzinfo=None)
            closed = [rule for rule in windowed if rule.outside(wall)]
            if not closed:
                return fire
            opening = max(rule.next_opening(wall) for rule in closed).replace(tzinfo=zone)
            before = opening.astimezone(UTC) - timedelta(microseconds=1)
            fire = self._after(max(fire.at, before), fire.occurrence)
        raise ValueError(f"no time in {MAX_EXCLUDED_DAYS} days is inside the windows")

    def excluded_between(
        self, after: Fire, before: datetime, limit: int = 1000
    ) -> list[tuple[Fire, str]]:
        """The grid occurrences after ``after`` and before ``before`` that fall on an
        excluded date, each with why, oldest first (at most ``limit``): what the schedule
        stepped over between two runs."""
        if not self.rules:
            return []
        found: list[tuple[Fire, str]] = []
        fire = self._within_end(self._grid_after(after.at, after.occurrence))
        for _ in range(limit):
            if fire is None or fire.at >= before:
                break
            reason = self.excluded(fire)
            if reason is not None:
                found.append((fire, reason))
            fire = self._within_end(self._grid_after(fire.at, fire.occurrence))
        return found

    def _allowed(self, fire: Fire | None) -> Fire | None:
        """``fire``, or the first grid occurrence after it on a date not excluded (each
        excluded date is stepped over at once, from its last instant)."""
        if not self.rules:
            return fire
        zone = ZoneInfo(self.zone)
        for _ in range(MAX_EXCLUDED_DAYS):
            if fire is None or self.excluded(fire) is None:
                return fire
            day = fire.at.astimezone(zone).date()
            next_day = datetime.combine(day + timedelta(days=1), time(), zone)
            before_next = next_day.astimezone(UTC) - timedelta(microseconds=1)
            fire = self._grid_after(max(fire.at, before_next), fire.occurrence)
        raise ValueError(f"no date in {MAX_EXCLUDED_DAYS} days is free of the exclusions")

    @property
    def recurring(self) -> bool:
        """True when a trigger can fire more than once."""
        return True

    @property
    def zone(self) -> str:
        """The IANA timezone the trigger's times are meant in (UTC unless it has one)."""
        return "UTC"

    def describe(self) -> str:
        """The trigger as a person writes it: ``cron 0 9 * * MON-FRI Europe/Paris``,
        ``every 1h from 2030-01-01 00:00:00 UTC, 5 runs``, ``once at ...``."""
        parts = [self._describe_own()]
        if self.end is not None:
            parts.append(f"until {self.end:%Y-%m-%d %H:%M:%S} UTC")
        if self.misfire is not Misfire.COALESCE:
            parts.append(f"misfire {self.misfire}")
        if self.overlap is not Overlap.SERIAL:
            parts.append(f"overlap {self.overlap}")
        if self.catch_up_spacing:
            parts.append(f"catch up {format_duration(self.catch_up_spacing)} apart")
        if self.catch_up_window is not None:
            parts.append(f"catch up within {format_duration(self.catch_up_window)}")
        if self.jitter:
            parts.append(f"jitter {format_duration(self.jitter)}")
        if self.pause_after_failures is not None:
            parts.append(f"paused after {self.pause_after_failures} failures in a row")
        if self.exclude is not None:
            parts.append(self.exclude.describe())
        if self.calendar is not None:
            parts.append(f"calendar {self.calendar}")
        return ", ".join(parts)

    def _describe_own(self) -> str:
        return str(getattr(self, "kind", type(self).__name__))

    # -- planning, shared ----------------------------------------------------------------

    def first(self, now: datetime) -> Fire | None:
        """The first fire of a freshly enqueued trigger, with the misfire policy applied."""
        now = require_aware(now, "now")
        return self._resolve(self.candidate(now), now)

    def following(self, at: datetime, occurrence: int, now: datetime) -> Fire | None:
        """The fire after occurrence number ``occurrence`` scheduled at ``at``.

        The next time is computed from the scheduled time, never from ``now``, so a
        repeating trigger does not drift; ``now`` only decides whether runs were missed.
        """
        now = require_aware(now, "now")
        return self._resolve(self.after(require_aware(at, "at"), occurrence), now)

    def missed(self, pending: Fire, now: datetime, limit: int) -> list[Fire]:
        """The occurrences from ``pending`` on that are due at ``now``, oldest first, at
        most ``limit`` (what a paused schedule missed)."""
        now = require_aware(now, "now")
        found: list[Fire] = []
        current = self._within_end(pending)
        while current is not None and current.at <= now and len(found) < limit:
            found.append(current)
            current = self._within_end(self.after(current.at, current.occurrence))
        return found

    def between(self, start: datetime, end: datetime, limit: int) -> list[Fire]:
        """The grid occurrences from ``start`` to ``end``, both included, oldest first,
        not on excluded dates and not past the trigger's end, ignoring misfires; at most
        ``limit`` (a caller asks for one more than it takes to learn there are more).
        Occurrence numbers are not meaningful here: name an occurrence by its time."""
        start, end = require_aware(start, "start"), require_aware(end, "end")
        found: list[Fire] = []
        fire = self._within_end(self.after(start - timedelta(microseconds=1), 0))
        while fire is not None and fire.at <= end and len(found) < limit:
            found.append(fire)
            fire = self._within_end(self.after(fire.at, fire.occurrence))
        return found

    def after_pause(self, pending: Fire, now: datetime, misfire: Misfire) -> Fire | None:
        """The fire to store when a schedule paused at ``pending`` resumes at ``now``:
        with ``SKIP`` every occurrence due by now is skipped (counted in ``misfires``),
        the next is the first grid time after now; with ``COALESCE`` they are run once,
        now; ``CATCH_UP`` is ``SKIP`` here (the caller enqueues the missed runs itself).
        ``pending`` itself when it is still in the future."""
        now = require_aware(now, "now")
        fire = self._within_end(pending)
        if fire is None or fire.at > now:
            return fire
        missed = self._count_due(fire, now, MISFIRE_COUNT_LIMIT)
        last = self._last_due(fire, now)
        if misfire is Misfire.COALESCE:
            return Fire(now, last.occurrence, pending.misfires + missed - 1)
        nxt = self._within_end(self.after(now, last.occurrence))
        return None if nxt is None else nxt._replace(misfires=pending.misfires + missed)

    def _within_end(self, fire: Fire | None) -> Fire | None:
        if fire is None or (self.end is not None and fire.at > self.end):
            return None
        return fire

    def _resolve(self, fire: Fire | None, now: datetime) -> Fire | None:
        """``fire`` with the catch-up window and the misfire policy applied at ``now``:
        the fire to store, its ``misfires`` the occurrences it steps over."""
        fire = self._within_end(fire)
        if fire is None or fire.at > now:
            return fire
        stale = 0
        if self.catch_up_window is not None and fire.at < now - self.catch_up_window:
            fire, stale = self._past_window(fire, now - self.catch_up_window)
            if fire is None or fire.at > now:
                return None if fire is None else fire._replace(misfires=fire.misfires + stale)
        resolved = self._resolve_due(fire, now)
        if resolved is None or not stale:
            return resolved
        return resolved._replace(misfires=resolved.misfires + stale)

    def _past_window(self, fire: Fire, horizon: datetime) -> tuple[Fire | None, int]:
        """The first occurrence from ``fire`` on not before ``horizon``, and how many were
        (a walk of at most ``CATCH_UP_WALK``)."""
        current: Fire | None = fire
        stale = 0
        while current is not None and current.at < horizon and stale < CATCH_UP_WALK:
            stale += 1
            current = self._within_end(self.after(current.at, current.occurrence))
        return current, stale

    def _resolve_due(self, fire: Fire, now: datetime) -> Fire | None:
        """``_resolve`` for a ``fire`` that is due (inside the catch-up window)."""
        second = self._within_end(self.after(fire.at, fire.occurrence))
        if second is None or second.at > now:
            return fire  # late, but only one run is owed: no misfire
        missed = self._count_due(fire, now, MISFIRE_COUNT_LIMIT)
        if self.misfire is Misfire.CATCH_UP and missed <= self.max_catch_up:
            return fire
        if self.misfire is Misfire.CATCH_UP and missed < MISFIRE_COUNT_LIMIT:
            # partial: the newest max_catch_up run, the ones before them are dropped
            dropped = missed - self.max_catch_up
            current: Fire | None = fire
            for _ in range(dropped):
                assert current is not None  # counted due above
                current = self._within_end(self.after(current.at, current.occurrence))
            assert current is not None
            return current._replace(misfires=dropped)
        last = self._last_due(fire, now)
        if self.misfire is Misfire.SKIP:
            nxt = self._within_end(self.after(now, last.occurrence))
            return None if nxt is None else nxt._replace(misfires=missed)
        return Fire(now, last.occurrence, missed - 1)

    def _count_due(self, fire: Fire, now: datetime, limit: int) -> int:
        """How many occurrences from ``fire`` on are due at ``now`` (at most ``limit``)."""
        count = 0
        current: Fire | None = fire
        while current is not None and current.at <= now and count < limit:
            count += 1
            current = self._within_end(self.after(current.at, current.occurrence))
        return count

    def _last_due(self, fire: Fire, now: datetime) -> Fire:
        """The latest occurrence due at ``now``, counting from ``fire`` (bounded walk)."""
        current = fire
        for _ in range(MISFIRE_COUNT_LIMIT):
            nxt = self._within_end(self.after(current.at, current.occurrence))
            if nxt is None or nxt.at > now:
                return current
            current = nxt
        return current


__all__ = [
    "CATCH_UP_WALK",
    "MAX_EXCLUDED_DAYS",
    "MISFIRE_COUNT_LIMIT",
    "Fire",
    "Misfire",
    "Overlap",
    "Trigger",
    "format_duration",
    "require_aware",
]
