"""Priority aging: a low-priority task with ``max_wait`` is not starved by a stream of
higher-priority work. Once one of its messages has waited that long past its due time,
it goes ahead of every priority (Sidekiq's and Oban's "starvation" answer; Airflow's
priority weights age too).

python -m examples.priority_aging   # runs a worker in this process (one handler thread):
                                    # 300 checkout messages (priority 10, 10 ms each) and
                                    # one digest (priority -10, max_wait=1 s); prints when
                                    # the digest ran and how many checkouts still waited

Without ``max_wait`` the digest would run after all 300 checkouts. A message that is
running or waiting for a retry when its time comes keeps its priority.
"""

from __future__ import annotations

import time
from datetime import timedelta

from tickwork import App, Worker, WorkerConfig

app = App()
done = {"checkouts": 0}
digest_ran: list[tuple[float, int]] = []


@app.task(priority=10)
def checkout(order: int) -> None:
    time.sleep(0.01)  # the work would be here
    done["checkouts"] += 1


@app.task(priority=-10, max_wait=timedelta(seconds=1))
def send_digest() -> None:
    digest_ran.append((time.monotonic(), done["checkouts"]))


def main() -> None:
    app.enqueue_many(checkout.call(n) for n in range(300))
    send_digest.delay()
    enqueued = time.monotonic()
    worker = Worker(app, WorkerConfig(concurrency=1, burst=True, poll_interval_s=0.1))
    worker.run(duration_s=60)
    ((at, checkouts),) = digest_ran
    waited = at - enqueued
    print(f"the digest ran {waited:.1f} s after it was sent, after {checkouts} of 300 checkouts")
    app.close()


if __name__ == "__main__":
    main()
