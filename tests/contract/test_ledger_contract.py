"""The occurrence-ledger part of the backend contract: records appended per subject, read
newest first, trimmed to the newest ``keep``, expired after their time to live, and
written by ack, retry and poison in the same step as the transition, only while the lease
is held. Run against every backend."""

from __future__ import annotations

from tests.support.backends import BackendHarness
from tests.support.contract import TIMEOUT_MS, claim_all, env
from tickwork.scheduler.backends import Failure, LedgerEntry
from tickwork.scheduler.backends.sqlite.ledger_log import FOLD_EVERY_MS

DAY_MS = 86_400_000


def past_a_fold(harness: BackendHarness) -> None:
    """Let time pass, past the next fold of SQLite's ledger log (its clock is a manual
    one); a little on the other backends, which have no fold."""
    harness.advance(FOLD_EVERY_MS + 100 if harness.name == "sqlite" else 1100)


def entry(subject: str, *records: bytes, queue: str = "q", keep: int = 100) -> LedgerEntry:
    return LedgerEntry(queue, subject, records, keep, DAY_MS)


def test_records_read_newest_first_per_subject_and_queue(harness: BackendHarness) -> None:
    b = harness.backend
    assert b.ledger.read("q", "k:daily") == []
    b.ledger.append([entry("k:daily", b"r1", b"r2"), entry("k:other", b"x")])
    b.ledger.append([entry("k:daily", b"r3"), entry("k:daily", b"elsewhere", queue="q2")])
    b.ledger.append([])
    assert b.ledger.read("q", "k:daily") == [b"r3", b"r2", b"r1"]
    assert b.ledger.read("q", "k:daily", limit=2) == [b"r3", b"r2"]
    assert b.ledger.read("q", "k:other") == [b"x"]
    assert b.ledger.read("q2", "k:daily") == [b"elsewhere"]
    assert b.ledger.read("q", "k:daily", limit=0) == []


def test_one_append_of_many_entries_keeps_each_subjects_order(harness: BackendHarness) -> None:
    """A write of entries to many subjects, a subject more than once among them (a
    backend may group them per shard or per subject): each subject reads them in order."""
    b = harness.backend
    subjects = [f"k:s{i}" for i in range(40)]
    b.ledger.append([entry(s, b"a-" + s.encode()) for s in subjects] + [entry("k:s3", b"b", b"c")])
    b.ledger.append([entry("k:s3", b"d"), *(entry(s, b"e-" + s.encode()) for s in subjects)])
    assert b.ledger.read("q", "k:s3") == [b"e-k:s3", b"d", b"c", b"b", b"a-k:s3"]
    assert b.ledger.read_many([("q", s) for s in subjects[:2]]) == [
        [b"e-k:s0", b"a-k:s0"],
        [b"e-k:s1", b"a-k:s1"],
    ]


def test_a_ledger_keeps_its_newest_records(harness: BackendHarness) -> None:
    b = harness.backend
    for i in range(8):
        b.ledger.append([entry("k:short", f"r{i}".encode(), keep=5)])
    newest = [b"r7", b"r6", b"r5", b"r4", b"r3"]
    assert b.ledger.read("q", "k:short", limit=5) == newest
    if harness.name != "cassandra":  # Cassandra keeps rows until their TTL (ledger.py)
        assert len(b.ledger.read("q", "k:short")) <= 5 + 1, "trimmed (an eighth more, or 1)"


def test_records_written_over_seconds_read_in_order_and_trimmed(harness: BackendHarness) -> None:
    """(On SQLite records wait in a log folded into the ledger every few seconds: the
    reads here cross folds.)"""
    b = harness.backend
    for i in range(12):
        b.ledger.append([entry("k:slow", f"r{i}".encode(), keep=6), entry("k:pair", b"p%d" % i)])
        if i % 4 == 3:
            past_a_fold(harness)
    newest = [f"r{i}".encode() for i in range(11, 5, -1)]
    assert b.ledger.read("q", "k:slow", limit=6) == newest
    assert b.ledger.read_many([("q", "k:slow"), ("q", "k:pair")], 3) == [
        newest[:3],
        [b"p11", b"p10", b"p9"],
    ]
    if harness.name != "cassandra":  # Cassandra keeps rows until their TTL (ledger.py)
        assert len(b.ledger.read("q", "k:slow")) <= 6 + 1, "trimmed (an eighth more, or 1)"
    assert b.ledger.read("q", "k:pair", limit=100) == [b"p%d" % i for i in range(11, -1, -1)]


