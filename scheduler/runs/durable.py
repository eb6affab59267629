"""Durable runs: a task's handler whose steps, sleeps and recorded values are journaled,
so that a run started again resumes where it was instead of doing its work twice.

A task registered with ``@app.task(durable=True)`` calls its steps through its run::

    run = current_run()
    receipt = run.step("charge", charge_card, order_id)   # once, even across crashes
    run.sleep(timedelta(days=3))                           # no thread waits
    run.step("remind", send_reminder, order_id)

The first time a step returns, what it returned (through JSON) is written to the run's
journal (``scheduler/runs/journal.py``) before the handler goes on; when the handler runs
again (after a crash, a redelivery, a sleep or a step's retry), a journaled step returns
its stored value at once without running. Steps are matched by their order and name: a
replay that asks for another step than the journal holds at that point stops the run
with ``NonDeterminismError`` naming both.

A step is retried by its own policy (the task's by default) without running the steps
before it again: the run is given back to storage, due after the backoff, and resumes
there. A step that fails for good raises ``StepFailed`` in the handler, which may catch
it (the replay raises it again at the same point); not caught, the run fails for good.

A sleep stores the message due at the wake-up and lets go of the worker's thread and
lease (a snooze that is journaled): a sleep of three days survives restarts and deploys.
``now()``, ``random()`` and ``patched()`` record what they answer, so a replay sees the
same. Side effects: a worker that dies inside a step, or after it and before its
journal write, runs that step again (at least once); ``step_id`` is a stable id to pass
to an outside API as its idempotency key.
"""

from __future__ import annotations

import asyncio
import math
import random as random_module
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic_core import from_json

from tickwork.scheduler.errors import Aborted, InvalidMessage, TickworkError
from tickwork.scheduler.model.calls import Call
from tickwork.scheduler.model.event_names import WAIT_MOST_S, check_name
from tickwork.scheduler.model.retry import RetryAfter, RetryPolicy, decide
from tickwork.scheduler.runs.durable_errors import (
    MAX_JOURNAL_ENTRIES,
    JournalFull,
    NonDeterminismError,
    StepFailed,
    Suspended,
)
from tickwork.scheduler.runs.durable_support import DurableSupport, child_of
from tickwork.scheduler.runs.encoding import encode_value
from tickwork.scheduler.runs.journal import EntryKind, EntryState, JournalEntry
from tickwork.scheduler.runs.snooze import MOST_S
from tickwork.scheduler.runs.step_options import (
    awaited_within,
    call_within,
    limit_seconds,
    step_policy,
)

T = TypeVar("T")


