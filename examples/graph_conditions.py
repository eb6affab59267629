"""Conditions, ``Skip`` and or-joins in a graph: an order's price comes from whichever
supplier answers first, a fraud check runs only for large orders, and the customer is
told only when the price changed.

python -m examples.graph_conditions   # two orders through the same graph: the small
                                      # one skips the fraud check, the large one runs it

- ``rule="one_succeeded"``: ``price`` runs as soon as one quote succeeded, with its value
  (the slow supplier's answer, later, does not run it again).
- ``condition=is_large``: ``fraud_check`` runs only if ``price``'s value says so;
  otherwise it is skipped without running, and ``hold_order`` after it with it
  (``hold_order`` has a condition of its own: the fraud check asked for a review).
- ``raise Skip(...)``: ``notify`` decides in its handler that it has nothing to say.
- ``rule="none_failed"``: ``confirm`` runs whether the fraud check ran or was skipped.
"""

from __future__ import annotations

import sys
import time

from tickwork import App, Skip, Worker, WorkerConfig, after, graph
from tickwork.workflows import Graph

app = App()
LARGE = 1_000


def is_large(price: int) -> bool:
    """The condition of the fraud check: a module-level function, found by the worker."""
    return price >= LARGE


@app.task
def quote(supplier: str, price: int, wait_s: float) -> int:
    time.sleep(wait_s)
    return price


@app.task
def set_price(price: int, order: str) -> int:
    print(f"  {order}: price {price} (from the first supplier to answer)", flush=True)
    return price


@app.task
def fraud_check(price: int, order: str) -> str:
    print(f"  {order}: fraud check of a {price} order", flush=True)
    return "clear"


@app.task
def hold_order(order: str) -> None:
    print(f"  {order}: held for review", flush=True)


@app.task
def notify(price: int, order: str, listed: int) -> None:
    if price == listed:
        raise Skip("the price did not change")
    print(f"  {order}: customer told the price is now {price}", flush=True)


@app.task
def confirm(checks: dict[str, str | None], order: str) -> str:
    print(f"  {order}: confirmed (fraud check: {checks['fraud_check'] or 'skipped'})")
    return order


def needs_review(verdict: str) -> bool:
    """The condition of holding an order: the fraud check asked for a review."""
    return verdict == "review"


def order_graph(order: str, listed: int, fast: int, slow: int) -> Graph:
    return graph(
        {
            "fast_quote": quote.si("fast", fast, 0.0),
            "slow_quote": quote.si("slow", slow, 1.0),
            "price": after(["fast_quote", "slow_quote"], set_price.s(order), rule="one_succeeded"),
            "fraud_check": after("price", fraud_check.s(order), condition=is_large),
            "hold_order": after("fraud_check", hold_order.si(order), condition=needs_review),
            "notify": after("price", notify.s(order, listed)),
            "confirm": after(["fraud_check"], confirm.s(order), rule="none_failed"),
        }
    )


def main() -> None:
    orders = {
        "order-1": app.enqueue(order_graph("order-1", listed=40, fast=40, slow=45)),
        "order-2": app.enqueue(order_graph("order-2", listed=1_200, fast=1_250, slow=1_300)),
    }
    Worker(app, WorkerConfig(burst=True, poll_interval_s=0.05, concurrency=4)).run(30)
    skipped = {}
    for name, graph_id in orders.items():
        view = app.batches.workflow(graph_id)
        print(f"{name}: {view.state}; {view.summary}")
        skipped[name] = {step.name for step in view.steps if step.state == "skipped"}
    app.close()
    expected = {"order-1": {"fraud_check", "hold_order", "notify"}, "order-2": {"hold_order"}}
    if skipped != expected:
        sys.exit(f"expected {expected} skipped, not {skipped}")


if __name__ == "__main__":
    main()
