"""Hooks: the one extension point of an app, in the spirit of Dramatiq's middleware.

A ``Hook`` is a class with named methods, each called at one step of a message's life;
override the ones you need (the others do nothing and are never called)::

    class CountOutcomes(Hook):
        def __init__(self) -> None:
            self.seen: Counter[str] = Counter()

        def after_run(self, run: RunInfo, outcome: str, duration_ms: float) -> None:
            self.seen[outcome] += 1

    app = App("redis://...", hooks=[CountOutcomes()])

The steps, in order:

- ``encode_body`` / ``decode_body``: a codec. Every body is passed through the hooks'
  ``encode_body`` (in the order given) before it is stored, and back through their
  ``decode_body`` (in reverse order) wherever it is read: enqueue and the next
  occurrence a worker writes, ``app.get``, schedules, the worker's claims, the poison
  store. The envelope (queue, key, priority, due time) stays clear, so keys, scheduling
  and every backend feature work unchanged. ``encode_body`` must give the same bytes for
  the same body (a re-sent keyed message is recognised by its stored bytes).
- ``encode_data`` / ``decode_data``: a codec of what is kept beside bodies: result
  records (what a run returned, its progress note, its error), ledger records
  (histories, action logs, the activity log) and the error texts of failed runs (the
  poison store's message and traceback, a retried message's last error). Encryption at
  rest (``scheduler.encryption``) implements both codecs.
- ``before_run(run)``: in the worker, as a claimed message is handed to the pool.
- ``before_handler(run)`` / ``after_handler(run)``: in the thread, process or event
  loop that runs the handler, right before it is called and right after it returned or
  raised (what a framework does around a unit of work: Django closes its stale database
  connections there).
- ``after_run(run, outcome, duration_ms)``: in the worker, once a run is settled;
  ``outcome`` is ``"succeeded"``, ``"retried"``, ``"poisoned"``, ``"aborted"`` or
  ``"redelivered"`` (the handler returned False).
- ``on_retry(run, error, delay_s)``: a failed run will be tried again after ``delay_s``.
- ``on_poison(run, failure)``: a message goes to the poison store (after its last
  attempt, aborted, or one that can never run: then ``run.task`` may be empty).

Hooks run in the worker's own threads (the settler's, the consumer's): keep them quick.
An exception a hook raises is logged and does not stop the message, except in
``encode_body``, where it fails the enqueue (nothing is written), and in
``decode_body``, where it makes the message undecodable (the worker poisons it with the
reason). An app without hooks pays nothing: ``Hooks`` keeps, for each step, only the
hooks that override it, and the worker skips a step with none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tickwork.scheduler.backends.records import Failure
from tickwork.scheduler.runs.context import RunInfo

log = logging.getLogger("tickwork.hooks")

#: the methods of ``Hook`` that observe (their errors are logged, never raised)
EVENTS = ("before_run", "before_handler", "after_handler", "after_run", "on_retry", "on_poison")


class Hook:
    """Base class of a hook: every method does nothing; override what you need."""

    def encode_body(self, body: bytes) -> bytes:
        """The bytes to store for a message's ``body`` (a codec: compress, wrap,
        encrypt); must be deterministic."""
        return body

    def decode_body(self, body: bytes) -> bytes:
        """The body ``encode_body`` was given, from what it returned; raise on bytes it
        cannot read."""
        return body

    def encode_data(self, data: bytes) -> bytes:
        """The bytes to store for a result record or an error text (a codec, as
        ``encode_body``)."""
        return data

    def decode_data(self, data: bytes) -> bytes:
        """The bytes ``encode_data`` was given; raise on bytes it cannot read."""
        return data

    def before_run(self, run: RunInfo) -> None:
        """A claimed message is handed to the pool to run."""

    def before_handler(self, run: RunInfo) -> None:
        """The handler is about to be called, in the thread (process, loop) it runs in."""

    def after_handler(self, run: RunInfo) -> None:
        """The handler returned or raised, in the thread (process, loop) it ran in."""

    def after_run(self, run: RunInfo, outcome: str, duration_ms: float) -> None:
        """A run was settled: succeeded, retried, poisoned, aborted or redelivered."""

    def on_retry(self, run: RunInfo, error: str, delay_s: float) -> None:
        """A failed run will be tried again after ``delay_s`` seconds."""

    def on_poison(self, run: RunInfo, failure: Failure) -> None:
        """A message goes to the poison store, with why."""


def _overrides(hook: Hook, name: str) -> bool:
    return getattr(type(hook), name) is not getattr(Hook, name)


class Hooks:
    """An app's hooks, sorted by step: each attribute named after a step is the tuple of
    the hooks' bound methods that override it (empty when none does)."""

    def __init__(self, hooks: Iterable[Hook] = ()) -> None:
        self._hooks: list[Hook] = []
        self.before_run: tuple[Callable[[RunInfo], None], ...] = ()
        self.before_handler: tuple[Callable[[RunInfo], None], ...] = ()
        self.after_handler: tuple[Callable[[RunInfo], None], ...] = ()
        self.after_run: tuple[Callable[[RunInfo, str, float], None], ...] = ()
        self.on_retry: tuple[Callable[[RunInfo, str, float], None], ...] = ()
        self.on_poison: tuple[Callable[[RunInfo, Failure], None], ...] = ()
        self._encoders: tuple[Callable[[bytes], bytes], ...] = ()
        self._decoders: tuple[Callable[[bytes], bytes], ...] = ()
        self._data_encoders: tuple[Callable[[bytes], bytes], ...] = ()
        self._data_decoders: tuple[Callable[[bytes], bytes], ...] = ()
        for hook in hooks:
            self.add(hook)

    def add(self, hook: Hook) -> None:
        """Add ``hook`` after the others (its ``encode_body`` runs last, its
        ``decode_body`` first)."""
        if not isinstance(hook, Hook):
            raise TypeError(f"a hook is a tickwork Hook, not {type(hook).__name__}")
        self._hooks.append(hook)
        for name in EVENTS:
            if _overrides(hook, name):
                setattr(self, name, (*getattr(self, name), getattr(hook, name)))
        if _overrides(hook, "encode_body") or _overrides(hook, "decode_body"):
            self._encoders = (*self._encoders, hook.encode_body)
            self._decoders = (hook.decode_body, *self._decoders)
        if _overrides(hook, "encode_data") or _overrides(hook, "decode_data"):
            self._data_encoders = (*self._data_encoders, hook.encode_data)
            self._data_decoders = (hook.decode_data, *self._data_decoders)

    def __iter__(self) -> Any:
        return iter(self._hooks)

    def __len__(self) -> int:
        return len(self._hooks)

    @property
    def has_codec(self) -> bool:
        """Whether some hook transforms bodies, or what is kept beside them."""
        return bool(self._encoders or self._data_encoders)

    @property
    def has_data_codec(self) -> bool:
        """Whether some hook transforms what is kept beside bodies."""
        return bool(self._data_encoders)

    def encode_data(self, data: bytes) -> bytes:
        """``data`` through every hook's ``encode_data``, in order."""
        for encode in self._data_encoders:
            data = encode(data)
        return data

    def decode_data(self, data: bytes) -> bytes:
        """``data`` back through every hook's ``decode_data``, in reverse order."""
        for decode in self._data_decoders:
            data = decode(data)
        return data

    def encode(self, body: bytes) -> bytes:
        """``body`` through every hook's ``encode_body``, in order."""
        for encode in self._encoders:
            body = encode(body)
        return body

    def decode(self, body: bytes) -> bytes:
        """``body`` back through every hook's ``decode_body``, in reverse order."""
        for decode in self._decoders:
            body = decode(body)
        return body


def notify(methods: Sequence[Callable[..., None]], *args: Any) -> None:
    """Call each of ``methods`` (one step's hooks) with ``args``; an exception is logged
    with its traceback and the next hook still runs."""
    for method in methods:
        try:
            method(*args)
        except Exception:
            log.exception("hook %s failed", getattr(method, "__qualname__", method))
