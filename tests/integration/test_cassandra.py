"""Cassandra-specific behaviour on a real node: shard-lock holder death, schema, errors."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cassandra import ConsistencyLevel, WriteTimeout
from cassandra.policies import WriteType
from click.testing import CliRunner

from tests.support.backends import Servers
from tests.support.served import run_tickwork
from tests.support.servers import free_port
from tickwork.cli import cli
from tickwork.scheduler import (
    BackendError,
    BackendUnavailable,
    ConfigurationError,
    InvalidMessage,
    open_backend,
)
from tickwork.scheduler.backends import Envelope, OnConflict, Outcome
from tickwork.scheduler.backends.base import Claim
from tickwork.scheduler.backends.cassandra import MAX_BODY_BYTES, CassandraBackend, cql

ROOT = Path(__file__).resolve().parents[2]


def url(lock_ttl_ms: int = 10_000) -> str:
    keyspace = f"t{uuid.uuid4().hex[:12]}"
    return (
        f"cassandra://{Servers.cassandra_hosts()}/{keyspace}?consistency=ONE"
        f"&lock_ttl_ms={lock_ttl_ms}"
    )


def test_a_dead_lock_holder_blocks_its_shard_only_until_the_lock_ttl() -> None:
    address = url(lock_ttl_ms=3_000)
    backend = open_backend(address)
    now = backend.now_ms()
    backend.messages.enqueue(
        [Envelope(f"m{i}", "q", None, 0, now, 60_000, b"x") for i in range(50)]
    )
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from tickwork.scheduler import open_backend; "
            f"b = open_backend({address!r}); assert b.store.lock('q', 0) is not None; "
            "print('locked', flush=True); time.sleep(600)",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        holder.send_signal(signal.SIGKILL)  # dies holding the lock
        holder.wait(10)
        locked_at = time.monotonic()
        assert backend.leases.claim("q", 100).claims == [], (
            "the shard is locked by the dead consumer"
        )
        claims: list[Claim] = []
        while not claims and time.monotonic() - locked_at < 30:
            time.sleep(0.25)
            claims = backend.leases.claim("q", 100).claims
        waited = time.monotonic() - locked_at
        assert len(claims) == 50, "after the lock TTL another consumer takes the whole shard"
        assert waited >= 1.0
        assert backend.leases.ack([(c, None) for c in claims]) == [True] * 50
        stats = backend.queues.stats("q")[0]
        assert (stats.ready, stats.scheduled, stats.in_flight) == (0, 0, 0)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
        backend.close()


def test_create_schema_command_is_idempotent() -> None:
    address = url()
    runner = CliRunner()
    for _ in range(2):
        result = runner.invoke(cli, ["--backend", address, "cassandra", "create-schema"])
        assert result.exit_code == 0, result.output
        assert "schema ready" in result.output
    backend = open_backend(address + "&create_schema=false")
    assert backend.queues.stats() == []
    backend.close()


def test_create_schema_adds_the_aging_column_to_a_keyspace_made_before_it(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """A keyspace made by a version without priority aging gets ``promote_ms`` from
    ``tickwork cassandra create-schema``; its messages with ``max_wait`` then age."""
    address = url()
    assert (
        run_tickwork(
            tmp_path, clean_env, "--backend", address, "cassandra", "create-schema"
        ).returncode
        == 0
    )
    backend = open_backend(address)
    assert isinstance(backend, CassandraBackend)
    keyspace = address.rsplit("/", 1)[1].split("?")[0]
    backend.store.session.execute(f"ALTER TABLE {keyspace}.queue_messages DROP promote_ms")
    backend.close()
    done = run_tickwork(tmp_path, clean_env, "--backend", address, "cassandra", "create-schema")
    assert done.returncode == 0 and "schema ready" in done.stdout, done.stdout + done.stderr
    backend = open_backend(address + "&create_schema=false")
    now = backend.now_ms()
    backend.messages.enqueue(
        [
            Envelope("low", "q", None, -5, now, 60_000, b"low", promote_ms=now),
            Envelope("high", "q", None, 5, now, 60_000, b"high"),
        ]
    )
    assert [c.id for c in backend.leases.claim("q", 10).claims] == ["low", "high"]
    backend.close()


def test_unreachable_node_is_one_clear_error() -> None:
    port = free_port()
    with pytest.raises(BackendUnavailable, match=f"127.0.0.1:{port}"):
        open_backend(f"cassandra://127.0.0.1:{port}/ks")


@pytest.mark.parametrize(
    "bad",
    [
        "cassandra://127.0.0.1/ks?colour=red",
        "cassandra://127.0.0.1/ks?consistency=SOMETIMES",
        "cassandra://127.0.0.1/bad-name",
        "cassandra://127.0.0.1/ks?shards=many",
    ],
)
def test_bad_cassandra_urls(bad: str) -> None:
    with pytest.raises(ConfigurationError):
        open_backend(bad)


@pytest.fixture
def backend() -> Iterator[CassandraBackend]:
    opened = open_backend(url())
    assert isinstance(opened, CassandraBackend)
    yield opened
    opened.close()


def _tombstones_per_read(backend: CassandraBackend, table: str) -> float:
    """The most tombstone cells one read of ``table`` scanned (the node's own metric)."""
    row = backend.store.session.execute(
        "SELECT max FROM system_views.tombstones_per_read "
        "WHERE keyspace_name = %s AND table_name = %s",
        (backend.store.ks, table),
    ).one()
    return float(row.max)


def test_draining_a_backlog_does_not_reread_consumed_messages() -> None:
    address = url()
    first, second = open_backend(address), open_backend(address)
    assert isinstance(first, CassandraBackend) and isinstance(second, CassandraBackend)
    try:
        now = first.now_ms()
        # a backlog built up over the last 3 s: a message due each millisecond (all due at
        # one instant, a fast drain stays inside the read margin, which re-reads what the
        # last 250 ms consumed by design, and the count measured the drain's speed)
        messages = [
            Envelope(f"m{i}", "q", None, 0, now - 3000 + i, 60_000, b"x" * 50) for i in range(3000)
        ]
        first.messages.enqueue(messages)
        drained = 0
        for turn in range(100):  # two consumers take turns: the read position is shared
            backend = (first, second)[turn % 2]
            claims = backend.leases.claim("q", 100).claims
            drained += len(claims)
            assert backend.leases.ack([(c, None) for c in claims]) == [True] * len(claims)
            if drained == len(messages):
                break
        assert drained == len(messages)
        assert first.leases.claim("q", 100).claims == []
        # 3,000 consumed rows: a read starting before them would scan them all. The
        # sweep's trailing window (rows written behind the read position) re-reads the
        # last slice consumed: with 3,000 rows in ~100 ms that slice has crossed
        # Cassandra's warning (1,000) in some runs, up to 1,331 seen; never the backlog
        assert _tombstones_per_read(first, "queue_messages") < len(messages) / 2
        assert _tombstones_per_read(first, "lease_deadlines") < 1000
    finally:
        first.close()
        second.close()


def test_a_row_written_behind_the_read_position_is_still_delivered(
    backend: CassandraBackend,
) -> None:
    now = backend.now_ms()
    backend.messages.enqueue([Envelope("first", "q", None, 0, now, 60_000, b"x")])
    assert [c.id for c in backend.leases.claim("q", 10).claims] == ["first"]
    time.sleep(0.5)
    assert backend.leases.claim("q", 10).claims == []  # the read position is now past `now`
    # a write that took seconds to land: its row is older than the read position
    backend.store.ready_ms = lambda due_ms: due_ms  # type: ignore[method-assign]
    backend.messages.enqueue([Envelope("late", "q", None, 0, now + 1, 60_000, b"x")])
    stored = backend.messages.get("late", "q")
    assert stored is not None and stored.envelope.due_ms == now + 1
    assert backend.leases.claim("q", 10).claims == [], "the row is behind the read position"
    found: list[str] = []
    deadline = time.monotonic() + 30
    while not found and time.monotonic() < deadline:
        found = [c.id for c in backend.leases.claim("q", 10).claims]
        time.sleep(0.2)
    assert found == ["late"], "the sweep picks up rows that landed behind the position"


def test_a_long_waiting_oldest_message_is_not_starved_by_higher_priorities(
    backend: CassandraBackend,
) -> None:
    backend.store.ready_ms = lambda due_ms: due_ms  # type: ignore[method-assign]
    now = backend.now_ms()
    backend.messages.enqueue(
        [Envelope("old-low", "q", None, 0, now - 20_000, 60_000, b"x")]
        + [Envelope(f"high{i}", "q", None, 9, now - 1_000, 60_000, b"x") for i in range(5)]
    )
    ids = [c.id for c in backend.leases.claim("q", 3).claims]
    assert ids[:2] == ["high0", "high1"] and ids[2] == "old-low"
    # fresher low-priority messages still wait for higher ones
    backend.messages.enqueue([Envelope("new-low", "q", None, 0, now - 500, 60_000, b"x")])
    assert [c.id for c in backend.leases.claim("q", 3).claims] == ["high2", "high3", "high4"]


def test_a_message_written_after_the_lock_was_taken_is_claimed_once(
    backend: CassandraBackend,
) -> None:
    backend.store.meta("q")
    state = backend.store.lock("q", 0)
    assert state is not None
    time.sleep(0.01)  # the producer stamps its write after the fence
    backend.messages.enqueue([Envelope("m", "q", None, 0, backend.now_ms(), 60_000, b"x")])
    claims, after, _ = backend.leases._claiming._claim_shard("q", 0, state, 10, 0)
    backend.store.unlock("q", 0, after)
    assert [c.id for _, c in claims] == ["m"]
    assert backend.leases.claim("q", 10).claims == [], "the claim's delete must win"


def _write_row_alone(
    backend: CassandraBackend, e: Envelope, ts: int, ready_ms: int, indexed: bool = True
) -> None:
    """``e``'s pending row (and index row) without the rest of its batch: what a claim can
    read while a logged batch lands, atomic but not isolated."""
    store = backend.store
    shard = store.shard(e.queue, e.id, e.key)
    bucket = store.bucket(e.queue, ready_ms)
    row = (e.queue, bucket, shard, ready_ms, e.id, e.due_ms, e.priority, e.key, e.timeout_ms)
    store.run(store.prepare(cql.INSERT_PENDING), (*row, 0, e.body, None, ts))
    if indexed:
        store.run(store.prepare(cql.INSERT_INDEX), (e.queue, e.id, bucket, shard, ready_ms, ts))


def _claimed(backend: CassandraBackend, wanted: str) -> list[str]:
    deadline = time.monotonic() + 10
    found: list[str] = []
    while wanted not in found and time.monotonic() < deadline:
        found += [c.id for c in backend.leases.claim("q", 10).claims]
        time.sleep(0.05)
    return found


@pytest.mark.parametrize("before", ["no key row", "the previous holder", "no index row"])
def test_a_row_whose_batch_is_still_landing_is_left_for_a_later_claim(
    backend: CassandraBackend, before: str
) -> None:
    """A claim that reads a message's row before its key row (or, for a row stored later
    than due, its index row) neither runs it nor deletes it as an orphan: it was lost when
    a worker claimed while a keyed message was enqueued (2 in 3,000 under load)."""
    store = backend.store
    now = backend.now_ms()
    if before == "the previous holder":  # an occurrence being acked writes the next one
        backend.messages.enqueue([Envelope("previous", "q", "k", 0, now, 60_000, b"x")])
        assert [c.id for c in backend.leases.claim("q", 10).claims] == ["previous"]
    key = None if before == "no index row" else "k"
    now = backend.now_ms()  # ahead of the read position the claim above left
    late = before == "no index row"  # written a second late: stored as ready now
    message = Envelope("m", "q", key, 0, now - 1_000 if late else now, 60_000, b"x")
    ready = now
    _write_row_alone(backend, message, store.now_us(), ready, indexed=before != "no index row")
    assert backend.leases.claim("q", 10).claims == [], "neither run before its batch landed"
    assert backend.leases.claim("q", 10).claims == [], "... nor deleted"
    # the rest of the batch lands
    if key is None:
        shard = store.shard("q", "m", None)
        bucket = store.bucket("q", ready)
        index = ("q", "m", bucket, shard, ready, store.now_us())
        store.run(store.prepare(cql.INSERT_INDEX), index)
    else:
        store.run(
            store.prepare(cql.INSERT_KEY),
            ("q", store.key_shard("q", key), key, "m", store.now_us()),
        )
    assert _claimed(backend, "m") == ["m"]


@pytest.mark.parametrize("orphan", ["key taken after it", "written long ago"])
def test_an_orphaned_row_is_deleted_unrun(backend: CassandraBackend, orphan: str) -> None:
    """A row whose key was given to another message after it was written (a replace
    racing a claim), or whose key row is still missing 20 s after it, never runs."""
    store = backend.store
    now = backend.now_ms()
    message = Envelope("m", "q", "k", 0, now, 60_000, b"x")
    written = store.now_us() - (21_000_000 if orphan == "written long ago" else 0)
    _write_row_alone(backend, message, written, now)
    if orphan == "key taken after it":
        store.run(
            store.prepare(cql.INSERT_KEY),
            ("q", store.key_shard("q", "k"), "k", "other", store.now_us()),
        )
    assert backend.leases.claim("q", 10).claims == []
    assert backend.messages.get("m", "q") is None, "deleted by the claim"


def test_expiry_after_a_pause_reads_acked_deadlines_in_slices(backend: CassandraBackend) -> None:
    now = backend.now_ms()
    backend.messages.enqueue(
        [Envelope(f"m{i}", "q", None, 0, now, 2_000, b"x") for i in range(2000)]
    )
    acked = 0
    while claims := backend.leases.claim("q", 50).claims:
        acked += sum(backend.leases.ack([(c, None) for c in claims]))
    assert acked == 2000
    time.sleep(2.5)  # no claims while the acked leases' deadlines pass
    assert backend.leases.claim("q", 50).claims == []
    # the 2,000 deadlines lie, as tombstones, in the range the next expiry read covers;
    # one read over all of them would scan 6,000 cells
    assert _tombstones_per_read(backend, "lease_deadlines") < 1000


def test_a_message_too_large_for_a_batch_is_one_clear_error(backend: CassandraBackend) -> None:
    now = backend.now_ms()
    small = Envelope("small", "q", None, 0, now, 60_000, b"x")
    large = Envelope("large", "q", None, 0, now, 60_000, b"x" * (MAX_BODY_BYTES + 1))
    with pytest.raises(InvalidMessage, match="'large' is larger than"):
        backend.messages.enqueue([small, large])
    assert backend.messages.get("small", "q") is None, "nothing of the call was written"
    fit = [Envelope(f"fit{i}", "q", None, 0, now, 60_000, b"x" * MAX_BODY_BYTES) for i in range(3)]
    assert (
        backend.messages.enqueue([small, *fit]) == [Outcome.ENQUEUED] * 4
    )  # batches stay < 50 KiB
    claims = backend.leases.claim("q", 10).claims
    assert sorted(c.id for c in claims) == ["fit0", "fit1", "fit2", "small"]
    assert backend.leases.ack([(c, None) for c in claims]) == [True] * 4


def test_a_lock_taken_by_a_timed_out_transaction_is_used_not_left_blocking(
    backend: CassandraBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend.messages.enqueue([Envelope("m", "q", None, 0, backend.now_ms(), 60_000, b"x")])
    assert [c.id for c in backend.leases.claim("q", 10).claims] == ["m"]  # the lock row exists
    backend.messages.enqueue([Envelope("n", "q", None, 0, backend.now_ms(), 60_000, b"x")])
    run = backend.store.run

    def applied_but_timed_out(statement: Any, params: Any = None, **kwargs: Any) -> Any:
        result = run(statement, params, **kwargs)
        if "IF fence = ?" in str(getattr(statement, "query_string", "")) and "owner = ?" in str(
            statement.query_string
        ):
            raise BackendError("timed out") from WriteTimeout(
                "Paxos timed out",
                consistency=ConsistencyLevel.SERIAL,
                required_responses=1,
                received_responses=0,
                write_type=WriteType.CAS,
            )
        return result

    monkeypatch.setattr(backend.store, "run", applied_but_timed_out)
    assert [c.id for c in backend.leases.claim("q", 10).claims] == ["n"]


@pytest.mark.parametrize("lag_ms", [0, 1_000])
@pytest.mark.parametrize("action", ["cancel", "replace"])
def test_a_cancel_or_replace_racing_an_ack_wins(action: str, lag_ms: int) -> None:
    """The ack reads the lease, then writes the next occurrence just above the claim's
    fence; a cancel (or a replace) landing between the two, injected here against the real
    node, must win even when its client's clock lags the fence (``lag_ms``): the schedule
    does not come back and the next occurrence the ack wrote never runs."""
    address = url()
    backend = open_backend(address)
    other = open_backend(address)
    other.store.offset_ms -= lag_ms  # type: ignore[attr-defined]
    try:
        now = backend.now_ms()
        backend.messages.enqueue([Envelope("c.0", "q", "K", 0, now, 60_000, b"x")])
        (claim,) = backend.leases.claim("q", 10).claims
        read_leases = backend.store.held_many  # type: ignore[attr-defined]
        replacement = Envelope("r.0", "q", "K", 0, now + 3_600_000, 60_000, b"y")

        def leases_then_race(claims: Any) -> Any:
            found = read_leases(claims)
            if action == "cancel":  # lands between the ack's read and its write
                assert other.messages.delete_by_key("q", "K")
            else:
                assert other.messages.enqueue([replacement], OnConflict.REPLACE) == [
                    Outcome.REPLACED
                ]
            return found

        backend.store.held_many = leases_then_race  # type: ignore[attr-defined]
        nxt = Envelope("c.1", "q", "K", 0, now, 60_000, b"x")
        assert backend.leases.ack([(claim, nxt)]) == [True]
        backend.store.held_many = read_leases  # type: ignore[attr-defined]
        holder = backend.messages.get_by_key("q", "K")
        if action == "cancel":
            assert holder is None, "the ack's next occurrence outlived the cancel"
        else:
            assert holder is not None and holder.envelope.id == "r.0", holder
        deadline = time.monotonic() + 30  # the occurrence left behind is dropped unrun
        while backend.messages.get("c.1", "q") is not None:
            assert time.monotonic() < deadline, "the occurrence left behind stayed"
            assert [c.id for c in backend.leases.claim("q", 10).claims] == []
            time.sleep(0.1)
    finally:
        other.close()
        backend.close()


def test_a_cancel_racing_a_claim_leaves_no_lease_to_run() -> None:
    """A claim reads a pending row, then writes its lease; a cancel landing in between
    (it finds the message pending) also deletes the lease, above the shard's fence, so
    the claim's lease never holds and a parked claim is dropped, not run (a parked
    message cancelled in time ran under load before)."""
    address = url()
    backend = open_backend(address)
    other = open_backend(address)
    assert isinstance(backend, CassandraBackend)
    try:
        now = backend.now_ms()
        backend.messages.enqueue([Envelope("m", "q", None, 0, now + 10_000, 60_000, b"x")])
        store = backend.store
        write = store.execute_many

        def cancel_then_write(batches: Any) -> Any:
            assert other.messages.delete("m", "q"), "the cancel found the message"
            return write(batches)

        store.execute_many = cancel_then_write  # type: ignore[method-assign,assignment]
        state = store.lock("q", 0)
        assert state is not None
        claims, after, _ = backend.leases._claiming._claim_shard("q", 0, state, 10, 20_000)
        store.execute_many = write  # type: ignore[method-assign]
        store.unlock("q", 0, after)
        assert [c.id for _, c in claims] == ["m"], "claimed into the lookahead"
        assert backend.leases.extend([c for _, c in claims], 60_000) == [False]
        assert backend.messages.get("m", "q") is None
    finally:
        other.close()
        backend.close()


def test_a_schedule_listing_follows_a_chain_acked_between_its_reads() -> None:
    """``keyed`` reads the key index, then the messages it names: an ack moving the
    chain on in between (injected) must not make the schedule vanish from the listing."""
    backend = open_backend(url())
    assert isinstance(backend, CassandraBackend)
    try:
        now = backend.now_ms()
        backend.messages.enqueue([Envelope("c.0", "q", "K", 0, now, 60_000, b"x")])
        (claim,) = backend.leases.claim("q", 10).claims
        read = backend.store.stored_many
        nxt = Envelope("c.1", "q", "K", 0, now + 60_000, 60_000, b"x")

        def ack_then_read(queue: str, ids: list[str]) -> Any:
            if "c.0" in ids:
                assert backend.leases.ack([(claim, nxt)]) == [True]
            return read(queue, ids)

        backend.store.stored_many = ack_then_read  # type: ignore[method-assign]
        listed = backend.messages.keyed("q")
        backend.store.stored_many = read  # type: ignore[method-assign]
        assert [m.envelope.id for m in listed] == ["c.1"]
    finally:
        backend.close()


def test_a_failed_concurrent_read_is_a_backend_error() -> None:
    """Reads run concurrently (the driver's ``execute_concurrent``) raised the driver's
    own exception on a failure, which callers that catch ``BackendError`` (a producer,
    the worker's loops) did not expect; a table gone under the backend shows it."""
    backend = open_backend(url())
    assert isinstance(backend, CassandraBackend)
    now = backend.now_ms()
    backend.messages.enqueue([Envelope("m1", "q", None, 0, now, 60_000, b"x")])
    # a schema change waits for the node to agree: longer than the driver's default
    # 10 s on a loaded machine
    backend.store.session.execute(f"DROP TABLE {backend.store.ks}.message_index", timeout=120)
    with pytest.raises(BackendError, match="Cassandra error"):
        backend.messages.enqueue([Envelope("m2", "q", None, 0, now, 60_000, b"x")])
    backend.close()


def test_a_statement_that_cannot_be_prepared_is_a_backend_error() -> None:
    """Statements are prepared at their first use, which can fall while the node is down
    (the activity log's first write, an abort check of a new size): the driver's own
    exception there stopped a worker's thread. A session closed under the backend shows
    it: preparing a statement not seen before fails as ``BackendError``."""
    backend = open_backend(url())
    assert isinstance(backend, CassandraBackend)
    backend.store.cluster.shutdown()
    with pytest.raises(BackendError, match="Cassandra"):
        backend.store.prepare("SELECT id FROM message_index WHERE queue = ? AND id IN (?, ?, ?)")
    backend.close()
