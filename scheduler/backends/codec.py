"""A body codec around a backend: the roles that carry message bodies (messages, leases,
the poison store) wrapped so that every body is encoded on its way in and decoded on
its way out; the other roles are the backend's own. The app installs it when one of
its hooks transforms bodies (``scheduler.hooks``); without one nothing is wrapped.

What crosses each role:

- messages: enqueued envelopes encoded; what ``get``, ``get_by_key`` and ``keyed``
  return decoded.
- leases: claims decoded. A claim goes back encoded where a backend may store its body
  again (``retry``, ``release``, ``poison``: Cassandra moves the row, SQLite and
  Cassandra copy it to the poison store); the next occurrence of an ack or a poison is
  encoded. A body the codec cannot decode comes out as stored, the claim marked
  ``malformed`` with why: the worker poisons it, body kept as stored.
- poison store: records decoded (one the codec cannot read is listed as stored).

With a codec of data too (``Hook.encode_data``: encryption), also the results role (its
records), the ledger role (its records, and those an ack, retry or poison appends) and
the error texts of failures (stored as ``TEXT_PREFIX`` then base64).
"""

from __future__ import annotations

import base64
import builtins
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, Self

from tickwork.scheduler.backends.base import Backend
from tickwork.scheduler.backends.records import Failure, LedgerEntry, Waiter
from tickwork.scheduler.backends.roles import Leases, Ledger, Messages, PoisonStore, Results
from tickwork.scheduler.backends.values import (
    Claim,
    ClaimBatch,
    Envelope,
    OnConflict,
    Outcome,
    PoisonRecord,
    StoredMessage,
)
from tickwork.scheduler.clock import Clock
from tickwork.scheduler.errors import ConfigurationError

log = logging.getLogger("tickwork.hooks")

Transform = Callable[[bytes], bytes]


#: how an error text transformed by the data codec is stored (base64 after it)
TEXT_PREFIX = "tw-data:"

#: what a reader without the codec's key is shown of a transformed text
UNREADABLE = "(encrypted: this app has no key for it)"


def shown(text: str | None) -> str | None:
    """An error text as a reader without the codec's key shows it: ``UNREADABLE`` for a
    transformed one (as stored, it is base64 of ciphertext), else itself."""
    if text is not None and text.startswith(TEXT_PREFIX):
        return UNREADABLE
    return text


def _same(data: bytes) -> bytes:
    return data


class BodyCodec:
    """A pair of transforms of bodies, and optionally one of the data kept beside them
    (result records, error texts); each ``decode`` may raise on bytes it cannot read."""

    def __init__(
        self,
        encode: Transform,
        decode: Transform,
        encode_data: Transform | None = None,
        decode_data: Transform | None = None,
    ) -> None:
        self.encode = encode
        self.decode = decode
        self.encode_data = encode_data or _same
        self.decode_data = decode_data or _same
        self.transforms_data = encode_data is not None

    def text_in(self, text: str) -> str:
        """An error text as stored: through the data codec, as base64 after a prefix."""
        if not self.transforms_data or not text:
            return text
        return TEXT_PREFIX + base64.b64encode(self.encode_data(text.encode())).decode()

    def text_out(self, text: str | None) -> str | None:
        """An error text as stored, read back (``UNREADABLE`` when it cannot be)."""
        if text is None or not text.startswith(TEXT_PREFIX):
            return text
        try:
            raw = base64.b64decode(text.removeprefix(TEXT_PREFIX), validate=True)
            return self.decode_data(raw).decode()
        except Exception:
            return UNREADABLE

    def entry(self, entry: LedgerEntry | None) -> LedgerEntry | None:
        """A ledger entry as stored: each record through the data codec."""
        if entry is None or not self.transforms_data:
            return entry
        return entry._replace(records=tuple(self.encode_data(r) for r in entry.records))

    def records_out(self, records: Sequence[bytes]) -> list[bytes]:
        """Ledger records read back; one the codec cannot read is left out."""
        found = []
        for record in records:
            try:
                found.append(self.decode_data(record))
            except Exception:
                continue
        return found

    def failure_in(self, failure: Failure) -> Failure:
        return replace(
            failure,
            message=self.text_in(failure.message),
            traceback=self.text_in(failure.traceback),
        )

    def failure_out(self, failure: Failure) -> Failure:
        return replace(
            failure,
            message=self.text_out(failure.message) or "",
            traceback=self.text_out(failure.traceback) or "",
        )

    def envelope(self, envelope: Envelope) -> Envelope:
        return envelope._replace(body=self.encode(envelope.body))

    def decoded(self, envelope: Envelope) -> Envelope | None:
        """``envelope`` with its body decoded, or None when the codec cannot read it."""
        try:
            return envelope._replace(body=self.decode(envelope.body))
        except Exception as err:
            log.warning("cannot decode the body of %s: %s", envelope.id, err)
            return None

    def stored(self, stored: StoredMessage | None) -> StoredMessage | None:
        if stored is None:
            return None
        envelope = self.decoded(stored.envelope)
        last_error = self.text_out(stored.last_error)
        if envelope is None:
            return replace(stored, last_error=last_error)
        return replace(stored, envelope=envelope, last_error=last_error)

    def claim_in(self, claim: Claim) -> Claim:
        """A claim as the worker holds it: its body decoded (or marked malformed)."""
        try:
            return claim._replace(body=self.decode(claim.body))
        except Exception as err:
            return claim._replace(malformed=f"the body codec cannot read it: {err}")

    def claim_out(self, claim: Claim) -> Claim:
        """A claim as the backend may store it again: its body encoded (a malformed one
        was never decoded)."""
        return claim if claim.malformed else claim._replace(body=self.encode(claim.body))


