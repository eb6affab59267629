"""Who may do what on the dashboard and its API: three roles, each able to do what the
one before it does.

- ``viewer``: read every page and every ``GET`` of the API.
- ``operator``: act on work: pause and resume queues and schedules, run a schedule now,
  backfill, cancel and abort messages, replay the poison store, enqueue and emit.
- ``admin``: besides, what cannot be undone or changes the deployment: purge the poison
  store, bound queues, change calendars and tokens.

Which an action needs is said here once: by its verb (the last part of its path).
"""

from __future__ import annotations

from enum import IntEnum


class Role(IntEnum):
    """A user's (or a token's) role; a higher one may do all a lower one may."""

    VIEWER = 0
    OPERATOR = 1
    ADMIN = 2

    @classmethod
    def named(cls, name: str) -> Role:
        """``"viewer"``, ``"operator"`` or ``"admin"``; ``ValueError`` for another."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(f"a role is viewer, operator or admin, not {name!r}") from None

    @property
    def label(self) -> str:
        return self.name.lower()


#: the verbs only an admin may use
ADMIN_VERBS = frozenset(
    {"purge", "bound", "calendar", "tokens", "set-capacity", "clear-capacity", "weigh"}
)


def needed(verb: str) -> Role:
    """The role an action with ``verb`` needs."""
    return Role.ADMIN if verb in ADMIN_VERBS else Role.OPERATOR
