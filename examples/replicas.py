"""Enqueues and acks that survive a Redis failover: ``wait_replicas=1`` makes each write
a caller is told is done return only once a replica holds it too.

    redis-server --port 6379 &
    redis-server --port 6380 --replicaof 127.0.0.1 6379 &
    export TICKWORK_BACKEND='redis://127.0.0.1:6379/0?wait_replicas=1&wait_timeout_ms=500'
    python -m examples.replicas
    tickwork worker -A examples.replicas --burst

(On ``redis+cluster://`` the same option waits for the replica of each shard's master.)
Stop the replica (``kill -STOP``) and run it again: each payment is refused with
``ReplicaTimeout`` (written on the master only) instead of being acknowledged at risk.
On the embedded SQLite default the option does not apply and it simply runs.
"""

from __future__ import annotations

import time

from tickwork import App
from tickwork.errors import ReplicaTimeout

app = App()


@app.task(retries=3)
def record_payment(order: int, cents: int) -> None:
    print(f"order {order}: {cents / 100:.2f} recorded")


def main() -> None:
    for order in range(5):
        for attempt in range(3):
            call = record_payment.call(order, 1999 + order).options(key=f"payment-{order}")
            try:  # keyed: sending it again after a timeout never stores it twice
                app.enqueue(call, on_conflict="ignore")
                break
            except ReplicaTimeout as err:
                print(f"order {order} not yet safe from a failover ({err}); again")
                time.sleep(0.5 * (attempt + 1))
        else:
            print(f"order {order}: no replica took it; alert someone")
    app.close()


if __name__ == "__main__":
    main()
