"""Weighted fair share: a paying tenant of weight 3 gets three runs for every one of a
free tenant while both have work waiting (Hatchet's weighted groups, Oban Pro's weighted
partitions), set at run time for a queue and kept in the backend.

python -m examples.fair_weights    # runs a worker in this process (one handler thread,
                                   # so the order is plain to see); prints how many of
                                   # the first 40 reports were each tenant's (30 and 10)

Weights apply to the messages made ready from then on; a key without a weight has
weight 1. ``tickwork queues weigh reports acme 3`` and ``PUT
/api/v1/queues/reports/weights/acme`` set the same; ``tickwork queues weights reports``
lists them. On Cassandra fair share is not offered (docs/guide.md, "Fair share").
"""

from __future__ import annotations

from tickwork import App, Worker, WorkerConfig

app = App()
ran: list[str] = []


@app.task(fair_key="tenant", queue="reports")
def build_report(tenant: str, report: int) -> None:
    ran.append(tenant)  # the work would be here


def main() -> None:
    app.queues.weigh("reports", "acme", 3)
    app.enqueue_many(build_report.call(tenant, n) for n in range(40) for tenant in ("acme", "free"))
    worker = Worker(
        app, WorkerConfig(queues=("reports",), concurrency=1, burst=True, poll_interval_s=0.1)
    )
    worker.run(duration_s=60)
    first = ran[:40]
    print(f"of the first 40 reports: acme {first.count('acme')}, free {first.count('free')}")
    print(f"weights in 'reports': {app.queues.weights('reports').weights}")
    app.close()


if __name__ == "__main__":
    main()