def test_more_records_than_kept_between_folds_leave_the_newest_in_order(
    harness: BackendHarness,
) -> None:
    """(On SQLite ten records land in the log within one fold, three are kept: the fold
    inserts only those, numbered after the subject's last.)"""
    b = harness.backend
    b.ledger.append([entry("k:burst", b"first", keep=3)])
    past_a_fold(harness)
    for i in range(10):
        b.ledger.append([entry("k:burst", b"b%d" % i, keep=3)])
    past_a_fold(harness)
    b.ledger.append([entry("k:burst", b"last", keep=3)])
    assert b.ledger.read("q", "k:burst", limit=3) == [b"last", b"b9", b"b8"]
    past_a_fold(harness)
    b.ledger.append([entry("k:burst", b"after", keep=3)])  # folds "last" after b9
    assert b.ledger.read("q", "k:burst", limit=3) == [b"after", b"last", b"b9"]


def test_records_expire_after_their_time_to_live(harness: BackendHarness) -> None:
    b = harness.backend
    b.ledger.append([LedgerEntry("q", "k:brief", (b"old",), 100, 1000)])
    b.ledger.append([entry("k:brief", b"kept")])
    harness.advance(2100)  # Cassandra's TTL counts whole seconds
    assert b.ledger.read("q", "k:brief") == [b"kept"]


def test_ack_writes_each_held_runs_entry_in_its_step(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "c", key="K"), env(harness, "o"), env(harness, "p")])
    claims = {c.id: c for c in claim_all(harness)}
    nxt = env(harness, "c.1", key="K", due_in_ms=60_000)
    items = [(claims["c"], nxt), (claims["o"], None), (claims["p"], None)]
    ledger = [entry("k:K", b"ran", b"missed"), None, entry("m:p", b"p-ran")]
    assert b.leases.ack(items, ledger) == [True, True, True]
    assert b.ledger.read("q", "k:K") == [b"missed", b"ran"]
    assert b.ledger.read("q", "m:p") == [b"p-ran"]
    assert b.leases.ack([(claims["o"], None)], [entry("m:o", b"stale")]) == [False]
    assert b.ledger.read("q", "m:o") == [], "a refused ack writes no record"


def test_ack_releasing_writes_the_entries_too(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "s")])
    (claim,) = claim_all(harness)
    acked, _ = b.leases.ack_releasing([(claim, None)], [("limit-x", "s")], [entry("m:s", b"done")])
    assert acked == [True]
    assert b.ledger.read("q", "m:s") == [b"done"]


def test_retry_and_poison_write_their_entry_only_with_the_lease(
    harness: BackendHarness,
) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "r", key="R")])
    (first,) = claim_all(harness)
    assert b.leases.retry(first, harness.now_ms(), "E: boom", entry("k:R", b"retried"))
    assert b.leases.retry(first, harness.now_ms(), "E: late", entry("k:R", b"stale")) is False
    (second,) = claim_all(harness)
    failure = Failure("exception", "E", "boom")
    nxt = env(harness, "r.1", key="R", due_in_ms=60_000)
    assert b.leases.poison(second, failure, nxt, entry("k:R", b"poisoned"))
    assert b.leases.poison(second, failure, None, entry("k:R", b"stale")) is False
    assert b.ledger.read("q", "k:R") == [b"poisoned", b"retried"]
    got = b.messages.get_by_key("q", "R")
    assert got is not None and got.envelope.id == "r.1"


def test_an_expired_leases_holder_writes_no_entry(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "e")])
    (slow,) = claim_all(harness)
    harness.advance(TIMEOUT_MS + 150)
    (fast,) = claim_all(harness)
    assert b.leases.ack([(slow, None)], [entry("m:e", b"slow")]) == [False]
    assert b.leases.ack([(fast, None)], [entry("m:e", b"fast")]) == [True]
    assert b.ledger.read("q", "m:e") == [b"fast"]


def test_several_ledgers_read_in_one_call(harness: BackendHarness) -> None:
    b = harness.backend
    b.ledger.append([entry("k:a", b"a1", b"a2"), entry("k:b", b"b1", queue="q2")])
    subjects = [("q", "k:a"), ("q2", "k:b"), ("q", "k:none")]
    assert b.ledger.read_many(subjects, 5) == [[b"a2", b"a1"], [b"b1"], []]
    assert b.ledger.read_many(subjects, 1) == [[b"a2"], [b"b1"], []]
    assert b.ledger.read_many([], 5) == []
