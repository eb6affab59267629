"""Redis faults: kill -9 the server mid-run (appendfsync always), restart it, lose nothing."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.helpers import (
    completed,
    enqueue_records,
    start_record_worker,
    stop_workers,
    wait_until,
)
from tests.support.servers import RedisServer, free_port, redis_cli
from tickwork.scheduler import (
    App,
    BackendError,
    BackendFull,
    BackendUnavailable,
    ConfigurationError,
    open_backend,
)
from tickwork.scheduler.ids import stable_shard

N = 2000


def test_kill_9_the_server_mid_run_loses_nothing(tmp_path: Path, clean_env: dict[str, str]) -> None:
    server = RedisServer("--appendonly", "yes", "--appendfsync", "always", folder=tmp_path)
    url = server.url + "?prefix=durable"
    done = tmp_path / "done.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_DONE": str(done)}
    worker: subprocess.Popen[bytes] | None = None
    try:
        enqueue_records(url, range(N))
        worker = start_record_worker(env, tmp_path / "worker.log")
        assert wait_until(lambda: sum(completed(done).values()) >= N // 3, 60), "worker stalled"
        server.kill()
        before_restart = completed(done)
        assert len(before_restart) < N, "the kill must land mid-run"
        time.sleep(1.0)
        server.start()
        enqueue_records(url, range(N, N + 500))  # the restarted server takes new work at once
        assert wait_until(lambda: len(completed(done)) == N + 500, 120), (
            f"lost messages: {N + 500 - len(completed(done))} never ran; "
            f"log: {(tmp_path / 'worker.log').read_text()[-2000:]}"
        )
        assert worker.poll() is None, "the worker must survive the outage"
        backend = open_backend(url)
        assert wait_until(lambda: backend.queues.stats("default")[0].in_flight == 0, 30)
        stats = backend.queues.stats("default")[0]
        assert (stats.ready, stats.scheduled, stats.poison) == (0, 0, 0)
        backend.close()
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
        server.stop()
    runs = completed(done)
    assert set(runs) == set(range(N + 500))
    duplicates = sum(runs.values()) - (N + 500)
    # only messages held by the worker when the server died may run twice: acks are durable
    assert duplicates <= 4 + 8, (duplicates, len(before_restart))


def test_unreachable_server_is_one_clear_error() -> None:
    port = free_port()
    with pytest.raises(BackendUnavailable, match=f"127.0.0.1:{port}"):
        open_backend(f"redis://127.0.0.1:{port}/0")


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:6379/0?shards=zero", "redis://127.0.0.1:6379/0?shards=0"]
)
def test_bad_redis_options(url: str) -> None:
    with pytest.raises(ConfigurationError):
        open_backend(url)


def test_password_and_acl_user_from_the_url(tmp_path: Path) -> None:
    server = RedisServer("--requirepass", "s3cret", folder=tmp_path)
    try:
        subprocess.run(
            [
                "redis-cli",
                "-p",
                str(server.port),
                "-a",
                "s3cret",
                "--no-auth-warning",
                "ACL",
                "SETUSER",
                "worker",
                "on",
                ">pw",
                "~*",
                "&*",
                "+@all",
            ],
            check=True,
            capture_output=True,
        )
        for creds in (":s3cret@", "worker:pw@"):
            backend = open_backend(f"redis://{creds}127.0.0.1:{server.port}/0")
            assert backend.now_ms() > 0
            backend.close()
        with pytest.raises(BackendUnavailable):
            open_backend(f"redis://worker:wrong@127.0.0.1:{server.port}/0")
    finally:
        server.stop()


def test_pipelined_scripts_survive_a_server_that_lost_them() -> None:
    """After SCRIPT FLUSH (what a restart does) a pipelined batch is sent again, once: the
    calls the server refused with NOSCRIPT, and only those."""
    import redis

    from tickwork.scheduler.backends import Envelope, Outcome

    server = RedisServer()
    try:
        backend = open_backend(server.url)
        now = backend.now_ms()
        first = [Envelope(f"a{i}", f"q{i}", None, 0, now, 5000, b"x") for i in range(3)]
        assert backend.messages.enqueue(first) == [Outcome.ENQUEUED] * 3  # loads the scripts
        redis.Redis.from_url(server.url).script_flush()
        again = [Envelope(f"b{i}", f"q{i}", None, 0, now, 5000, b"x") for i in range(3)]
        assert backend.messages.enqueue(again) == [Outcome.ENQUEUED] * 3, "each written once"
        claims = [c for i in range(3) for c in backend.leases.claim(f"q{i}", 10).claims]
        assert sorted(c.id for c in claims) == ["a0", "a1", "a2", "b0", "b1", "b2"]
        backend.close()
    finally:
        server.stop()


def test_a_single_script_call_survives_lost_scripts_and_killed_connections() -> None:
    """One script call goes straight through a pooled connection (``wire.py``): after
    SCRIPT FLUSH it loads the script and runs the call once; after the server closed the
    client's connections it reconnects; an error reply is still one clear error."""
    import redis

    from tickwork.scheduler.backends import Envelope, Outcome

    server = RedisServer()
    try:
        backend = open_backend(server.url)
        admin = redis.Redis.from_url(server.url)
        now = backend.now_ms()
        assert backend.messages.enqueue([Envelope("a", "q", None, 0, now, 5000, b"x")]) == [
            Outcome.ENQUEUED
        ]
        admin.script_flush()
        assert backend.messages.enqueue([Envelope("b", "q", None, 0, now, 5000, b"x")]) == [
            Outcome.ENQUEUED
        ]
        admin.client_kill_filter(_type="normal", skipme=True)
        assert backend.messages.enqueue([Envelope("c", "q", None, 0, now, 5000, b"x")]) == [
            Outcome.ENQUEUED
        ]
        claims = backend.leases.claim("q", 10).claims
        assert sorted(c.id for c in claims) == ["a", "b", "c"], "each written once"
        assert backend.leases.ack([(c, None) for c in claims]) == [True] * 3
        (stats,) = backend.queues.stats("q")
        assert stats.counters["enqueued"] == 3 and stats.counters["acked"] == 3
        admin.set("{tw:q:0}:m", "not a hash")  # the script's HSETNX now fails
        with pytest.raises(BackendError, match="WRONGTYPE"):
            backend.messages.enqueue([Envelope("d", "q", None, 0, now, 5000, b"x")])
        backend.close()
    finally:
        server.stop()


