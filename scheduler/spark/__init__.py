"""Enqueue from PySpark: one scheduled message per DataFrame row, in bulk and idempotently.

Two front doors share one per-partition core (``scheduler.spark.rows``)::

    from tickwork.spark import enqueue_dataframe, register
    result = enqueue_dataframe(df, backend="redis://...", task="billing.tasks.send_invoice",
                               args=["customer_id"], kwargs={"amount": "amount_due"},
                               key="invoice_key", at="send_at", queue="billing")
    result.enqueued, result.skipped, result.failed

    register(spark)
    df.write.format("tickwork").option("backend", "...").option("task", "...") \\
        .option("args", "customer_id").mode("append").save()

Each partition opens one connection and writes batches (``batch_size`` rows per
transaction or round trip). Ids derive from the key column, or, for rows without a key,
from the columns named by ``identity`` (default: the row's task, arguments and time), so a
Spark task retry or speculative copy writes nothing twice. Needs the ``spark`` extra.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from tickwork.scheduler.errors import ConfigurationError, InvalidMessage
from tickwork.scheduler.spark.batches import (
    SparkBatch,
    check_batch_mapping,
    drop_callbacks,
    open_spark_batch,
    partition_offsets,
)
from tickwork.scheduler.spark.rows import (
    InvalidRows,
    PartitionResult,
    RowMapping,
    build_mapping,
    write_rows,
)
from tickwork.triggers import Trigger

try:
    import pyarrow as pa
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ConfigurationError(
        "tickwork.spark needs the 'spark' extra: pip install 'tickwork[spark]'"
    ) from err

OUTPUT_SCHEMA = (
    "kind string, enqueued long, skipped long, failed long, waited_s double, row string, "
    "reason string"
)
_ARROW_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("enqueued", pa.int64()),
        ("skipped", pa.int64()),
        ("failed", pa.int64()),
        ("waited_s", pa.float64()),
        ("row", pa.string()),
        ("reason", pa.string()),
    ]
)


@dataclass
class EnqueueResult:
    """Counts the driver can trust (from successful task attempts only).

    ``enqueued``: rows stored by this job. ``skipped``: rows already stored (their key was
    taken, or an identical message was there, e.g. written by a retried attempt).
    ``failed``: invalid rows. ``examples``: up to five (row, reason) pairs. ``rejected``:
    with ``on_invalid="reject"``, a cached DataFrame of (row, reason) for every invalid row.
    ``waited_s``: seconds partitions spent waiting for room in a full bounded queue, summed
    (``longest_wait_s``: the partition that waited longest).
    """

    enqueued: int = 0
    skipped: int = 0
    failed: int = 0
    partitions: int = 0
    waited_s: float = 0.0
    longest_wait_s: float = 0.0
    examples: list[tuple[str, str]] = field(default_factory=list)
    rejected: Any = None
    batch: str | None = None  # the batch id, when the rows were enqueued as one batch


def _partition_batches(
    mapping: RowMapping,
    after_batch: Callable[[int], None] | None,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: write this partition, yield its counts and rejects."""

    def rows() -> Iterator[dict[str, Any]]:
        for batch in batches:
            yield from batch.to_pylist()

    partition = 0
    if mapping.batch is not None:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
    result = write_rows(mapping, rows(), after_batch, partition)
    yield from result_batches(result)


def result_batches(result: PartitionResult) -> Iterator[pa.RecordBatch]:
    yield pa.RecordBatch.from_pylist(
        [
            {
                "kind": "count",
                "enqueued": result.enqueued,
                "skipped": result.skipped,
                "failed": result.failed,
                "waited_s": result.waited_s,
                "row": None,
                "reason": None,
            }
        ],
        schema=_ARROW_SCHEMA,
    )
    for start in range(0, len(result.rejected), 10_000):
        chunk = result.rejected[start : start + 10_000]
        yield pa.RecordBatch.from_pylist(
            [
                {
                    "kind": "rejected",
                    "enqueued": 0,
                    "skipped": 0,
                    "failed": 0,
                    "waited_s": 0.0,
                    "row": row,
                    "reason": reason,
                }
                for row, reason in chunk
            ],
            schema=_ARROW_SCHEMA,
        )


