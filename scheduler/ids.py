"""Message ids.

- An unkeyed message gets a fresh time-ordered id: 11 hex digits of epoch milliseconds,
  then 16 random hex digits, so ids sort by creation time.
- A keyed message's id derives from (queue, key) alone, so enqueueing the same key twice
  (a Spark task retry, a replayed script) names the same message.
- Occurrence n of a recurring chain is ``{chain}.{n}`` (occurrence 0 is the chain id
  itself), so an ack that is delivered twice computes the same next id and cannot fork
  the chain.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading

_lock = threading.Lock()
_last = [0, 0]  # the last (milliseconds, random part) handed out by this process


def _forget_after_fork() -> None:
    _last[0] = _last[1] = 0  # a child must not continue its parent's sequence


os.register_at_fork(after_in_child=_forget_after_fork)


def new_chain_id(now_ms: int) -> str:
    """A fresh id for an unkeyed message, increasing within a process (monotonic ULID
    style: in the same millisecond the random part counts up), so a bulk insert appends
    to the index instead of splitting pages at random."""
    with _lock:
        if now_ms <= _last[0]:
            now_ms, random_part = _last[0], (_last[1] + 1) & 0xFFFF_FFFF_FFFF_FFFF
        else:
            random_part = secrets.randbits(63)
        _last[0], _last[1] = now_ms, random_part
    return f"{now_ms:011x}{random_part:016x}"


def keyed_chain_id(queue: str, key: str) -> str:
    """The deterministic chain id of ``key`` in ``queue``."""
    digest = hashlib.blake2b(f"{queue}\x00{key}".encode(), digest_size=12).hexdigest()
    return f"k{digest}"


def identity_chain_id(queue: str, identity: str) -> str:
    """The deterministic chain id of an unkeyed message with a caller-given identity."""
    digest = hashlib.blake2b(f"{queue}\x00{identity}".encode(), digest_size=12).hexdigest()
    return f"i{digest}"


def first_chain_id(queue: str, key: str | None, identity: str | None, now_ms: int) -> str:
    """The chain id of a call's first message in ``queue``: from its key, else from its
    identity, else a fresh one."""
    if key is not None:
        return keyed_chain_id(queue, key)
    if identity is not None:
        return identity_chain_id(queue, identity)
    return new_chain_id(now_ms)


def occurrence_id(chain: str, occurrence: int) -> str:
    """The id of occurrence number ``occurrence`` of ``chain``."""
    return chain if occurrence == 0 else f"{chain}.{occurrence}"


def stable_shard(key: str, shards: int) -> int:
    """A shard for ``key`` that every process agrees on (unlike ``hash()``)."""
    if shards == 1:
        return 0  # no hash to take (a Cassandra queue has one shard unless told)
    digest = hashlib.blake2b(key.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % shards