def test_script_calls_that_time_out_go_again_on_a_new_connection() -> None:
    """Script calls whose replies do not come within the socket timeout (the server
    pauses writers for 0.7 s) are sent again through redis-py's retries and stored once:
    one call, and a pipelined round of two (a queue of two shards)."""
    import redis

    from tickwork.scheduler.backends import Envelope, Outcome

    server = RedisServer()
    try:
        backend = open_backend(server.url + "?socket_timeout=0.2&shards=2")
        admin = redis.Redis.from_url(server.url)
        now = backend.now_ms()

        def message(i: int) -> Envelope:
            return Envelope(f"m{i}", "q", None, 0, now, 5000, b"x")

        by_shard: dict[int, list[int]] = {0: [], 1: []}
        for i in range(40):
            by_shard[stable_shard(f"m{i}", 2)].append(i)
        (a0, a1, *_), (b0, *_) = by_shard[0], by_shard[1]
        assert backend.messages.enqueue([message(i) for i in range(40) if i not in (a0, a1, b0)])
        for batch in ([a0], [a1, b0]):  # one script call, then a pipelined round of two
            connections = admin.info("stats")["total_connections_received"]
            admin.client_pause(700, all=False)
            outcomes = backend.messages.enqueue([message(i) for i in batch])
            assert set(outcomes) <= {Outcome.ENQUEUED, Outcome.DUPLICATE}
            reconnected = admin.info("stats")["total_connections_received"] - connections
            assert reconnected >= 1, "the timed-out connection was closed and another made"
        claimed = [c.id for c in backend.leases.claim("q", 100).claims]
        assert sorted(claimed) == sorted(f"m{i}" for i in range(40)), "each stored once"
        backend.close()
    finally:
        server.stop()


def test_redis_out_of_memory_refuses_writes_whole_and_workers_drain_it(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """Redis at ``maxmemory`` with ``noeviction``: an enqueue is refused whole with one
    clear error (``BackendFull``), a replace does not lose the message it would replace,
    and a worker keeps running: it drains the queue (claims and acks may go over the
    bound: they free memory), after which the refused writes go through. Nothing
    acknowledged is lost."""
    from tests.support.crash_tasks import app, record

    server = RedisServer("--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
    url = server.url
    done = tmp_path / "done.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_DONE": str(done)}
    app.use_backend(url)
    worker: subprocess.Popen[bytes] | None = None
    try:
        record.schedule([-1], key="kept", delay=3600)  # a keyed message, replaced later
        acked: list[int] = []
        refused: list[int] = []
        chunk = 200
        for start in range(0, 100_000, chunk):
            numbers = list(range(start, start + chunk))
            try:
                app.enqueue_many([record.call(n, _pad()) for n in numbers])
            except BackendFull as err:
                assert "out of memory" in str(err) and "nothing of it was stored" in str(err)
                refused = numbers
                break
            acked += numbers
        assert refused, "Redis never filled"
        assert _pending(app) == len(acked) + 1, "a refused batch wrote part of itself"
        stored = sum(int(redis_cli(server.port, "HLEN", m)) for m in _records(server.port))
        assert stored == len(acked) + 1, "records of a refused batch were left, unqueued"
        with pytest.raises(BackendFull):
            record.schedule([-2], key="kept", delay=3600, on_conflict="replace")
        kept = app.get(key="kept")
        assert kept is not None and kept.message.args == [-1], "the replace lost the message"
        worker = start_record_worker(env, tmp_path / "worker.log")
        deadline = time.monotonic() + 120
        while True:  # the producer retries what was refused until the worker made room
            try:
                app.enqueue_many([record.call(n, _pad()) for n in refused])
                break
            except BackendFull:
                assert time.monotonic() < deadline, "the worker never made room"
                time.sleep(0.2)
        everything = set(acked) | set(refused)
        assert wait_until(lambda: set(completed(done)) >= everything, 120), (
            f"lost: {len(everything - set(completed(done)))}; "
            f"log: {(tmp_path / 'worker.log').read_text()[-2000:]}"
        )
        assert worker.poll() is None, "the worker must live through the full server"
    finally:
        if worker is not None:
            stop_workers([worker])
        app.cancel(key="kept")
        app.close()
        server.stop()


def _pad() -> str:
    return "x" * 500  # each message takes about a kilobyte


def _records(port: int) -> list[str]:
    """The keys of the shards' message records (``{prefix:queue:shard}:m``)."""
    return [k for k in redis_cli(port, "KEYS", "*}:m").split() if k]


def _pending(app: App) -> int:
    return sum(s.ready + s.scheduled + s.in_flight for s in app.backend.queues.stats())