class CodedMessages(Messages):
    """``Messages`` with bodies encoded in and decoded out."""

    def __init__(self, inner: Messages, codec: BodyCodec) -> None:
        self._inner = inner
        self._codec = codec

    def enqueue(
        self,
        envelopes: Sequence[Envelope],
        on_conflict: OnConflict = OnConflict.ERROR,
        bounded: bool = False,
    ) -> list[Outcome]:
        coded = [self._codec.envelope(e) for e in envelopes]
        return self._inner.enqueue(coded, on_conflict, bounded)

    async def aenqueue(
        self,
        envelopes: Sequence[Envelope],
        on_conflict: OnConflict = OnConflict.ERROR,
        bounded: bool = False,
    ) -> list[Outcome]:
        coded = [self._codec.envelope(e) for e in envelopes]
        return await self._inner.aenqueue(coded, on_conflict, bounded)

    def get(self, message_id: str, queue: str | None = None) -> StoredMessage | None:
        return self._codec.stored(self._inner.get(message_id, queue))

    def get_by_key(self, queue: str, key: str) -> StoredMessage | None:
        return self._codec.stored(self._inner.get_by_key(queue, key))

    def delete(self, message_id: str, queue: str | None = None) -> bool:
        return self._inner.delete(message_id, queue)

    def delete_by_key(self, queue: str, key: str) -> bool:
        return self._inner.delete_by_key(queue, key)

    def exists(self, queue: str, key: str) -> bool:
        return self._inner.exists(queue, key)

    def keyed(self, queue: str | None = None) -> list[StoredMessage]:
        found = (self._codec.stored(stored) for stored in self._inner.keyed(queue))
        return [stored for stored in found if stored is not None]


