"""A data engineer's template: turn a DataFrame of invoices into scheduled tasks.

    pip install 'tickwork[spark]'            # needs Java 17+
    python -m examples.spark_invoices        # uses TICKWORK_BACKEND (default: sqlite)
    tickwork worker -A examples.billing.tasks --queue billing

Then the same customers get a reminder each, enqueued as one batch: when the last
reminder is done, the batch's callback writes a summary (sent, failed, total due) once.

On a cluster, point ``backend`` at Redis (or Cassandra) and install this project (with
``examples.billing.tasks``) on the executors; a ``sqlite://`` backend only works with a
``local[*]`` master.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime, timedelta


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])
    )
    from pyspark.sql import SparkSession

    from examples.billing import tasks
    from tickwork.spark import SparkBatch, enqueue_dataframe

    backend = os.environ.get("TICKWORK_BACKEND", "sqlite:///tickwork.db")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("invoices")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    soon = datetime.now(UTC) + timedelta(seconds=5)
    df = spark.createDataFrame(
        [
            (42, 99.5, "inv-2026-11-42", soon),
            (7, 12.0, "inv-2026-11-7", soon),
            (13, -1.0, None, soon),
        ],  # the last row has no key: rejected below
        "customer_id long, amount_due double, invoice_key string, send_at timestamp",
    )
    result = enqueue_dataframe(
        df,
        backend,
        "examples.billing.tasks.send_invoice",
        args=["customer_id"],
        kwargs={"amount": "amount_due"},
        key="invoice_key",  # dedupe, lookup and cancel by invoice
        at="send_at",  # when to send it
        queue="billing",
        on_conflict="ignore",
        on_invalid="reject",
        batch_size=1000,
    )
    print(f"enqueued {result.enqueued}, skipped {result.skipped}, rejected {result.failed}")
    for row, reason in result.examples:
        print(f"  rejected {row}: {reason}")
    reminders = enqueue_dataframe(
        df,
        backend,
        "examples.billing.tasks.remind",
        args=["customer_id", "amount_due"],
        queue="billing",
        batch=SparkBatch(tasks.app, on_complete=tasks.write_summary.s()),
    )
    print(f"enqueued {reminders.enqueued} reminders as batch {reminders.batch}")
    spark.stop()


if __name__ == "__main__":
    main()
