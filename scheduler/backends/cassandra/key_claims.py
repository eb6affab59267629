"""One writer per free key on Cassandra: a keyed message written to a key nobody holds
(``IGNORE`` or ``ERROR``: the modes that keep a key's holder) first claims the key with a
lightweight transaction, so that writers racing for it (ten workers installing the same
``@app.periodic`` schedule at start) write it once.

Without it each writer reads "not taken" and writes; elsewhere the message's id (the same
for all of them: it comes from the key) makes the later writes duplicates, but a pending
row's place on Cassandra is its due time, and writers that compute the first due time on
either side of a grid point stored the same message at several places, each claimed and
run (``docs/reliability.md``, "Ten workers starting together").

The claim (``key_claims``: one row per key, ``IF NOT EXISTS``, with a TTL so that a writer
that dies holding it frees it) is taken after the key was read free, the key read again
once it is held (through the rereads of ``get_by_key``: a message moving between a claim
and its ack must not look absent), and let go once the write is made. A writer that
loses the race waits for the winner's message and takes it as the key's holder (its
write is then ``IGNORED``, or a ``KeyConflict``), or claims again if the winner let go
without writing. A claim costs one lightweight transaction (four round trips) per new key,
off the hot path: keyed writes of keys already held and replacements do not claim.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from tickwork.scheduler.backends.cassandra.rows import applied
from tickwork.scheduler.backends.cassandra.shard_lock import CassandraShardLock
from tickwork.scheduler.backends.values import Envelope, OnConflict
from tickwork.scheduler.errors import BackendError

#: seconds a claim lasts when its writer dies holding it
CLAIM_TTL_S = 30
#: how often a writer that lost a claim looks for the winner's message, and for how long
_LOOK_S, _LOOK_FOR_S = 0.05, 2 * CLAIM_TTL_S

TAKE = "INSERT INTO key_claims (queue, key, owner) VALUES (?, ?, ?) IF NOT EXISTS USING TTL ?"
LET_GO = "DELETE FROM key_claims WHERE queue = ? AND key = ? IF owner = ?"
HELD = "SELECT owner FROM key_claims WHERE queue = ? AND key = ?"

Holders = dict[tuple[str, str], tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class Claimed:
    """The keys one enqueue call claimed, as ``owner``."""

    keys: list[tuple[str, str]]
    owner: str


class KeyClaims:
    """Claims on the free keys of the messages one enqueue call writes."""

    def __init__(self, store: CassandraShardLock) -> None:
        self._store = store

    def claim(
        self, envelopes: Sequence[Envelope], holders: Holders, on_conflict: OnConflict
    ) -> Claimed:
        """Claim each free key of ``envelopes`` (not in ``holders``; under ``IGNORE`` or
        ``ERROR``), adding to ``holders`` the messages that hold them after all (another
        writer won the race, or wrote before the claim). Returns the keys claimed: the
        caller writes their messages, then lets go (``let_go``)."""
        owner = uuid.uuid4().hex
        if on_conflict not in (OnConflict.IGNORE, OnConflict.ERROR):
            return Claimed([], owner)
        free = {
            (e.queue, e.key): e
            for e in envelopes
            if e.key is not None and (e.queue, e.key) not in holders
        }
        claimed = Claimed([], owner)
        try:
            take = self._store.prepare(TAKE)
            args = [(queue, key, owner, CLAIM_TTL_S) for queue, key in free]
            results = self._store.concurrently(take, args)  # all at once: a bulk write's keys
            won = [at for at, result in zip(free, results, strict=True) if applied(result)]
            claimed.keys.extend(won)
            for queue, key in self._written_before(won, holders):
                claimed.keys.remove((queue, key))
                self.let_go(Claimed([(queue, key)], owner))
            for queue, key in free:
                if (queue, key) not in won and self._after_losing(queue, key, owner, holders):
                    claimed.keys.append((queue, key))
        except BaseException:
            self.let_go(claimed)
            raise
        return claimed

    def _written_before(
        self, won: list[tuple[str, str]], holders: Holders
    ) -> list[tuple[str, str]]:
        """Those of the keys just claimed that a message holds after all (written
        between the caller's read and the claim), added to ``holders``: the key index
        names every held key; a key it names is read whole (``get_by_key``)."""
        by_queue: dict[str, list[str]] = {}
        for queue, key in won:
            by_queue.setdefault(queue, []).append(key)
        taken = []
        for queue, keys in by_queue.items():
            for key in self._store.key_holders(queue, keys):
                holder = self._holder(queue, key)
                if holder is not None:
                    holders[(queue, key)] = holder
                    taken.append((queue, key))
        return taken

    def let_go(self, claimed: Claimed) -> None:
        """Let go of the keys ``claim`` took (their messages written, or not to be)."""
        if claimed.keys:
            statement = self._store.prepare(LET_GO)
            args = [(queue, key, claimed.owner) for queue, key in claimed.keys]
            self._store.concurrently(statement, args)

    def _after_losing(self, queue: str, key: str, owner: str, holders: Holders) -> bool:
        """Another writer holds ``key``'s claim: wait for its message and take it as the
        key's holder (False), or claim the key when that writer let go without writing
        (True once held with the key still free)."""
        deadline = time.monotonic() + _LOOK_FOR_S
        while time.monotonic() < deadline:
            holder = self._holder(queue, key)
            if holder is None and self._store.run(self._store.prepare(HELD), (queue, key)).one():
                time.sleep(_LOOK_S)  # still being written
                continue
            if holder is None:  # let go without writing: claim it again
                take = self._store.prepare(TAKE)
                if not applied(self._store.run(take, (queue, key, owner, CLAIM_TTL_S))):
                    continue  # another writer was quicker
                holder = self._holder(queue, key)
                if holder is None:
                    return True
                self.let_go(Claimed([(queue, key)], owner))  # written meanwhile
            holders[(queue, key)] = holder
            return False
        raise BackendError(
            f"key {key!r} of queue {queue!r} stayed claimed by another writer for "
            f"{_LOOK_FOR_S} s without its message appearing"
        )

    def _holder(self, queue: str, key: str) -> tuple[str, bytes] | None:
        stored = self._store.get_by_key(queue, key)
        return None if stored is None else (stored.envelope.id, stored.envelope.body)
