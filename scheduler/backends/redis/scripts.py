"""The Redis backend's Lua scripts (``lua/*.lua``, shipped as package data) and the stored
record format they share with Python.

Every state change of a shard is one script call: the script touches the keys of one
shard only (one hash tag, so one Redis Cluster slot) and reads the time from the server
(``TIME``), so worker clocks never decide when something is due or when a lease ends.
``lua/prelude.lua`` names the fifteen keys of a shard (``SHARD_KEYS``, passed in that
order to every shard script) and holds the helpers; it is prepended to each script. The
``slot_*`` scripts touch the keys of one concurrency limit instead (its own hash tag), and
``rate_reserve`` the start log of one rate limit, the ``batch_*`` scripts the two
keys of one batch, and ``ledger_append`` one ledger. Each
script's header lists the keys it uses and its ``ARGV``.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

from redis.commands.core import Script
from redis.exceptions import NoScriptError

from tickwork.scheduler.backends.base import Envelope
from tickwork.scheduler.backends.redis.wire import send_commands
from tickwork.scheduler.errors import BackendError, BackendFull

#: one script call: (script name, keys, args)
Call = tuple[str, list[str], list[Any]]

#: suffixes of a shard's keys, in ``KEYS`` order (see ``lua/prelude.lua``)
#: the fields of a shard's counters hash that are fair-share state, not counters
FAIR_STATE = b"fair_"

SHARD_KEYS = ("m", "s", "r", "l", "t", "a", "e", "k", "pm", "pf", "pz", "c", "b", "f", "w")
MESSAGES, SCHEDULED, READY, LEASED = 0, 1, 2, 3
KEYS, POISON_RECORDS, POISON_FAILURES, POISON_TIMES, COUNTERS, BOUND = 7, 8, 9, 10, 11, 12

SCRIPT_NAMES = (
    "enqueue",
    "claim",
    "ack",
    "retry",
    "release",
    "extend",
    "poison",
    "poison_replay",
    "poison_delete",
    "delete",
    "delete_by_key",
    "wake",
    "slot_acquire",
    "slot_wait",
    "slot_release",
    "slot_extend",
    "rate_reserve",
    "batch_open",
    "batch_settle",
    "ledger_append",
    "oldest_ready",
)


def _source(name: str) -> str:
    return files(__package__).joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


#: the scripts that add what a producer or an operator asks (messages, batches, records):
#: refused whole by a Redis over its ``maxmemory`` before any of their commands runs
#: (its policy ``noeviction``); every other script, a worker's, may run over it: a claim,
#: an ack or a release mostly frees memory, and workers draining the queues is the way
#: out of a full server (Redis 7's script flags: ``allow-oom``)
GROWING = frozenset({"enqueue", "batch_open", "ledger_append", "poison_replay"})


def load_scripts() -> dict[str, str]:
    """Script name -> full Lua source: its flags (a growing script none: refused whole
    when Redis is out of memory, instead of failing at its first write that needs
    memory, after writes before it were made), the prelude, then the script."""
    prelude = _source("prelude")
    return {
        name: ("#!lua\n" if name in GROWING else "#!lua flags=allow-oom\n")
        + prelude
        + "\n"
        + _source(name)
        for name in SCRIPT_NAMES
    }


def encode_record(e: Envelope) -> bytes:
    """The stored form of a message: a small header, the key, then the body; with a
    concurrency limit, ``c<length>|<limit key>`` before that, and with a fair-share key
    ``f<length>|<fair key>`` first."""
    key = (e.key or "").encode()
    record = b"%d|%d|%d|%d|%s%s" % (e.priority, e.timeout_ms, e.due_ms, len(key), key, e.body)
    if e.limit is not None:
        limit = e.limit.encode()
        record = b"c%d|%s%s" % (len(limit), limit, record)
    if e.fair is None:
        return record
    fair = e.fair.encode()
    return b"f%d|%s%s" % (len(fair), fair, record)


def priority_arg(e: Envelope) -> int | str:
    """A script's priority argument: the priority, and when ``e`` has one the time it is
    promoted if still waiting ("<priority>w<ms>": ``priority_of`` in the prelude)."""
    return e.priority if e.promote_ms is None else f"{e.priority}w{e.promote_ms}"


#: a stored record read back: (priority, timeout_ms, due_ms, key, body, fair key, limit key)
Record = tuple[int, int, int, str | None, bytes, str | None, str | None]


def decode_record(record: bytes) -> Record:
    """The fields of a stored record. One that is not a record reads as the Lua prelude's
    ``parse`` reads it: a keyless message due long ago whose body is the whole record
    (the worker poisons it as undecodable)."""
    fair, rest = _tagged(b"f", record)
    limit, rest = _tagged(b"c", rest)
    fields = rest.split(b"|", 4)
    try:
        priority, timeout, due, key_length = (int(f) for f in fields[:4])
        tail = fields[4]
    except (ValueError, IndexError):
        return 0, 60_000, 0, None, record, None, None
    key = tail[:key_length].decode() if key_length else None
    return priority, timeout, due, key, tail[key_length:], fair, limit


def stored_envelope(message_id: str, queue: str, record: bytes) -> Envelope:
    """The envelope of message ``message_id`` of ``queue`` from its stored record."""
    priority, timeout, due, key, body, fair, limit = decode_record(record)
    return Envelope(message_id, queue, key, priority, due, timeout, body, fair, limit)


def _tagged(tag: bytes, record: bytes) -> tuple[str | None, bytes]:
    """The value of a ``<tag><length>|<value>`` prefix of ``record`` (None if it has
    none) and what follows it."""
    if not record.startswith(tag):
        return None, record
    length, _, tail = record[1:].partition(b"|")
    if not length.isdigit():
        return None, record
    return tail[: int(length)].decode(errors="replace"), tail[int(length) :]


def evalsha_round_trip(
    client: Any,
    scripts: dict[str, Script],
    calls: list[Call],
    wait: tuple[int, int] | None = None,
) -> tuple[list[Any], int | None]:
    """``calls`` pipelined in one round trip on one connection (``EVALSHA`` sent as is:
    redis-py's own script pipelining first asks whether the scripts exist, a second
    round trip every time), then ``WAIT replicas timeout_ms`` if ``wait`` is given;
    returns the replies (errors in place) and the replicas that acknowledged (None
    without ``wait``). Calls a server answers ``NOSCRIPT`` (it restarted, or is a
    promoted replica) did not run: the scripts are loaded and those calls, only those,
    sent again (with a ``WAIT`` of their own)."""
    *replies, acknowledged = _pipeline(client, scripts, calls, wait)
    missing = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
    if missing:
        for script in scripts.values():
            client.script_load(script.script)
        *again, acknowledged = _pipeline(client, scripts, [calls[i] for i in missing], wait)
        for i, reply in zip(missing, again, strict=True):
            replies[i] = reply
    if isinstance(acknowledged, Exception):
        raise BackendError(f"Redis refused WAIT: {acknowledged}") from acknowledged
    return replies, None if wait is None else int(acknowledged)


def raise_errors(replies: list[Any]) -> list[Any]:
    """``replies``, once none of them is an error (the first one raised as a
    ``BackendError``)."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise redis_error(reply) from reply
    return replies


