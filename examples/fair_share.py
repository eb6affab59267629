"""Fair share between keys: one customer queues 200 reports, two others 3 each a moment
later; with ``fair_key="customer"`` the others' reports run within the first few, taking
turns with the flood (Hatchet's group round robin), instead of after all 200.

python -m examples.fair_share    # runs a worker in this process (one handler thread, so
                                 # the order is plain to see); prints where the other
                                 # customers' reports ran

Turns are taken within a priority level; a message of a task without ``fair_key`` keeps
its place by due time. On Redis Cluster each shard of a queue takes its own turns. On
Cassandra a fair message is refused (docs/guide.md, "Fair share").
"""

from __future__ import annotations

from tickwork import App, Worker, WorkerConfig

app = App()
ran: list[str] = []


@app.task(fair_key="customer")
def build_report(customer: str, report: int) -> None:
    ran.append(customer)  # the work would be here


def main() -> None:
    app.enqueue_many([build_report.call("acme", n) for n in range(200)])
    for customer in ("globex", "initech"):
        for n in range(3):
            build_report.delay(customer, n)
    worker = Worker(app, WorkerConfig(concurrency=1, burst=True, poll_interval_s=0.1))
    worker.run(duration_s=60)
    places = [i + 1 for i, customer in enumerate(ran) if customer != "acme"]
    print(f"ran {len(ran)} reports; the other customers' 6 ran at places {places}")
    print("(in arrival order they would have been 201 to 206)")
    app.close()


if __name__ == "__main__":
    main()
