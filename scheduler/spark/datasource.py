"""``df.write.format("tickwork")``: the Spark 4 Python data source front door.

Options (strings, as Spark passes them): ``backend``, ``task`` (required); ``args``
(comma-separated columns); ``kwargs`` (``name=column`` pairs, comma-separated); ``key``;
``at``; ``cron`` with ``tz``; ``queue``; ``priority``; ``identity`` (comma-separated
columns); ``on_conflict`` (default ``ignore``); ``on_invalid`` (``fail``, or ``skip`` to
count and drop invalid rows); ``batch_size`` (default: 25,000 on SQLite, 1,000
elsewhere); ``task_module``; ``block_timeout`` (seconds a batch waits for room in a full
bounded queue; default: as long as it takes). Only ``append`` mode.
``save()`` returns nothing: the totals are logged by ``commit()`` on the driver; use
``enqueue_dataframe`` when you need them as values.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.spark.rows import RowMapping, build_mapping, write_rows

log = logging.getLogger("tickwork.spark")


def _split(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def mapping_from_options(options: dict[str, str]) -> RowMapping:
    for required in ("backend", "task"):
        if not options.get(required):
            raise InvalidMessage(f"the tickwork data source needs option({required!r}, ...)")
    kwargs = {}
    for pair in _split(options.get("kwargs")):
        name, _, column = pair.partition("=")
        if not column:
            raise InvalidMessage(f"kwargs option {pair!r} is not name=column")
        kwargs[name.strip()] = column.strip()
    on_invalid = options.get("on_invalid", "fail")
    if on_invalid not in ("fail", "skip"):
        raise InvalidMessage(f"on_invalid must be 'fail' or 'skip', not {on_invalid!r}")
    return build_mapping(
        options["backend"],
        options["task"],
        args=_split(options.get("args")),
        kwargs=kwargs,
        key=options.get("key"),
        at=options.get("at"),
        cron=options.get("cron"),
        tz=options.get("tz", "UTC"),
        queue=options.get("queue"),
        priority=int(options["priority"]) if options.get("priority") else None,
        identity=_split(options.get("identity")) or None,
        on_conflict=options.get("on_conflict", "ignore"),
        on_invalid="reject" if on_invalid == "skip" else "fail",
        batch_size=int(options["batch_size"]) if options.get("batch_size") else None,
        task_module=options.get("task_module"),
        block_timeout=float(options["block_timeout"]) if options.get("block_timeout") else None,
    )


@dataclass
class Counts(WriterCommitMessage):
    enqueued: int
    skipped: int
    failed: int
    waited_s: float = 0.0


class TickworkWriter(DataSourceArrowWriter):
    def __init__(self, options: dict[str, str]) -> None:
        self.mapping = mapping_from_options(options)

    def write(self, iterator: Iterator[Any]) -> Counts:
        def rows() -> Iterator[dict[str, Any]]:
            for batch in iterator:
                yield from batch.to_pylist()

        result = write_rows(self.mapping, rows())
        return Counts(result.enqueued, result.skipped, result.failed, result.waited_s)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        done = [m for m in messages if isinstance(m, Counts)]
        log.warning(
            "tickwork: enqueued %d, skipped %d, invalid %d rows in %d partitions "
            "(%.1f s waiting for room in a full queue)",
            sum(m.enqueued for m in done),
            sum(m.skipped for m in done),
            sum(m.failed for m in done),
            len(done),
            sum(m.waited_s for m in done),
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo: what was written is idempotent, a re-run completes it."""


class TickworkDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "tickwork"

    def writer(self, schema: Any, overwrite: bool) -> TickworkWriter:
        if overwrite:
            raise InvalidMessage("the tickwork data source only appends: use mode('append')")
        return TickworkWriter(dict(self.options))
