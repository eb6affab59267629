"""A durable run's journal: what each of its steps, sleeps and recorded values gave,
stored in the backend so that a run started again (after a crash, a redelivery, a sleep)
replays what was done instead of doing it again.

The journal lives on the results role, one record per entry: entry ``n`` of run ``id``
is the record ``{id}~{n}``. So it is on every backend, through the codec hooks (an
``Encryption`` hook encrypts it as it does results), with a time to live like results,
and with no role of its own to implement. Entries are written in order, each after the
one before; a run's journal is read in a few round trips of growing size (16 entries,
then 64, 256, ...) up to the first missing entry, so a hole left by a crash between two
writes ends the journal there (the entries after it are done again, and written over).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticValidationError

from tickwork.scheduler.backends.roles import Results
from tickwork.scheduler.errors import TickworkError

#: the kinds of entry: a step's outcome, a sleep's wake-up, a wait's event (or None: it
#: timed out), a child started (its id) and the children's values gathered, a recorded
#: value (``now``, ``random``), a patch marker
EntryKind = Literal["step", "sleep", "wait", "spawn", "gather", "value", "patch"]

#: a step that is ``done`` returned ``value``; one that ``failed`` for good raised
#: ``error_type: error``; one ``retrying`` failed ``attempts`` times and runs again; a
#: wait ``waiting`` for its event until ``until_ms``
EntryState = Literal["done", "failed", "retrying", "waiting"]

#: the first read asks for this many entries, each next one four times as many
_FIRST_READ = 16


class JournalEntry(BaseModel):
    """One entry of a run's journal (compact JSON in the backend)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: EntryKind
    name: str
    state: EntryState = "done"
    value: Any = None
    error_type: str = ""
    error: str = ""
    attempts: int = 1
    #: when its step started and ended (ms since the epoch, the backend's clock)
    started_ms: int = 0
    ended_ms: int = 0
    #: a sleep: when the run wakes; a wait: its timeout (ms since the epoch, the
    #: backend's clock)
    until_ms: int = 0

    def encode(self) -> bytes:
        return self.model_dump_json(exclude_defaults=True).encode()

    @classmethod
    def decode(cls, body: bytes) -> JournalEntry:
        try:
            return cls.model_validate_json(body)
        except (PydanticValidationError, ValueError) as err:
            raise TickworkError(f"not a tickwork journal entry: {err}") from err


def entry_id(run_id: str, index: int) -> str:
    """The record id of entry ``index`` of run ``run_id``'s journal."""
    return f"{run_id}~{index}"


class JournalStore:
    """Reads and writes runs' journals over a backend's results role."""

    __slots__ = ("_results",)

    def __init__(self, results: Results) -> None:
        self._results = results

    def read(self, run_id: str) -> list[JournalEntry]:
        """Run ``run_id``'s journal, in order (empty when it has none)."""
        entries: list[JournalEntry] = []
        size = _FIRST_READ
        while True:
            ids = [entry_id(run_id, n) for n in range(len(entries), len(entries) + size)]
            found = self._results.get(ids)
            for one in ids:
                body = found.get(one)
                if body is None:
                    return entries
                entries.append(JournalEntry.decode(body))
            size *= 4

    def write(self, run_id: str, entries: Sequence[tuple[int, JournalEntry]], ttl_ms: int) -> None:
        """Store ``(index, entry)`` pairs of ``run_id``'s journal, each kept ``ttl_ms``
        (an entry written again at its index replaces the one there)."""
        self._results.put(
            [(entry_id(run_id, index), entry.encode(), ttl_ms) for index, entry in entries]
        )
