"""The journal of durable runs (``scheduler/runs/journal.py``, on the results role), run
against every backend: entries read back in order across the growing reads, an entry
written again replaced at its index, a hole ending the journal, entries gone after
their time to live."""

from __future__ import annotations

import uuid
from typing import Any

from tests.support.backends import BackendHarness
from tickwork.scheduler.runs.journal import JournalEntry, JournalStore, entry_id


def _run() -> str:
    return f"j{uuid.uuid4().hex[:12]}"  # journals share the results' ids: fresh ones


def _step(n: int, **fields: Any) -> JournalEntry:
    return JournalEntry(kind="step", name=f"s{n}", value={"n": n, "text": "é" * (n % 3)}, **fields)


def test_a_journal_reads_back_in_order_across_its_growing_reads(harness: BackendHarness) -> None:
    store = JournalStore(harness.backend.results)
    run = _run()
    assert store.read(run) == []
    store.write(run, [(0, _step(0))], 60_000)
    assert store.read(run) == [_step(0)]
    # 100 entries cross the reads of 16, 64 and 256: every one back, in order
    store.write(run, [(n, _step(n)) for n in range(1, 100)], 60_000)
    assert store.read(run) == [_step(n) for n in range(100)]
    assert store.read(_run()) == [], "another run's journal is its own"


def test_an_entry_written_again_replaces_the_one_at_its_index(harness: BackendHarness) -> None:
    store = JournalStore(harness.backend.results)
    run = _run()
    retrying = _step(0, state="retrying", error_type="ConnectionError", error="down")
    store.write(run, [(0, retrying), (1, _step(1))], 60_000)
    store.write(run, [(0, _step(0, attempts=2))], 60_000)
    assert store.read(run) == [_step(0, attempts=2), _step(1)]


def test_a_missing_entry_ends_the_journal(harness: BackendHarness) -> None:
    """A crash between two writes can leave entry n+1 without entry n: the journal ends
    at the hole (what comes after is done again, and written over)."""
    store = JournalStore(harness.backend.results)
    run = _run()
    store.write(run, [(0, _step(0)), (1, _step(1)), (3, _step(3))], 60_000)
    assert store.read(run) == [_step(0), _step(1)]
    # the entries are stored as the results role's records, by a derived id
    assert set(harness.backend.results.get([entry_id(run, n) for n in range(4)])) == {
        entry_id(run, 0),
        entry_id(run, 1),
        entry_id(run, 3),
    }


def test_journal_entries_are_gone_after_their_time_to_live(harness: BackendHarness) -> None:
    store = JournalStore(harness.backend.results)
    short, kept = _run(), _run()
    store.write(short, [(0, _step(0))], 1000)
    store.write(kept, [(0, _step(0))], 60_000)
    harness.advance(2100)  # sleeps on a server (Cassandra's TTL counts in seconds)
    assert store.read(short) == []
    assert store.read(kept) == [_step(0)]
