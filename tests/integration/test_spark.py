"""Enqueue from PySpark, on a real local Spark session, into every backend."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.backends import BACKEND_NAMES, PAIR_NAMES, backend_url
from tickwork.scheduler import App, InvalidMessage

ROOT = Path(__file__).resolve().parents[2]
TASK = "tests.support.spark_tasks.send_invoice"


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2,3]")  # 2 threads, a failed task is retried
        .appName("tickwork-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.python.worker.reuse", "true")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(params=BACKEND_NAMES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return backend_url(request.param, tmp_path)


@pytest.fixture(params=PAIR_NAMES)
def pair_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """SQLite and a Redis Cluster: for what Spark does the same way on every backend."""
    return backend_url(request.param, tmp_path)


def invoices(spark, count: int, partitions: int = 4):  # type: ignore[no-untyped-def]
    base = datetime(2030, 1, 1, tzinfo=UTC)
    rows = [(i, float(i) * 1.5, f"inv-{i}", base + timedelta(minutes=i)) for i in range(count)]
    return spark.createDataFrame(
        rows, "customer_id long, amount_due double, invoice_key string, send_at timestamp"
    ).repartition(partitions)


def stored(url: str, queue: str = "billing") -> int:
    app = App(url)
    try:
        stats = app.backend.queues.stats(queue)
        return stats[0].ready + stats[0].scheduled if stats else 0
    finally:
        app.close()


def enqueue_invoices(df, url: str, **options):  # type: ignore[no-untyped-def]
    """``enqueue_dataframe`` of TASK with the invoice columns as its arguments."""
    from tickwork.scheduler.spark import enqueue_dataframe

    options.setdefault("queue", "billing")
    return enqueue_dataframe(
        df, url, TASK, args=["customer_id"], kwargs={"amount": "amount_due"}, **options
    )


def purge(url: str) -> None:
    app = App(url)
    app.backend.queues.purge("billing")
    app.close()


def test_enqueue_rows_and_rerun_idempotently(spark, url: str) -> None:  # type: ignore[no-untyped-def]

    df = invoices(spark, 1000)
    options = dict(
        key="invoice_key",
        at="send_at",
        queue="billing",
        batch_size=200,
    )
    first = enqueue_invoices(df, url, **options)
    assert (first.enqueued, first.skipped, first.failed) == (1000, 0, 0)
    assert first.partitions == 4
    again = enqueue_invoices(df, url, **options)
    assert (again.enqueued, again.skipped, again.failed) == (0, 1000, 0)
    assert stored(url) == 1000
    app = App(url)
    found = app.get(key="inv-7", queue="billing")
    assert found is not None and found.message.args == [7]
    assert found.message.kwargs == {"amount": 10.5}
    assert found.due_at == datetime(2030, 1, 1, 0, 7, tzinfo=UTC)
    assert (
        app.cancel(key="inv-7", queue="billing") and app.get(key="inv-7", queue="billing") is None
    )
    app.close()
    assert stored(url) == 999


def test_a_retried_partition_writes_nothing_twice(spark, url: str) -> None:  # type: ignore[no-untyped-def]

    def fail_first_attempt(rows_so_far: int) -> None:
        from pyspark import TaskContext

        # every partition's first attempt fails after its first written batch: a full run
        # once injected nothing when only partition 0 was targeted (cause not found)
        context = TaskContext.get()
        assert context is not None, "runs inside a Spark task"
        if context.attemptNumber() == 0 and rows_so_far >= 100:
            raise RuntimeError("injected executor failure after a written batch")

    for keyed in (True, False):
        df = invoices(spark, 800, partitions=2)
        result = enqueue_invoices(
            df,
            url,
            key="invoice_key" if keyed else None,
            queue="billing",
            batch_size=100,
            after_batch=fail_first_attempt,
        )
        assert result.failed == 0
        assert result.enqueued + result.skipped == 800
        assert result.skipped >= 100, "the retry found the first attempt's rows"
        assert stored(url) == 800
        purge(url)


def test_invalid_rows_are_rejected_with_examples(spark, pair_url: str) -> None:  # type: ignore[no-untyped-def]
    url = pair_url

    rows = [("1", 10.0, "a"), ("two", 20.0, "b"), ("3", 30.0, None), ("4", 40.0, "d")]
    df = spark.createDataFrame(rows, "customer_id string, amount_due double, k string")
    result = enqueue_invoices(
        df,
        url,
        key="k",
        queue="billing",
        on_invalid="reject",
    )
    assert (result.enqueued, result.failed) == (2, 2)
    reasons = " | ".join(reason for _, reason in result.examples)
    assert "customer_id" in reasons and "key column 'k' is empty" in reasons
    assert result.rejected.count() == 2
    assert stored(url) == 2


def test_invalid_rows_can_fail_the_job(spark, pair_url: str) -> None:  # type: ignore[no-untyped-def]
    url = pair_url

    df = spark.createDataFrame([("x", 1.0)], "customer_id string, amount_due double")
    with pytest.raises(Exception, match="invalid arguments"):
        enqueue_invoices(df, url, queue="billing")


def test_bad_options_fail_on_the_driver(spark, pair_url: str) -> None:  # type: ignore[no-untyped-def]
    url = pair_url
    from tickwork.scheduler.spark import enqueue_dataframe

    df = invoices(spark, 3)
    with pytest.raises(InvalidMessage, match="no column named 'nope'"):
        enqueue_dataframe(df, url, TASK, args=["nope"])
    with pytest.raises(InvalidMessage, match="on_conflict"):
        enqueue_dataframe(df, url, TASK, args=["customer_id"], on_conflict="merge")


def test_cron_triggers_from_a_column(spark, pair_url: str) -> None:  # type: ignore[no-untyped-def]
    url = pair_url

    rows = [
        (1, 1.0, "c1", "0 9 * * MON-FRI"),
        (2, 2.0, "c2", "*/5 * * * * ?"),
        (3, 3.0, "c3", "not a cron"),
    ]
    df = spark.createDataFrame(rows, "customer_id long, amount_due double, k string, expr string")
    result = enqueue_invoices(
        df,
        url,
        key="k",
        cron="expr",
        tz="Europe/Paris",
        queue="billing",
        on_invalid="reject",
    )
    assert (result.enqueued, result.failed) == (2, 1)
    app = App(url)
    schedules = {s.key: s for s in app.schedules.list("billing")}
    assert set(schedules) == {"c1", "c2"}
    assert schedules["c1"].trigger.tz == "Europe/Paris"  # type: ignore[attr-defined]
    app.close()


def test_declared_schema_when_the_task_module_is_not_importable(spark, pair_url: str) -> None:  # type: ignore[no-untyped-def]
    url = pair_url
    from tickwork.scheduler.spark import enqueue_dataframe

    df = spark.createDataFrame([(1, "a"), (2, "b")], "user_id long, k string")
    with pytest.raises(Exception, match=r"not importable|cannot import"):
        enqueue_dataframe(df, url, "remote.service.notify", args=["user_id"], key="k")
    result = enqueue_dataframe(
        df, url, "remote.service.notify", args=["user_id"], key="k", schema={"user_id": int}
    )
    assert result.enqueued == 2
    bad = spark.createDataFrame([("x", "c")], "user_id string, k string")
    result = enqueue_dataframe(
        bad,
        url,
        "remote.service.notify",
        args=["user_id"],
        key="k",
        schema={"user_id": int},
        on_invalid="reject",
    )
    assert result.failed == 1


def test_rows_without_a_key_use_their_content_or_identity_columns(spark, pair_url: str) -> None:  # type: ignore[no-untyped-def]
    url = pair_url

    rows = [(1, 1.0, "r1"), (1, 1.0, "r2"), (2, 2.0, "r3")]
    df = spark.createDataFrame(rows, "customer_id long, amount_due double, row_id string")
    by_content = enqueue_invoices(df, url, queue="billing")
    assert stored(url) == 2, "identical rows are one message"
    assert by_content.enqueued + by_content.skipped == 3
    if not url.startswith("cassandra"):
        # SQLite and Redis check and write atomically; on Cassandra two partitions writing
        # the same id at once may both count it as enqueued (the store still holds one)
        assert by_content.enqueued == 2 and by_content.skipped == 1
    purge(url)
    by_identity = enqueue_invoices(
        df,
        url,
        queue="billing",
        identity=["row_id"],
    )
    assert by_identity.enqueued == 3
    again = enqueue_invoices(
        df,
        url,
        queue="billing",
        identity=["row_id"],
    )
    assert again.enqueued == 0 and stored(url) == 3


def test_the_data_source_writer(spark, pair_url: str) -> None:  # type: ignore[no-untyped-def]
    url = pair_url
    from tickwork.scheduler.spark import register

    register(spark)
    df = invoices(spark, 300, partitions=3)
    options = {
        "backend": url,
        "task": TASK,
        "args": "customer_id",
        "kwargs": "amount=amount_due",
        "key": "invoice_key",
        "queue": "billing",
    }
    df.write.format("tickwork").mode("append").options(**options, at="send_at").save()
    assert stored(url) == 300
    df.write.format("tickwork").mode("append").options(**options).save()
    assert stored(url) == 300, "a re-run writes nothing twice"
    with pytest.raises(Exception, match="only appends"):
        df.write.format("tickwork").mode("overwrite").option("backend", url).option(
            "task", TASK
        ).save()


def test_a_job_five_times_the_bound_waits_for_a_worker(spark, pair_url: str) -> None:  # type: ignore[no-untyped-def]
    url = pair_url
    import threading

    from tests.support import spark_tasks
    from tests.support.helpers import running, wait_for
    from tickwork.scheduler.spark import enqueue_dataframe

    bound, rows, batch = 100, 500, 50
    app = spark_tasks.app
    app.use_backend(url)
    spark_tasks.RAN.clear()
    app.queues.configure("drained", max_pending=bound)
    most, done = [0], threading.Event()

    def sample() -> None:  # the fill, as often as it can be read
        while not done.is_set():
            found = app.backend.queues.stats("drained")
            most[0] = max(most[0], found[0].pending if found else 0)
            done.wait(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        with running(app, queues=("drained",), concurrency=4) as worker:
            result = enqueue_dataframe(
                invoices(spark, rows, partitions=2),
                url,
                "tests.support.spark_tasks.count_invoice",
                args=["customer_id"],
                kwargs={"amount": "amount_due"},
                queue="drained",
                batch_size=batch,
            )
            wait_for(lambda: worker.stats.acked == rows, 120)
    finally:
        done.set()
        sampler.join()
        app.close()
    assert (result.enqueued, result.skipped, result.failed) == (rows, 0, 0)
    assert result.waited_s > 0 and result.longest_wait_s > 0, "partitions waited for room"
    assert sorted(spark_tasks.RAN) == list(range(rows)), "every row ran exactly once"
    # Cassandra's bound is approximate: the other partition may write one batch at once
    margin = batch if url.startswith("cassandra") else 0
    assert most[0] <= bound + margin


def test_rows_enqueued_as_a_batch_call_back_once(spark, url: str) -> None:  # type: ignore[no-untyped-def]
    from tests.support import spark_tasks
    from tests.support.helpers import running, wait_for
    from tickwork.scheduler.spark import SparkBatch, enqueue_dataframe

    app = spark_tasks.app
    app.use_backend(url)
    spark_tasks.SUMMARIES.clear()
    callbacks = SparkBatch(app, on_complete=spark_tasks.summarize.s())
    df = spark.createDataFrame([(i,) for i in range(60)], "n long").repartition(3)
    task = "tests.support.spark_tasks.double"
    result = enqueue_dataframe(df, url, task, args=["n"], batch=callbacks)
    assert result.enqueued == 60 and result.batch is not None
    status = app.batches.get(result.batch)
    assert (status.size, status.settled, list(status.callbacks)) == (60, 0, ["complete"])
    with running(app, queues=("tally",)):
        wait_for(lambda: len(spark_tasks.SUMMARIES) == 1, 60)
    (outcome,) = spark_tasks.SUMMARIES
    assert outcome["size"] == 60 and outcome["failed"] == 0
    assert sorted(outcome["results"]) == [2 * i for i in range(60)]  # type: ignore[call-overload]

    bad = spark.createDataFrame([("7",), ("x",)], "n string")
    with pytest.raises(Exception, match="valid integer"):
        enqueue_dataframe(bad, url, task, args=["n"], batch=callbacks)
    assert all(s.scheduled == 0 for s in app.backend.queues.stats("tally")), "callbacks dropped"
    with pytest.raises(InvalidMessage, match="cannot have a key"):
        enqueue_dataframe(df, url, task, args=["n"], key="n", batch=callbacks)
    app.close()
