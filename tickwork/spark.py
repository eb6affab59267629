"""Enqueue from Spark: ``enqueue_dataframe(df, ...)``, or ``register(spark)`` and then
``df.write.format("tickwork")`` (extra ``spark``)."""

from tickwork.scheduler.spark import (
    EnqueueResult,
    InvalidRows,
    RowMapping,
    SparkBatch,
    enqueue_dataframe,
    register,
)

__all__ = [
    "EnqueueResult",
    "InvalidRows",
    "RowMapping",
    "SparkBatch",
    "enqueue_dataframe",
    "register",
]
