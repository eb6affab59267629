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
import secrets


def new_chain_id(now_ms: int) -> str:
    """A fresh, time-ordered id for an unkeyed message."""
    return f"{now_ms:011x}{secrets.randbits(64):016x}"


def keyed_chain_id(queue: str, key: str) -> str:
    """The deterministic chain id of ``key`` in ``queue``."""
    digest = hashlib.blake2b(f"{queue}\x00{key}".encode(), digest_size=12).hexdigest()
    return f"k{digest}"


def occurrence_id(chain: str, occurrence: int) -> str:
    """The id of occurrence number ``occurrence`` of ``chain``."""
    return chain if occurrence == 0 else f"{chain}.{occurrence}"


def stable_shard(key: str, shards: int) -> int:
    """A shard for ``key`` that every process agrees on (unlike ``hash()``)."""
    digest = hashlib.blake2b(key.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % shards
