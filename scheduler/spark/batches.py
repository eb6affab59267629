"""A DataFrame enqueued as one batch: ``enqueue_dataframe(df, ..., batch=SparkBatch(app,
on_complete=summary.s()))`` makes every row a member of one batch whose callbacks fire
once, when the last row's message settles (see ``scheduler.workflows.batches``).

On the driver the projected rows are cached and counted per partition (one Spark job), the
batch is opened with that size, and its callbacks are stored, parked; the executors then
number each row from its partition's offset, so a retried or speculative task names the
same members again (and writes nothing twice). If the job fails, the callbacks are
deleted: a batch that was not wholly written never calls back.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from tickwork.scheduler.app import App
from tickwork.scheduler.backends import Envelope, OnConflict, open_backend
from tickwork.scheduler.errors import InvalidMessage, TickworkError
from tickwork.scheduler.ids import new_chain_id
from tickwork.scheduler.model.shapes import When
from tickwork.scheduler.model.tasks import Call
from tickwork.scheduler.spark.rows import RowMapping, resolve_task
from tickwork.scheduler.workflows.batches import BatchDescription, build_callbacks


@dataclass(frozen=True)
class SparkBatch:
    """The callbacks of a DataFrame enqueued as one batch, and the ``app`` that knows
    their tasks (it validates them on the driver; nothing is written through it)."""

    app: App
    on_success: Call | None = None
    on_complete: Call | None = None
    on_failure: Call | None = None
    retention: timedelta | None = None

    def callbacks(self) -> dict[When, Call]:
        chosen: dict[When, Call | None] = {
            "success": self.on_success,
            "complete": self.on_complete,
            "failure": self.on_failure,
        }
        return {when: call for when, call in chosen.items() if call is not None}


def check_batch_mapping(mapping: RowMapping) -> None:
    """A batch's rows run once each and must all be written: refuse what breaks that."""
    if mapping.key or mapping.at or mapping.cron or mapping.trigger or mapping.identity:
        raise InvalidMessage(
            "rows enqueued as a batch cannot have a key, a time, a trigger or an identity: "
            "each runs once, named by the batch"
        )
    if mapping.on_invalid != "fail":
        raise InvalidMessage(
            "rows enqueued as a batch need on_invalid='fail': a rejected row would never "
            "settle, and the batch would never call back"
        )


def partition_offsets(projected: Any) -> tuple[tuple[int, ...], int]:
    """Where each partition's rows start in the batch, and the batch's size."""
    sizes = dict(projected.rdd.mapPartitionsWithIndex(_count).collect())
    offsets, total = [], 0
    for index in range(projected.rdd.getNumPartitions()):
        offsets.append(total)
        total += sizes.get(index, 0)
    return tuple(offsets), total


def _count(index: int, rows: Iterator[Any]) -> Iterator[tuple[int, int]]:
    yield index, sum(1 for _ in rows)


@dataclass(frozen=True)
class OpenedBatch:
    id: str
    expires_ms: int
    callbacks: list[Envelope]


def open_spark_batch(spec: SparkBatch, mapping: RowMapping, size: int) -> OpenedBatch:
    """Open the batch on ``mapping``'s backend and store its callbacks, parked."""
    if size == 0:
        raise InvalidMessage("the DataFrame has no rows: an empty batch never calls back")
    now_ms = mapping.now_ms
    batch_id = "b" + new_chain_id(now_ms)
    retention = spec.retention or timedelta(seconds=spec.app.settings.batch_retention_s)
    expires_ms = now_ms + retention // timedelta(milliseconds=1)
    callbacks, places = build_callbacks(spec.app.builder, batch_id, spec.callbacks(), now_ms)
    with App(mapping.backend) as app:
        try:
            queue = mapping.queue or resolve_task(app, mapping).options.queue
        except TickworkError:
            queue = app.settings.default_queue
        description = BatchDescription(
            size=size, created_ms=now_ms, queues=[queue], callbacks=places
        )
        app.backend.batches.open(batch_id, description.encode(), expires_ms)
        if callbacks:
            app.backend.messages.enqueue(callbacks, OnConflict.ERROR)
    return OpenedBatch(batch_id, expires_ms, callbacks)


def drop_callbacks(backend: str, opened: OpenedBatch) -> None:
    """The job failed: delete the batch's callbacks, so it never calls back."""
    with open_backend(backend) as store:
        for envelope in opened.callbacks:
            store.messages.delete(envelope.id, envelope.queue)