class DurableRun:
    """One durable run's journal and the cursor of its replay."""

    def __init__(
        self,
        run_id: str,
        queue: str,
        retry: RetryPolicy,
        retention_ms: int,
        support: DurableSupport,
    ) -> None:
        self._run_id = run_id
        self._queue = queue
        self._retry = retry  # the task's policy: a step's unless it gives its own
        self._retention_ms = retention_ms  # each entry kept this long after it is written
        self._store = support.store
        self._waits = support.waits
        self._children = support.children
        self._now_ms = support.now_ms
        self._max_bytes = support.max_bytes
        self._journal: list[JournalEntry] | None = None  # read on first use
        self._next = 0  # the index of the next entry the handler asks for
        self._pending: list[tuple[int, JournalEntry]] = []  # written with the next write
        self._step_id: str | None = None

    # -- what a handler calls (through ``current_run()``) ------------------------------

    def step(
        self,
        name: str,
        fn: Callable[..., T],
        /,
        *args: Any,
        retry: int | RetryPolicy | None = None,
        time_limit: float | timedelta | None = None,
        **kwargs: Any,
    ) -> T:
        """Run ``fn(*args, **kwargs)`` once for this run: its journaled value on a
        replay. ``retry``: the step's retries (a count or a ``RetryPolicy``; the task's
        policy by default); ``time_limit``: past it, the step fails
        (``StepTimeLimitExceeded``, retried by its policy)."""
        limit_s = limit_seconds(time_limit)
        index, entry = self._take("step", name)
        if entry is not None and entry.state != "retrying":
            return self._replayed(entry)  # type: ignore[no-any-return]
        started = self._now_ms()
        self._step_id = step_id = f"{self._run_id}~{index}"
        try:
            value = call_within(name, step_id, limit_s, fn, *args, **kwargs)
        except Aborted:
            raise
        except Exception as err:
            self._failed(index, name, entry, err, retry, started)
        finally:
            self._step_id = None
        return self._done(index, name, entry, value, started)  # type: ignore[no-any-return]

    async def astep(
        self,
        name: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        retry: int | RetryPolicy | None = None,
        time_limit: float | timedelta | None = None,
        **kwargs: Any,
    ) -> Any:
        """``step`` for an ``async def`` handler: ``fn`` may be a coroutine function (it
        is awaited, and cancelled at ``time_limit``), and the journal is read and
        written in a thread."""
        limit_s = limit_seconds(time_limit)
        if self._journal is None:
            self._journal = await asyncio.to_thread(self._store.read, self._run_id)
        index, entry = self._take("step", name)
        if entry is not None and entry.state != "retrying":
            return self._replayed(entry)
        started = self._now_ms()
        self._step_id = step_id = f"{self._run_id}~{index}"
        try:
            value = await awaited_within(name, step_id, limit_s, fn, *args, **kwargs)
        except Aborted:
            raise
        except Exception as err:
            await asyncio.to_thread(self._failed, index, name, entry, err, retry, started)
        finally:
            self._step_id = None
        return await asyncio.to_thread(self._done, index, name, entry, value, started)

    def sleep(self, delay: float | timedelta, *, name: str = "sleep") -> None:
        """Sleep ``delay`` (seconds, or a ``timedelta``) without holding a thread: the
        run is stored due at its wake-up and resumes from its journal then."""
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
        if not (math.isfinite(seconds) and 0 <= seconds <= MOST_S):
            raise ValueError(f"a durable sleep lasts from 0 s to a year, not {delay!r}")
        self._sleep(name, lambda now: now + math.ceil(seconds * 1000))

    def sleep_until(self, when: datetime, *, name: str = "sleep") -> None:
        """Sleep until ``when`` (an aware datetime) without holding a thread."""
        if when.tzinfo is None:
            raise ValueError(f"sleep_until needs an aware datetime, not {when!r}")
        until = int(when.timestamp() * 1000)
        self._sleep(name, lambda now: until)

    def wait_for_event(
        self, name: str, *, key: str | None = None, timeout: float | timedelta
    ) -> dict[str, Any] | None:
        """Wait for an event named ``name`` (with ``key``, when given) emitted after the
        wait began, for at most ``timeout`` (seconds or a ``timedelta``, up to 30 days),
        without holding a thread: the event (a dict: ``id``, ``name``, ``key``,
        ``payload``, ``emitted_at``), or None when the timeout came first."""
        check_name(name)
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
        if not (math.isfinite(seconds) and 0 < seconds <= WAIT_MOST_S):
            raise InvalidMessage(
                f"a wait's timeout is more than 0 and at most 30 days, not {timeout}"
            )
        index, entry = self._take("wait", name)
        if entry is not None and entry.state != "waiting":
            return entry.value  # type: ignore[no-any-return]
        record = f"wait:{self._run_id}~{index}"
        look = self._waits.wait(record, self._run_id, self._queue, (name, key), seconds)
        now = self._now_ms()
        if look.state == "waiting":
            until = now + math.ceil(look.delay_s * 1000)
            waiting = JournalEntry(kind="wait", name=name, state="waiting", until_ms=until)
            self._suspend(index, waiting, until)
        value = None if look.timed_out else from_json(look.outcome)
        self._write(index, JournalEntry(kind="wait", name=name, value=value, ended_ms=now))
        return value

    def spawn(self, call: Call) -> str:
        """Start ``call`` (``task.call(...)``; any task, durable or not) as a child of
        this run, once: a replay gets the same child's id back without starting another.
        Returns the child's message id (for ``gather``)."""
        index, entry = self._take("spawn", call.task)
        if entry is not None:
            return str(entry.value)
        call = child_of(call, self._queue, self._run_id)  # it wakes this run when it ends
        child = self._children.start(call, f"{self._run_id}~{index}")
        self._write(index, JournalEntry(kind="spawn", name=call.task, value=child))
        return child

    def gather(self, child_ids: Sequence[str]) -> list[Any]:
        """Wait, without holding a thread, until every child in ``child_ids`` finished;
        their return values, in order (None for a child whose task keeps no results). A
        child that failed for good raises ``StepFailed`` (its id and error) here, and on
        every replay. A child that ends wakes the run; it also looks again on its own
        at growing intervals (0.5 s to 30 s)."""
        ids = list(child_ids)
        index, entry = self._take("gather", f"{len(ids)} children")
        if entry is not None and entry.state != "waiting":
            return self._replayed(entry)  # type: ignore[no-any-return]
        now = self._now_ms()
        ended = self._children.ended(ids)
        if any(info is None for info in ended):
            since = entry.started_ms if entry is not None else now
            delay_ms = min(30_000, max(500, (now - since) // 4))
            waiting = JournalEntry(
                kind="gather", name=f"{len(ids)} children", state="waiting",
                started_ms=since, until_ms=now + delay_ms,
            )  # fmt: skip
            self._suspend(index, waiting, now + delay_ms)
        failed = [(i, info) for i, info in zip(ids, ended, strict=True) if info and info.error]
        if failed:
            child, info = failed[0]
            gathered = JournalEntry(
                kind="gather", name=f"{len(ids)} children", state="failed",
                error_type=info.error_type or "Error", error=f"child {child}: {info.error}",
            )  # fmt: skip
        else:
            values = [info.value if info is not None else None for info in ended]
            gathered = JournalEntry(kind="gather", name=f"{len(ids)} children", value=values)
        self._write(index, gathered)
        return self._replayed(gathered)  # type: ignore[no-any-return]

    def now(self) -> datetime:
        """The time (UTC) as first seen at this point of the run: the same on a replay."""
        value = self._recorded("now", lambda: self._now_ms())
        return datetime.fromtimestamp(value / 1000, UTC)

    def random(self) -> float:
        """A random float in [0, 1), the same on a replay."""
        return float(self._recorded("random", random_module.random))

    def patched(self, patch_id: str) -> bool:
        """Whether this run takes the code path of change ``patch_id``: True for a run
        that reaches this point after the change was deployed, False for one whose
        journal was already past it (it keeps replaying the old path). Put the new code
        under ``if run.patched("id"):`` and the old under ``else``; once no run started
        before the change is left, remove the old branch (keep the call for a while, or
        the runs that took it would see another step than their journal holds)."""
        journal = self._loaded()
        index = self._next
        if index < len(journal):
            entry = journal[index]
            if entry.kind == "patch" and entry.name == patch_id:
                self._next += 1
                return True
            return False  # journaled before the change: the old path
        self._take("patch", patch_id)
        self._pending.append((index, JournalEntry(kind="patch", name=patch_id)))
        return True

    @property
    def step_id(self) -> str:
        """The running step's stable id (the same on every attempt and replay): pass it
        to an outside API as its idempotency key. Only inside a step."""
        if self._step_id is None:
            raise TickworkError("step_id is only known inside a durable step's function")
        return self._step_id

    # -- the journal ------------------------------------------------------------------

    def _loaded(self) -> list[JournalEntry]:
        if self._journal is None:
            self._journal = self._store.read(self._run_id)
        return self._journal

    def _take(self, kind: EntryKind, name: str) -> tuple[int, JournalEntry | None]:
        """The next entry's index, and what the journal holds there (None: nothing yet);
        a journaled entry of another kind or name stops the run."""
        journal = self._loaded()
        index = self._next
        if index >= MAX_JOURNAL_ENTRIES:
            raise JournalFull(
                f"run {self._run_id} asked for journal entry {index + 1}: a durable "
                f"run journals at most {MAX_JOURNAL_ENTRIES} steps, sleeps and values"
            )
        self._next += 1
        if index >= len(journal):
            return index, None
        entry = journal[index]
        if entry.kind != kind or entry.name != name:
            raise NonDeterminismError(
                f"run {self._run_id} replayed {kind} {name!r} at position "
                f"{index + 1}, where its journal holds {entry.kind} {entry.name!r}: the "
                "task's code changed under the run (guard the change with "
                "current_run().patched(...)) or branches on something not journaled"
            )
        return index, entry

    def _replayed(self, entry: JournalEntry) -> Any:
        """A finished entry's value, or its failure raised again."""
        if entry.state == "failed":
            raise StepFailed(entry.name, entry.error_type, entry.error, entry.attempts)
        return entry.value

    def _write(self, index: int, entry: JournalEntry) -> None:
        """Write ``entry`` (and the recorded values before it) before the run goes on."""
        self._pending.append((index, entry))
        self._flush([], self._retention_ms)

    def _flush(self, again: list[tuple[int, JournalEntry]], ttl_ms: int) -> None:
        """Write the pending entries (after ``again``, entries written before and kept
        longer now), each kept ``ttl_ms``."""
        journal = self._loaded()
        fresh, self._pending = self._pending, []
        self._store.write(self._run_id, again + fresh, ttl_ms)
        for at, written in fresh:
            if at < len(journal):
                journal[at] = written
            else:
                journal.append(written)

    def _done(
        self, index: int, name: str, entry: JournalEntry | None, value: Any, started: int
    ) -> Any:
        encoded = encode_value(value, self._max_bytes, f"the value of step {name!r}")
        kept = from_json(encoded)
        attempts = entry.attempts + 1 if entry is not None else 1
        done = JournalEntry(
            kind="step", name=name, value=kept, attempts=attempts, started_ms=started,
            ended_ms=self._now_ms(),
        )  # fmt: skip
        self._write(index, done)
        return kept

    def _failed(
        self,
        index: int,
        name: str,
        entry: JournalEntry | None,
        err: Exception,
        retry: int | RetryPolicy | None,
        started: int,
    ) -> None:
        """A step raised: journal it as retrying and suspend for the backoff, or as
        failed for good and raise ``StepFailed``."""
        policy = step_policy(retry, self._retry)
        attempts = entry.attempts + 1 if entry is not None else 1
        decision = decide(policy, attempts, policy.rule_against(err) is None)
        state: EntryState = "retrying" if isinstance(decision, RetryAfter) else "failed"
        failed = JournalEntry(
            kind="step", name=name, state=state, error_type=type(err).__qualname__,
            error=str(err), attempts=attempts, started_ms=started, ended_ms=self._now_ms(),
        )  # fmt: skip
        if isinstance(decision, RetryAfter):
            self._suspend(index, failed, self._now_ms() + math.ceil(decision.delay_s * 1000))
        self._write(index, failed)
        raise StepFailed(name, failed.error_type, failed.error, attempts) from err

    def _sleep(self, name: str, until_of: Callable[[int], int]) -> None:
        index, entry = self._take("sleep", name)
        now = self._now_ms()
        if entry is not None:
            if now >= entry.until_ms:
                return
            self._suspend(None, None, entry.until_ms)
        until = until_of(now)
        asleep = JournalEntry(kind="sleep", name=name, until_ms=until, started_ms=now)
        if until <= now:
            self._pending.append((index, asleep))
            return
        self._suspend(index, asleep, until)

    def _suspend(self, index: int | None, entry: JournalEntry | None, until_ms: int) -> None:
        """Write ``entry`` (if any) and keep every entry until the wake-up and its
        retention after, then stop the run until ``until_ms``."""
        now = self._now_ms()
        if index is not None and entry is not None:
            self._pending.append((index, entry))
        fresh = {at for at, _ in self._pending}
        again = [(at, one) for at, one in enumerate(self._loaded()) if at not in fresh]
        self._flush(again, max(0, until_ms - now) + self._retention_ms)
        what = entry.name if entry is not None else "sleep"
        raise Suspended((until_ms - now) / 1000, f"durable run waits ({what}) until {until_ms}")

    def _recorded(self, kind: str, make: Callable[[], Any]) -> Any:
        index, entry = self._take("value", kind)
        if entry is not None:
            return entry.value
        value = make()
        self._pending.append((index, JournalEntry(kind="value", name=kind, value=value)))
        return value