def enqueue_dataframe(
    df: Any,
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
    max_partitions: int | None = None,
    schema: Mapping[str, type] | None = None,
    task_module: str | None = None,
    after_batch: Callable[[int], None] | None = None,
    block_timeout: float | None = None,
    batch: SparkBatch | None = None,
) -> EnqueueResult:
    """Turn every row of ``df`` into a scheduled message of ``task`` on ``backend``.

    Columns: ``args`` (positional arguments), ``kwargs`` (argument name -> column),
    ``key`` (dedupe, lookup, cancel), ``at`` (a timestamp: run once then) or ``cron`` (a
    cron expression per row, in ``tz``); or one ``trigger`` for all rows. Arguments are
    validated against the task's signature where its module imports on the executors,
    else against ``schema`` (argument name -> Python type). Invalid rows fail the job
    (``on_invalid="fail"``, at the first one) or are counted and returned
    (``"reject"``). ``max_partitions`` bounds concurrent connections to the backend.
    ``batch_size`` rows go in each write (default: 25,000 on SQLite, 1,000 elsewhere).
    ``after_batch(rows_so_far)`` runs on the executor after each written batch. A batch
    for a full bounded queue waits for room, for at most ``block_timeout`` seconds (None:
    as long as it takes; after it the task fails with ``QueueFull`` and Spark's retry
    writes nothing twice). With ``batch``, every row is a member of one batch whose
    callbacks fire once when the last row's message settles (``scheduler.spark.batches``;
    ``EnqueueResult.batch`` is its id).
    """
    mapping = build_mapping(
        backend,
        task,
        args=args,
        kwargs=kwargs,
        key=key,
        at=at,
        cron=cron,
        tz=tz,
        trigger=trigger,
        queue=queue,
        priority=priority,
        identity=identity,
        on_conflict=on_conflict,
        on_invalid=on_invalid,
        batch_size=batch_size,
        schema=schema,
        task_module=task_module,
        block_timeout=block_timeout,
    )
    missing = [c for c in mapping.columns if c not in df.columns]
    if missing:
        raise InvalidMessage(f"no column named {', '.join(map(repr, missing))} in the DataFrame")
    master = df.sparkSession.sparkContext.master
    if backend.startswith("sqlite") and not master.startswith("local"):
        raise ConfigurationError(
            "a sqlite:// backend is one file on one machine; executors of a "
            f"{master!r} cluster cannot share it: use Redis or Cassandra"
        )
    projected = df.select(*mapping.columns) if mapping.columns else df.select()
    if max_partitions is not None:
        projected = projected.coalesce(max_partitions)
    from pyspark import StorageLevel

    opened = None
    if batch is not None:
        check_batch_mapping(mapping)
        projected = projected.persist(StorageLevel.MEMORY_AND_DISK)  # numbered once
        offsets, size = partition_offsets(projected)
        opened = open_spark_batch(batch, mapping, size)
        mapping = replace(mapping, batch=(opened.id, size, opened.expires_ms), offsets=offsets)
    try:
        result = _run(projected, mapping, after_batch)
    except BaseException:
        if opened is not None:
            drop_callbacks(backend, opened)
        raise
    finally:
        if batch is not None:
            projected.unpersist()
    result.batch = None if opened is None else opened.id
    return result


def _run(
    projected: Any, mapping: RowMapping, after_batch: Callable[[int], None] | None
) -> EnqueueResult:
    """Write every partition and gather the counts on the driver."""
    out = projected.mapInArrow(partial(_partition_batches, mapping, after_batch), OUTPUT_SCHEMA)
    from pyspark import StorageLevel

    out = out.persist(StorageLevel.MEMORY_AND_DISK)
    from pyspark.sql import functions as f

    counts = (
        out.where("kind = 'count'")
        .groupBy()
        .agg(
            f.sum("enqueued").alias("enqueued"),
            f.sum("skipped").alias("skipped"),
            f.sum("failed").alias("failed"),
            f.count("kind").alias("partitions"),
            f.sum("waited_s").alias("waited_s"),
            f.max("waited_s").alias("longest_wait_s"),
        )
        .collect()[0]
    )
    rejected = out.where("kind = 'rejected'").select("row", "reason")
    examples = [(r["row"], r["reason"]) for r in rejected.limit(5).collect()]
    result = EnqueueResult(
        enqueued=int(counts["enqueued"] or 0),
        skipped=int(counts["skipped"] or 0),
        failed=int(counts["failed"] or 0),
        partitions=int(counts["partitions"] or 0),
        waited_s=float(counts["waited_s"] or 0.0),
        longest_wait_s=float(counts["longest_wait_s"] or 0.0),
        examples=examples,
        rejected=rejected if mapping.on_invalid == "reject" else None,
    )
    if mapping.on_invalid != "reject":
        out.unpersist()
    return result


def register(spark: Any) -> None:
    """Make ``df.write.format("tickwork")`` available in ``spark`` (Spark 4+)."""
    from tickwork.scheduler.spark.datasource import TickworkDataSource

    spark.dataSource.register(TickworkDataSource)


__all__ = [
    "EnqueueResult",
    "InvalidRows",
    "RowMapping",
    "SparkBatch",
    "enqueue_dataframe",
    "register",
]
