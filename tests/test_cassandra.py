"""Cassandra-specific behaviour on a real node: shard-lock holder death, schema, errors."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from scheduler import BackendUnavailable, ConfigurationError, open_backend
from scheduler.backends import Envelope
from tests.backends import Servers
from tests.servers import free_port
from tickwork.cli import cli

ROOT = Path(__file__).resolve().parents[1]


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
    backend.enqueue([Envelope(f"m{i}", "q", None, 0, now, 60_000, b"x") for i in range(50)])
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from scheduler import open_backend; "
            f"b = open_backend({address!r}); assert b._lock('q', 0) is not None; "
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
        assert backend.claim("q", 100).claims == [], "the shard is locked by the dead consumer"
        claims = []
        while not claims and time.monotonic() - locked_at < 30:
            time.sleep(0.25)
            claims = backend.claim("q", 100).claims
        waited = time.monotonic() - locked_at
        assert len(claims) == 50, "after the lock TTL another consumer takes the whole shard"
        assert waited >= 1.0
        assert backend.ack([(c, None) for c in claims]) == [True] * 50
        stats = backend.stats("q")[0]
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
    assert backend.stats() == []
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
