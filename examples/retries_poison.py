"""Retries with backoff, then the poison queue; and how to replay from it.

python -m examples.retries_poison
tickwork worker -A examples.retries_poison --duration 8
tickwork poison list
tickwork poison replay --all
"""

from __future__ import annotations

from tickwork import App, RetryPolicy

app = App()
attempts = {"n": 0}


@app.task(retry=RetryPolicy(retries=2, base_s=0.5))
def fragile(order_id: int) -> None:
    attempts["n"] += 1
    print(f"  -> attempt {attempts['n']} for order {order_id}", flush=True)
    raise ConnectionError("payment service unreachable")


@app.task
def flaky_but_patient(order_id: int) -> bool:
    """Returning False means "not now": the message comes back when its lease ends."""
    print(f"  -> not ready for {order_id}; try again later", flush=True)
    return False


def main() -> None:
    print(fragile.delay(1001))
    app.close()


if __name__ == "__main__":
    main()
