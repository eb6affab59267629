"""The SQLite backend's enqueue: one write transaction per call, a fast path for fresh
unkeyed messages (one ``executemany``), the careful path for keys, re-sends and replaces,
and the bound of each bounded queue checked in that same transaction (``bounds.py``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from scheduler.backends.base import Envelope, OnConflict, Outcome
from scheduler.backends.outcomes import WRITES, decide, refuse_taken_keys
from scheduler.backends.sqlite.bounds import SQLiteBounds
from scheduler.backends.sqlite.rows import initial_state


class SQLiteProducing(SQLiteBounds):
    """Stores messages."""

    def enqueue(
        self,
        envelopes: Sequence[Envelope],
        on_conflict: OnConflict = OnConflict.ERROR,
        bounded: bool = False,
    ) -> list[Outcome]:
        if not envelopes:
            return []
        now = self.now_ms()
        replace = on_conflict is OnConflict.REPLACE
        with self._write() as db:
            if not replace and all(e.key is None for e in envelopes):
                done = self._insert_fresh(db, envelopes, now, bounded)
                if done is not None:
                    return done
            room = self._room(db, envelopes) if bounded else {}
            holders = self._key_holders(db, envelopes)
            present = self._present_ids(db, [e.id for e in envelopes if e.key is None])
            refuse_taken_keys(envelopes, holders, on_conflict)
            outcomes: list[Outcome] = []
            rows = []
            per_queue: dict[str, int] = {}
            added: dict[str, int] = {}  # new messages (a replacement adds none)
            for e in envelopes:
                holder = holders.get((e.queue, e.key)) if e.key is not None else None
                outcome = decide(e, holder, e.id in present, on_conflict, room)
                outcomes.append(outcome)
                if outcome not in WRITES:
                    continue
                if outcome is Outcome.ENQUEUED:
                    added[e.queue] = added.get(e.queue, 0) + 1
                if e.key is not None:
                    holders[(e.queue, e.key)] = (e.id, e.body)
                else:
                    present.add(e.id)
                rows.append(
                    (
                        e.id,
                        e.queue,
                        e.key,
                        e.priority,
                        initial_state(e, now),
                        e.due_ms,
                        e.due_ms,
                        e.timeout_ms,
                        e.body,
                        e.fair,
                    )
                )
                per_queue[e.queue] = per_queue.get(e.queue, 0) + 1
            # REPLACE also removes a row that holds the key under another id (even a leased
            # one: its holder's ack is then refused, so a replaced chain cannot resurrect)
            db.executemany(
                f"INSERT {'OR REPLACE ' if replace else ''}INTO messages "
                "(id, queue, key, priority, state, at_ms, due_ms, timeout_ms, body, fair) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            for queue, count in per_queue.items():
                self._count(db, queue, "enqueued", count)
            for queue, count in added.items():
                self._add_pending(db, queue, count)
        return outcomes

    def _insert_fresh(
        self, db: sqlite3.Connection, envelopes: Sequence[Envelope], now: int, bounded: bool
    ) -> list[Outcome] | None:
        """Fast path for unkeyed messages with fresh ids: count them into their queues
        (one statement per queue, which also tells whether a bounded queue takes them all)
        and insert them with one ``executemany``. Returns None, having written nothing,
        if some id is already stored or a bounded queue is too full: the careful path
        then sorts them out one by one."""
        rows = [
            (
                e.id,
                e.queue,
                None,
                e.priority,
                initial_state(e, now),
                e.due_ms,
                e.due_ms,
                e.timeout_ms,
                e.body,
                e.fair,
            )
            for e in envelopes
        ]
        per_queue: dict[str, int] = {}
        for e in envelopes:
            per_queue[e.queue] = per_queue.get(e.queue, 0) + 1
        db.execute("SAVEPOINT fresh")
        if not self._count_in(db, per_queue, bounded):
            db.execute("ROLLBACK TO fresh")
            db.execute("RELEASE fresh")
            return None
        try:
            db.executemany(
                "INSERT INTO messages (id, queue, key, priority, state, at_ms, due_ms, "
                "timeout_ms, body, fair) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        except sqlite3.IntegrityError:
            db.execute("ROLLBACK TO fresh")
            db.execute("RELEASE fresh")
            return None
        db.execute("RELEASE fresh")
        for queue, count in per_queue.items():
            self._count(db, queue, "enqueued", count)
        return [Outcome.ENQUEUED] * len(envelopes)

    @staticmethod
    def _key_holders(
        db: sqlite3.Connection, envelopes: Sequence[Envelope]
    ) -> dict[tuple[str, str], tuple[str, bytes]]:
        """Who holds each key among ``envelopes`` now: (queue, key) -> (id, body)."""
        holders: dict[tuple[str, str], tuple[str, bytes]] = {}
        by_queue: dict[str, list[str]] = {}
        for e in envelopes:
            if e.key is not None:
                by_queue.setdefault(e.queue, []).append(e.key)
        for queue, keys in by_queue.items():
            for start in range(0, len(keys), 900):
                chunk = keys[start : start + 900]
                marks = ",".join("?" * len(chunk))
                for key, message_id, body in db.execute(
                    f"SELECT key, id, body FROM messages WHERE queue = ? AND key IN ({marks})",
                    [queue, *chunk],
                ):
                    holders[(queue, key)] = (message_id, body)
        return holders

    @staticmethod
    def _present_ids(db: sqlite3.Connection, ids: list[str]) -> set[str]:
        present: set[str] = set()
        for start in range(0, len(ids), 900):
            chunk = ids[start : start + 900]
            marks = ",".join("?" * len(chunk))
            present.update(
                row[0]
                for row in db.execute(f"SELECT id FROM messages WHERE id IN ({marks})", chunk)
            )
        return present
