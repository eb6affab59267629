"""The per-partition core of the Spark integration: Arrow batches of rows in, messages out.

It runs on the executors, once per partition, for both front doors (``enqueue_dataframe``
and the ``tickwork`` data source). It opens one backend connection per partition, builds
and validates a message per row, and writes them in batches (one transaction, pipeline or
round trip per batch). It imports nothing from pyspark, so it is tested on plain Arrow data.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from tickwork.scheduler.app import App
from tickwork.scheduler.backends import Envelope, OnConflict, Outcome
from tickwork.scheduler.clock import SystemClock, to_datetime
from tickwork.scheduler.errors import InvalidMessage, TickworkError
from tickwork.scheduler.model.arguments import Arguments
from tickwork.scheduler.model.places import Membership
from tickwork.scheduler.model.retry import RetryPolicy
from tickwork.scheduler.model.tasks import Call, TaskFunction, TaskOptions
from tickwork.scheduler.producing.backpressure import write_bounded
from tickwork.scheduler.workflows.batches import member_id
from tickwork.triggers import Cron, Trigger


class InvalidRows(TickworkError):
    """Rows could not become messages and ``on_invalid="fail"`` was chosen."""


@dataclass(frozen=True)
class RowMapping:
    """How a row becomes a message. Plain, picklable configuration shipped to executors."""

    backend: str
    task: str
    now_ms: int
    args: tuple[str, ...] = ()
    kwargs: tuple[tuple[str, str], ...] = ()
    key: str | None = None
    at: str | None = None
    cron: str | None = None
    tz: str = "UTC"
    trigger: Trigger | None = None
    queue: str | None = None
    priority: int | None = None
    identity: tuple[str, ...] | None = None
    on_conflict: OnConflict = OnConflict.IGNORE
    on_invalid: str = "fail"
    batch_size: int = 1000
    schema: tuple[tuple[str, type], ...] | None = None
    task_module: str | None = None
    examples: int = 5
    block_timeout_s: float | None = None  # None: wait for room in a full queue as long as it takes
    #: rows are members of this batch (id, size, when its records expire), numbered from
    #: each partition's offset (``offsets``, by partition index)
    batch: tuple[str, int, int] | None = None
    offsets: tuple[int, ...] = ()

    @property
    def columns(self) -> list[str]:
        """Every input column the mapping reads, in a stable order."""
        names = [*self.args, *(column for _, column in self.kwargs)]
        names += [c for c in (self.key, self.at, self.cron) if c is not None]
        names += list(self.identity or ())
        return list(dict.fromkeys(names))


@dataclass
class PartitionResult:
    """What one partition did. ``rejected`` holds (row as JSON, reason) pairs."""

    enqueued: int = 0
    skipped: int = 0
    failed: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)
    waited_s: float = 0.0  # time spent waiting for room in a full (bounded) queue

    def add(self, outcomes: Iterable[Outcome]) -> None:
        for outcome in outcomes:
            if outcome in (Outcome.ENQUEUED, Outcome.REPLACED):
                self.enqueued += 1
            else:
                self.skipped += 1


def resolve_task(app: App, mapping: RowMapping) -> TaskFunction[..., Any]:
    """The registered task if its module imports here; else one built from ``schema``."""
    module_name = mapping.task_module or mapping.task.rpartition(".")[0]
    problem = f"task {mapping.task!r} is not importable here"
    if module_name:
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            problem = f"cannot import {module_name!r} for task {mapping.task!r}: {err}"
        else:
            for value in vars(module).values():
                if isinstance(value, App) and mapping.task in value.tasks:
                    return app.include(value.tasks[mapping.task])
            problem = f"module {module_name!r} registers no task named {mapping.task!r}"
    if mapping.schema is None:
        raise InvalidMessage(
            f"{problem}; install the task's module on the executors or pass schema="
        )
    return app.include(declared_task(app, mapping))


def declared_task(app: App, mapping: RowMapping) -> TaskFunction[..., Any]:
    """A stand-in task whose signature is the declared ``schema`` (name -> type)."""
    assert mapping.schema is not None
    parameters = [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=kind)
        for name, kind in mapping.schema
    ]

    def declared(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a task declared by schema only is validated here, never run")

    declared.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    declared.__annotations__ = dict(mapping.schema)
    options = TaskOptions(
        name=mapping.task, queue=mapping.queue or app.settings.default_queue, retry=RetryPolicy()
    )
    return TaskFunction(app, declared, options, Arguments(declared, mapping.task))


def _aware(value: Any, column: str) -> datetime:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidMessage(f"{column} {value!r} is not an ISO 8601 time") from None
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day, tzinfo=UTC)
    if not isinstance(value, datetime):
        raise InvalidMessage(f"{column} must be a timestamp, not {type(value).__name__}")
    if value.tzinfo is None:
        raise InvalidMessage(f"{column} {value.isoformat()} has no timezone")
    return value


def row_call(mapping: RowMapping, row: dict[str, Any]) -> Call:
    """The invocation a row stands for; raises ``InvalidMessage`` for a bad row."""
    args = [row[c] for c in mapping.args]
    kwargs = {name: row[column] for name, column in mapping.kwargs}
    key = None
    if mapping.key is not None:
        key = row[mapping.key]
        if key is None or key == "":
            raise InvalidMessage(f"key column {mapping.key!r} is empty")
        key = str(key)
    at = None
    trigger = mapping.trigger
    if mapping.at is not None:
        if row[mapping.at] is None:
            raise InvalidMessage(f"at column {mapping.at!r} is empty")
        at = _aware(row[mapping.at], f"at column {mapping.at!r}")
    if mapping.cron is not None:
        expression = row[mapping.cron]
        if not isinstance(expression, str):
            raise InvalidMessage(f"cron column {mapping.cron!r} is empty")
        try:
            trigger = Cron(expression, tz=mapping.tz)
        except ValueError as err:
            raise InvalidMessage(str(err).splitlines()[-1].strip() or str(err)) from None
    identity = None
    if key is None:
        if mapping.identity is not None:
            identity = json.dumps([row[c] for c in mapping.identity], default=str)
        else:  # the row's whole content: identical rows are one message
            identity = json.dumps(
                [
                    mapping.task,
                    args,
                    kwargs,
                    row.get(mapping.at) if mapping.at else None,
                    row.get(mapping.cron) if mapping.cron else None,
                ],
                default=str,
                sort_keys=True,
            )
    return Call(
        mapping.task,
        args,
        kwargs,
        key=key,
        at=at,
        trigger=trigger,
        queue=mapping.queue,
        priority=mapping.priority,
        identity=identity,
    )


def write_rows(
    mapping: RowMapping,
    rows: Iterator[dict[str, Any]],
    after_batch: Callable[[int], None] | None = None,
    partition: int = 0,
) -> PartitionResult:
    """Validate and write ``rows``: one connection, one backend write per batch. A batch
    for a full bounded queue waits for room (``write_bounded``), so a job slows down to the
    workers' pace instead of burying the backend. For a batch (``mapping.batch``) each row
    is a member numbered from its ``partition``'s offset: a retried task names the same
    members again."""
    result = PartitionResult()
    app = App(mapping.backend)
    try:
        resolve_task(app, mapping)
        now = to_datetime(mapping.now_ms)
        pending: list[Envelope] = []

        timeout_s = math.inf if mapping.block_timeout_s is None else mapping.block_timeout_s

        def flush() -> None:
            outcomes, waited_s = write_bounded(
                app.backend, pending, mapping.on_conflict, timeout_s=timeout_s
            )
            result.add(outcomes)
            result.waited_s += waited_s
            pending.clear()
            if after_batch is not None:
                after_batch(result.enqueued + result.skipped)

        index = mapping.offsets[partition] if mapping.batch is not None else 0
        for row in rows:
            try:
                _, envelope = _build(app, mapping, row, now, index)
                index += 1
            except InvalidMessage as err:
                reason = str(err)
                if mapping.on_invalid == "fail":
                    raise InvalidRows(f"row {json.dumps(row, default=str)}: {reason}") from None
                result.failed += 1
                result.rejected.append((json.dumps(row, default=str), reason))
                continue
            pending.append(envelope)
            if len(pending) >= mapping.batch_size:
                flush()
        if pending:
            flush()
    finally:
        app.close()
    return result


def _build(
    app: App, mapping: RowMapping, row: dict[str, Any], now: datetime, index: int
) -> tuple[str, Envelope]:
    call = row_call(mapping, row)
    if mapping.batch is None:
        return app.build(call, mapping.now_ms, now)
    batch_id, size, expires_ms = mapping.batch
    member = Membership(batch=batch_id, index=index, size=size, expires_ms=expires_ms)
    chain = member_id(batch_id, index)
    return app.builder.build(call, mapping.now_ms, now, chain=chain, member=member)


#: rows per write when ``batch_size`` is not given: SQLite takes them in far fewer, larger
#: transactions. Keyed ids are hashes, so a write of N keyed rows dirties about N pages of
#: each index, and every page goes to the WAL and is checkpointed once per write (and the
#: other partition's commit empties this one's page cache), so larger writes went in
#: about twice as fast (``bench/NOTES.md``). A write holds the file's one write lock for
#: about a second at that size. Redis and Cassandra keep 1,000: a bigger script or batch
#: would stall other clients longer and gains little.
SQLITE_BATCH_SIZE = 25_000
BATCH_SIZE = 1000


def default_batch_size(backend: str) -> int:
    """Rows per write to ``backend`` (a URL) when the caller does not say."""
    return SQLITE_BATCH_SIZE if backend.startswith("sqlite") else BATCH_SIZE


def build_mapping(
    backend: str,
    task: str,
    *,
    args: Sequence[str] = (),
    kwargs: Mapping[str, str] | None = None,
    key: str | None = None,
    at: str | None = None,
    cron: str | None = None,
    tz: str = "UTC",
    trigger: Trigger | None = None,
    queue: str | None = None,
    priority: int | None = None,
    identity: Sequence[str] | None = None,
    on_conflict: str = "ignore",
    on_invalid: str = "fail",
    batch_size: int | None = None,
    schema: Mapping[str, type] | None = None,
    task_module: str | None = None,
    block_timeout: float | None = None,
) -> RowMapping:
    """Check the options once, on the driver, and freeze them for the executors."""
    if on_invalid not in ("fail", "reject"):
        raise InvalidMessage(f"on_invalid must be 'fail' or 'reject', not {on_invalid!r}")
    try:
        mode = OnConflict(on_conflict)
    except ValueError:
        raise InvalidMessage(
            f"on_conflict must be 'error', 'ignore' or 'replace', not {on_conflict!r}"
        ) from None
    if sum(x is not None for x in (at, cron, trigger)) > 1:
        raise InvalidMessage("give at most one of at=, cron= and trigger=")
    if batch_size is None:
        batch_size = default_batch_size(backend)
    if batch_size < 1:
        raise InvalidMessage("batch_size must be at least 1")
    if block_timeout is not None and block_timeout < 0:
        raise InvalidMessage("block_timeout must be at least 0 seconds (or None: no limit)")
    if cron is not None:
        try:
            Cron("* * * * *", tz=tz)
        except ValueError as err:
            raise InvalidMessage(f"unknown timezone {tz!r}") from err
    return RowMapping(
        backend=backend,
        task=task,
        now_ms=SystemClock().now_ms(),
        args=tuple(args),
        kwargs=tuple((kwargs or {}).items()),
        key=key,
        at=at,
        cron=cron,
        tz=tz,
        trigger=trigger,
        queue=queue,
        priority=priority,
        identity=None if identity is None else tuple(identity),
        on_conflict=mode,
        on_invalid=on_invalid,
        batch_size=batch_size,
        schema=None if schema is None else tuple(schema.items()),
        task_module=task_module,
        block_timeout_s=block_timeout,
    )