def redis_error(error: Exception) -> BackendError:
    """A Redis error reply in tickwork's words: ``BackendFull`` when the server is out of
    memory (the write was refused whole), else a ``BackendError`` quoting it."""
    text = str(error)
    if "maxmemory" in text or text.startswith("OOM"):
        return BackendFull(
            "Redis is out of memory (its used memory is over maxmemory and its policy "
            "evicts nothing): this write was refused and nothing of it was stored; "
            "workers draining the queues free memory, or raise maxmemory"
        )
    return BackendError(f"Redis error: {text}")


def _pipeline(
    client: Any, scripts: dict[str, Script], calls: list[Call], wait: tuple[int, int] | None
) -> list[Any]:
    """The replies to ``calls``, then ``WAIT``'s (None without ``wait``): sent on a pooled
    connection directly, or through redis-py's pipeline (whose retries reconnect) when
    that connection failed."""
    commands: list[tuple[Any, ...]] = [
        ("EVALSHA", scripts[name].sha, len(keys), *keys, *args) for name, keys, args in calls
    ]
    if wait is not None:
        commands.append(("WAIT", *wait))
    replies = send_commands(client, commands)
    if replies is None:
        pipe = client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        replies = list(pipe.execute(raise_on_error=False))
    return replies if wait is not None else [*replies, None]
