"""What a schedule does when it is late (``Misfire``) and when its runs would overlap
(``Overlap``): the policies every trigger carries."""

from __future__ import annotations

from enum import StrEnum


class Misfire(StrEnum):
    """What to do when a worker finds that two or more occurrences were missed.

    - ``coalesce`` (default): run once now, then continue on the grid.
    - ``catch_up``: run the missed occurrences in order: all of them up to
      ``max_catch_up``; beyond that, the newest ``max_catch_up`` (the older ones are
      recorded as coalesced); a backlog past ``MISFIRE_COUNT_LIMIT`` is coalesced.
    - ``skip``: run nothing now; the next run is the first grid time after now.
    """

    COALESCE = "coalesce"
    CATCH_UP = "catch_up"
    SKIP = "skip"


class Overlap(StrEnum):
    """Whether an occurrence may start while the one before it still runs.

    - ``serial`` (default): never. The next occurrence is planned when a run ends, so a
      long run makes the next ones late; those that passed meanwhile follow the misfire
      policy (coalesced by default) and are recorded as skipped by overlap.
    - ``allow``: each occurrence starts on time, running or not: it runs as its own
      message, and the schedule goes on at once.
    - ``buffer_one``: an occurrence that falls while a run is running waits for it and
      starts when it ends; one more that falls while one already waits is skipped.
    - ``buffer_all``: every occurrence runs, one after another: those that fall while a
      run is running wait their turn.
    - ``cancel_other``: an occurrence that falls while a run is running aborts it (as
      ``app.abort`` does) and starts once it has stopped.
    - ``terminate_other``: as ``cancel_other``, but a run on the process pool is killed
      at once instead of being given its abort grace.

    Every policy but ``serial`` runs each occurrence as a message of its own (the
    schedule goes on on time); all but ``allow`` run them one at a time.
    """

    SERIAL = "serial"
    ALLOW = "allow"
    BUFFER_ONE = "buffer_one"
    BUFFER_ALL = "buffer_all"
    CANCEL_OTHER = "cancel_other"
    TERMINATE_OTHER = "terminate_other"

    @property
    def meaning(self) -> str:
        """What the policy does, in a few words (``tickwork schedules preview``)."""
        return _OVERLAP_MEANINGS[self]


_OVERLAP_MEANINGS = {
    Overlap.SERIAL: "the next occurrence waits for the run before it to end",
    Overlap.ALLOW: "each occurrence starts on time, running or not",
    Overlap.BUFFER_ONE: "one run at a time; one more waits, the others are skipped",
    Overlap.BUFFER_ALL: "one run at a time; every occurrence waits its turn",
    Overlap.CANCEL_OTHER: "an occurrence aborts the run before it, then starts",
    Overlap.TERMINATE_OTHER: "an occurrence kills the run before it, then starts",
}
