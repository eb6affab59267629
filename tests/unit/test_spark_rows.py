"""The per-partition writer of the Spark path, run without Spark: rows per write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tickwork.scheduler import App
from tickwork.scheduler.spark.rows import BATCH_SIZE, SQLITE_BATCH_SIZE, build_mapping, write_rows

TASK = "tests.support.spark_tasks.send_invoice"


def rows(count: int) -> list[dict[str, object]]:
    return [{"customer_id": n, "amount_due": n * 1.5, "k": f"inv-{n}"} for n in range(count)]


def test_sqlite_takes_rows_in_large_writes_unless_told(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/rows.db"
    options: dict[str, Any] = {"args": ["customer_id"], "kwargs": {"amount": "amount_due"}}
    options["key"] = "k"
    assert build_mapping(url, TASK, **options).batch_size == SQLITE_BATCH_SIZE
    assert build_mapping("redis://localhost/0", TASK).batch_size == BATCH_SIZE
    for batch_size, writes in ((None, [3000]), (1000, [1000, 2000, 3000])):
        written: list[int] = []
        mapping = build_mapping(url, TASK, batch_size=batch_size, **options)
        result = write_rows(mapping, iter(rows(3000)), written.append)
        assert written == writes
        # the second pass finds the first one's keys
        expected = (3000, 0) if batch_size is None else (0, 3000)
        assert (result.enqueued, result.skipped) == expected
    with App(url) as app:
        (stats,) = app.backend.queues.stats("billing")
        assert stats.pending == 3000
