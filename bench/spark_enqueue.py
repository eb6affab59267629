"""Rows per second from PySpark into each backend, side by side in one run.

    python -m bench.spark_enqueue [--rows 1000000] [--naive-rows 20000] [--batch-size N]
                                  [--out FILE]

For each backend (SQLite, and a local Redis started here): ``enqueue_dataframe`` over
``local[2]`` (rows per write: each backend's default, or ``--batch-size``), against a
no-write pass over the same rows (Spark and Arrow cost alone) and
a naive baseline that enqueues row by row with ``foreach`` (one connection and one
``App.enqueue`` per row; run on fewer rows, it is slow). The input is cached first.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import emit, machine
from tests.support.servers import RedisServer

ROOT = Path(__file__).resolve().parents[1]
TASK = "tests.support.spark_tasks.send_invoice"


def session() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = str(ROOT)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tickwork-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def frame(spark: Any, rows: int) -> Any:
    from pyspark.sql import functions as f

    df = (
        spark.range(rows)
        .repartition(8)
        .select(
            f.col("id").alias("customer_id"),
            (f.col("id") * 1.5).alias("amount_due"),
            f.concat(f.lit("inv-"), f.col("id").cast("string")).alias("invoice_key"),
        )
    )
    return df.cache()


def timed(rows: int, action: Any) -> dict[str, Any]:
    started = time.perf_counter()
    action()
    seconds = time.perf_counter() - started
    return {"rows": rows, "seconds": round(seconds, 2), "rows_per_second": round(rows / seconds)}


def run_backend(
    spark: Any, url: str, rows: int, naive_rows: int, batch_size: int | None
) -> dict[str, Any]:
    from tickwork.scheduler import App
    from tickwork.scheduler.spark import enqueue_dataframe

    def purge() -> None:
        app = App(url)
        app.backend.queues.purge("billing")
        app.close()

    df = frame(spark, rows)
    df.count()
    small = frame(spark, naive_rows)
    small.count()
    options: dict[str, Any] = dict(
        args=["customer_id"],
        kwargs={"amount": "amount_due"},
        key="invoice_key",
        queue="billing",
        batch_size=batch_size,
    )
    purge()
    fast = timed(rows, lambda: enqueue_dataframe(df, url, TASK, **options))
    purge()

    def naive() -> None:
        def one_by_one(row: Any) -> None:
            from tests.support.spark_tasks import send_invoice
            from tickwork.scheduler import App

            app = App(url)
            app.include(send_invoice)
            app.enqueue(
                send_invoice.call(row.customer_id, amount=row.amount_due).options(
                    key=row.invoice_key
                ),
                on_conflict="ignore",
            )
            app.close()

        small.foreach(one_by_one)

    slow = timed(naive_rows, naive)
    purge()
    df.unpersist()
    small.unpersist()
    return {
        "backend": url.split("://")[0],
        "enqueue_dataframe": fast,
        "naive_foreach": slow,
        "speedup": round(fast["rows_per_second"] / slow["rows_per_second"], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--naive-rows", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, help="rows per write (default: the backend's)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    spark = session()
    server = RedisServer()
    try:
        df = frame(spark, args.rows)
        df.count()

        def no_write() -> None:
            from pyspark.sql.functions import col

            df.select(col("customer_id")).mapInArrow(
                lambda batches: (b.slice(0, 0) for b in batches), "customer_id long"
            ).count()

        baseline = timed(args.rows, no_write)
        df.unpersist()
        with tempfile.TemporaryDirectory() as scratch:
            urls = [f"sqlite:///{scratch}/spark.db", server.url]
            results = [
                run_backend(spark, url, args.rows, args.naive_rows, args.batch_size) for url in urls
            ]
        result = {
            "machine": machine(),
            "master": "local[2]",
            "batch_size": args.batch_size or "each backend's default",
            "no_write_pass": baseline,
            "backends": results,
        }
    finally:
        server.stop()
        spark.stop()
    emit(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
