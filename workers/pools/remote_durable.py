"""Durable runs in a process pool's child: a child forked from the worker opens no storage
of its own (a lock another thread held at the fork could be held for ever), so a durable
run there reaches its journal, its waits, its children and the clock through its parent,
one question and answer at a time over the child's pipe.

The child's side (``ChildSupport``) is a ``DurableSupport`` whose parts ask; the parent's
side (``ParentAnswers``) answers each question with the app's own storage."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from tickwork.scheduler.errors import TickworkError
from tickwork.scheduler.model.calls import Call
from tickwork.scheduler.model.handles import TaskInfo
from tickwork.scheduler.runs.durable_opening import DurableApp, local_support
from tickwork.scheduler.runs.durable_support import DurableSupport, WaitLook
from tickwork.scheduler.runs.journal import JournalEntry

#: asks the parent: (question, its arguments) -> the answer (or raises what it raised)
Ask = Callable[[str, tuple[Any, ...]], Any]


class _Store:
    """A journal store that asks the parent."""

    def __init__(self, ask: Ask) -> None:
        self._ask = ask

    def read(self, run_id: str) -> list[JournalEntry]:
        return list(self._ask("read", (run_id,)))

    def write(self, run_id: str, entries: Sequence[tuple[int, JournalEntry]], ttl_ms: int) -> None:
        self._ask("write", (run_id, list(entries), ttl_ms))


class _Waits:
    def __init__(self, ask: Ask) -> None:
        self._ask = ask

    def wait(
        self,
        record_id: str,
        message_id: str,
        queue: str,
        event: tuple[str, str | None],
        timeout_s: float,
    ) -> WaitLook:
        look: WaitLook = self._ask("wait", (record_id, message_id, queue, event, timeout_s))
        return look


class _Children:
    def __init__(self, ask: Ask) -> None:
        self._ask = ask

    def start(self, call: Call, identity: str) -> str:
        return str(self._ask("start", (call, identity)))

    def ended(self, child_ids: Sequence[str]) -> list[TaskInfo | None]:
        return list(self._ask("ended", (list(child_ids),)))


def child_support(ask: Ask, max_bytes: int) -> DurableSupport:
    """A durable run's support in a child, every part asking the parent."""
    return DurableSupport(
        _Store(ask),
        _Waits(ask),
        _Children(ask),
        lambda: int(ask("now", ())),
        max_bytes,
    )


class ParentAnswers:
    """The parent's side: answers a child's questions with the app's storage (the
    backend as it is now: a test may swap it)."""

    def __init__(self, app: DurableApp, now_ms: Callable[[], int]) -> None:
        self._app = app
        self._now_ms = now_ms

    def answer(self, question: str, args: tuple[Any, ...]) -> Any:
        """The answer to one question (raises what answering it raised)."""
        support = local_support(self._app, self._now_ms)
        if question == "now":
            return self._now_ms()
        if question == "read":
            return support.store.read(*args)
        if question == "write":
            return support.store.write(*args)
        if question == "wait":
            return support.waits.wait(*args)
        if question == "start":
            return support.children.start(*args)
        if question == "ended":
            return support.children.ended(*args)
        raise ValueError(f"no durable question {question!r}")


class ChildAsking:
    """The child's side of the questions: one at a time over its pipe (a handler's own
    threads may ask too), the answer or the parent's error raised here."""

    def __init__(self, send: Callable[[tuple[Any, ...]], None], receive: Callable[[], Any]) -> None:
        self._send, self._receive = send, receive
        self._lock = threading.Lock()

    def __call__(self, question: str, args: tuple[Any, ...]) -> Any:
        with self._lock:
            self._send(("durable", question, args))
            _, ok, value = self._receive()
        if not ok:
            kind, text = value
            raise TickworkError(
                f"the worker could not answer a durable run's {question}: {kind}: {text}"
            )
        return value


def answered(answers: ParentAnswers, question: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The reply the parent sends: ("answer", True, value), or ("answer", False, (error
    type, text)) (an error's type and text, which always cross the pipe)."""
    try:
        return ("answer", True, answers.answer(question, args))
    except Exception as err:
        return ("answer", False, (type(err).__name__, str(err)))
