"""A durable order: charge the card once, wait for the warehouse's "shipped" event (or
refund after two days without it), then sleep three days and send a reminder. A worker
killed or redeployed anywhere in between loses nothing and charges no card twice: each
step's result is journaled, and the sleeps and the wait hold no thread.

python -m examples.durable_order   # two orders on a test clock (five days pass in a
                                   # second): one shipped, one refunded; then each
                                   # run's journal

In production the same task runs under ``tickwork worker -A examples.durable_order``, and
the warehouse calls ``app.emit("order.shipped", {...}, key=order_id)``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tickwork import App, current_run
from tickwork.testing import isolated

app = App()
SHIPPING_WAIT = timedelta(days=2)
REMINDER_AFTER = timedelta(days=3)


def charge_card(order_id: str, cents: int) -> dict[str, Any]:
    key = current_run().step_id  # the payment API's idempotency key: the same on a retry
    print(f"  {order_id}: charged {cents / 100:.2f} (idempotency key {key})")
    return {"charge": f"ch_{order_id}", "cents": cents}


def refund(charge: dict[str, Any]) -> str:
    print(f"  refunded {charge['charge']}")
    return f"re_{charge['charge']}"


def send_mail(order_id: str, text: str) -> None:
    print(f"  {order_id}: mail: {text}")


@app.task(durable=True, keep_result=timedelta(days=30), retries=3)
def fulfil(order_id: str, cents: int) -> str:
    run = current_run()
    charge = run.step("charge", charge_card, order_id, cents)
    shipped = run.wait_for_event("order.shipped", key=order_id, timeout=SHIPPING_WAIT)
    if shipped is None:  # two days and no parcel: give the money back
        run.step("refund", refund, charge)
        run.step("sorry", send_mail, order_id, "sorry, we could not ship your order")
        return "refunded"
    run.step("shipped", send_mail, order_id, f"on its way with {shipped['payload']['carrier']}")
    run.sleep(REMINDER_AFTER)
    run.step("review", send_mail, order_id, "how was it? leave a review")
    return "reviewed"


def main() -> None:
    with isolated(app) as tw:  # a fresh SQLite file on a clock this example moves
        shipped, lost = fulfil.delay("A-100", 4200), fulfil.delay("B-200", 1500)
        tw.drain()  # both charged, both waiting for their parcel
        app.emit("order.shipped", {"carrier": "post"}, key="A-100")
        tw.drain()  # A-100 shipped: its mail, then asleep for three days
        tw.drain(advance=SHIPPING_WAIT + timedelta(seconds=1))  # B-200 refunded
        tw.drain(advance=REMINDER_AFTER)  # A-100 wakes: the review mail
        for order, handle in (("A-100", shipped), ("B-200", lost)):
            print(f"{order}: {handle.result()}")
            journal = app.runs.journal(handle.id)
            for entry in journal.steps if journal is not None else []:
                print(f"    {entry.kind} {entry.name}: {', '.join(entry.facts())}")


if __name__ == "__main__":
    main()
