"""A bounded queue: producers slow down to the workers' pace instead of burying the store.

python -m examples.bounded_queue
tickwork queues list                         # imports: fill 20/20
tickwork queues set imports --max-pending 1000
tickwork worker -A examples.bounded_queue --duration 3

``app.queues.configure`` stores the bound in the backend, so every producer agrees on it.
While the queue holds ``max_pending`` messages (waiting or running), ``delay``,
``schedule`` and ``enqueue_many`` wait for room (backing off up to half a second
between tries, at most ``enqueue_block_s``, 60 s by default) and then raise
``QueueFull``; ``block=False`` raises it at once. Retries, replays and the next
occurrence of a recurring schedule are never held back.
"""

from __future__ import annotations

import time

from tickwork import App, Worker, WorkerConfig
from tickwork.errors import QueueFull

app = App()


@app.task(queue="imports")
def import_row(n: int) -> None:
    time.sleep(0.005)  # a row's worth of work


def main() -> None:
    app.queues.configure("imports", max_pending=20)
    worker = Worker(app, WorkerConfig(queues=("imports",), concurrency=4))
    worker.start()
    try:  # a producer far faster than the worker: it waits for room as the worker drains
        report = app.enqueue_many((import_row.call(n) for n in range(200)), batch_size=50)
        print(f"wrote {report.enqueued} rows, after waiting {report.waited_s:.1f} s for room")
    finally:
        worker.stop()
        worker.join(30)
    # with no worker running the queue fills up; fail at once instead of waiting
    for n in range(200, 230):
        try:
            import_row.schedule(args=(n,), block=False)
        except QueueFull as err:
            print(err)
            break
    (stats,) = app.backend.queues.stats("imports")
    print(f"imports holds {stats.pending} of at most {stats.max_pending}")
    app.close()


if __name__ == "__main__":
    main()