class CodedLeases(Leases):
    """``Leases`` with claims decoded out and encoded back where a body may be stored."""

    def __init__(self, inner: Leases, codec: BodyCodec) -> None:
        self._inner = inner
        self._codec = codec

    def claim(
        self,
        queue: str,
        limit: int,
        lookahead_ms: int = 0,
        slots: Mapping[str, int] | None = None,
    ) -> ClaimBatch:
        batch = self._inner.claim(queue, limit, lookahead_ms, slots)
        return ClaimBatch([self._codec.claim_in(c) for c in batch.claims], batch.next_due_ms)

    def _items(
        self, items: Sequence[tuple[Claim, Envelope | None]]
    ) -> list[tuple[Claim, Envelope | None]]:
        encode = self._codec.envelope
        return [(claim, None if nxt is None else encode(nxt)) for claim, nxt in items]

    def ack(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> list[bool]:
        return self._inner.ack(self._items(items), [self._codec.entry(e) for e in ledger])

    def ack_releasing(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        held: Sequence[tuple[str, str]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> tuple[list[bool], list[Waiter]]:
        entries = [self._codec.entry(e) for e in ledger]
        return self._inner.ack_releasing(self._items(items), held, entries)

    def retry(
        self, claim: Claim, due_ms: int, error: str, ledger: LedgerEntry | None = None
    ) -> bool:
        error, entry = self._codec.text_in(error), self._codec.entry(ledger)
        return self._inner.retry(self._codec.claim_out(claim), due_ms, error, entry)

    def release(self, claims: Iterable[Claim], due_ms: int | None = None) -> int:
        return self._inner.release([self._codec.claim_out(c) for c in claims], due_ms)

    def extend(self, claims: Sequence[Claim], lease_ms: int) -> list[bool]:
        return self._inner.extend(claims, lease_ms)

    def requeue_expired(self, queue: str) -> int:
        return self._inner.requeue_expired(queue)

    def poison(
        self,
        claim: Claim,
        failure: Failure,
        next_occurrence: Envelope | None = None,
        ledger: LedgerEntry | None = None,
    ) -> bool:
        nxt = None if next_occurrence is None else self._codec.envelope(next_occurrence)
        failure, entry = self._codec.failure_in(failure), self._codec.entry(ledger)
        return self._inner.poison(self._codec.claim_out(claim), failure, nxt, entry)


class CodedPoison(PoisonStore):
    """``PoisonStore`` with records decoded out."""

    def __init__(self, inner: PoisonStore, codec: BodyCodec) -> None:
        self._inner = inner
        self._codec = codec

    def _record(self, record: PoisonRecord) -> PoisonRecord:
        envelope = self._codec.decoded(record.envelope)
        failure = self._codec.failure_out(record.failure)
        if envelope is None:
            return replace(record, failure=failure)
        return replace(record, envelope=envelope, failure=failure)

    def list(self, queue: str | None = None, limit: int = 100) -> builtins.list[PoisonRecord]:
        return [self._record(record) for record in self._inner.list(queue, limit)]

    def get(self, message_id: str) -> PoisonRecord | None:
        found = self._inner.get(message_id)
        return None if found is None else self._record(found)

    def replay(self, ids: Sequence[str] | None = None, queue: str | None = None) -> int:
        return self._inner.replay(ids, queue)

    def purge(self, queue: str | None = None, ids: Sequence[str] | None = None) -> int:
        return self._inner.purge(queue, ids)


class CodedResults(Results):
    """``Results`` with records through the data codec (one it cannot read is left out:
    a reader without the key sees no record)."""

    def __init__(self, inner: Results, codec: BodyCodec) -> None:
        self._inner = inner
        self._codec = codec

    def put(self, results: Sequence[tuple[str, bytes, int]]) -> None:
        encode = self._codec.encode_data
        self._inner.put([(mid, encode(record), ttl) for mid, record, ttl in results])

    def get(self, message_ids: Sequence[str]) -> dict[str, bytes]:
        found = {}
        for message_id, record in self._inner.get(message_ids).items():
            try:
                found[message_id] = self._codec.decode_data(record)
            except Exception as err:
                log.warning("cannot decode the result of %s: %s", message_id, err)
        return found


class CodedLedger(Ledger):
    """``Ledger`` with records through the data codec (histories, action logs, activity)."""

    def __init__(self, inner: Ledger, codec: BodyCodec) -> None:
        self._inner = inner
        self._codec = codec

    def append(self, entries: Sequence[LedgerEntry]) -> None:
        coded = [self._codec.entry(e) for e in entries]
        self._inner.append([e for e in coded if e is not None])

    def read(self, queue: str, subject: str, limit: int = 100) -> builtins.list[bytes]:
        return self._codec.records_out(self._inner.read(queue, subject, limit))

    def read_many(
        self, subjects: Sequence[tuple[str, str]], limit: int = 100
    ) -> builtins.list[builtins.list[bytes]]:
        return [self._codec.records_out(r) for r in self._inner.read_many(subjects, limit)]


class CodedBackend(Backend):
    """``inner`` with its bodies passed through ``codec``: its messages, leases and poison
    store wrapped, every other role its own."""

    def __init__(self, inner: Backend, codec: BodyCodec) -> None:
        self.inner = inner
        self.name = inner.name
        self.capabilities = inner.capabilities
        self.shards = inner.shards
        self.messages = CodedMessages(inner.messages, codec)
        self.leases = CodedLeases(inner.leases, codec)
        self.poison = CodedPoison(inner.poison, codec)
        self.queues = inner.queues
        self.aborts = inner.aborts
        self.limits = inner.limits
        self.rates = inner.rates
        self.results = (
            CodedResults(inner.results, codec) if codec.transforms_data else inner.results
        )
        self.registry = inner.registry
        self.batches = inner.batches
        self.ledger = CodedLedger(inner.ledger, codec) if codec.transforms_data else inner.ledger
        self.changes = inner.changes  # run ids, tasks and states: no bodies

    @classmethod
    def from_url(cls, url: str, clock: Clock | None = None) -> Self:
        raise ConfigurationError("a coded backend wraps an open backend: CodedBackend(inner)")

    def now_ms(self) -> int:
        return self.inner.now_ms()

    def transaction(self, connection: Any) -> AbstractContextManager[None]:
        return self.inner.transaction(connection)

    def listen(
        self, queues: Sequence[str], wake: Callable[[str], None]
    ) -> Callable[[], None] | None:
        return self.inner.listen(queues, wake)

    def close(self) -> None:
        self.inner.close()
