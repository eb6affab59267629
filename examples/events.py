"""Events as triggers: tasks subscribe to event names (with wildcards), ``app.emit``
reaches each of them once, and a workflow step waits for an event with a timeout.

python -m examples.events   # emits a few events, runs a worker, prints what ran
tickwork emit order.placed '{"total": 12}' --key o-2   # from a shell, any process
tickwork events subscriptions      # which task gets which events
tickwork events recent             # what was emitted lately, and whom it reached

An order is placed: the ledger books every ``order.*`` event, an audit task sees every
event (``**``), a workflow (welcome the customer, then offer a coupon) starts for each
new customer, and the fulfilment chain of the order waits (durably: no thread waits,
the step is a stored message) for the payment provider's ``payment.settled`` event with
the order's id as key, for at most a minute, before it ships. A second chain waits for
a payment that never comes and gives up after its timeout.
"""

from __future__ import annotations

import time

from tickwork import App, Worker, WorkerConfig, chain
from tickwork.events import EVENT, Event, wait_for

app = App()
seen: list[str] = []


@app.task(on_events="order.*")
def book(event: Event) -> None:
    seen.append(f"ledger: booked {event.name} {event.payload['total']}")


@app.task(on_events="**")
def audit(event: Event) -> None:
    seen.append(f"audit: {event.name} (key {event.key})")


@app.task
def reserve_stock(order: str) -> str:
    seen.append(f"fulfilment: reserved the stock of {order}")
    return order


@app.task
def ship(payment: dict[str, object] | None) -> None:
    if payment is None:
        seen.append("fulfilment: no payment came in time; the order is released")
    else:
        seen.append(f"fulfilment: paid ({payment['payload']}); shipping")


@app.task
def welcome(event: Event) -> str:
    seen.append(f"onboarding: welcome {event.key}")
    return str(event.key)


@app.task
def offer_coupon(customer: str) -> None:
    seen.append(f"onboarding: coupon for {customer}")


# a workflow that each matching event starts (EVENT stands for the event)
app.events.subscribe(
    chain(welcome.call(EVENT), offer_coupon.s()), "customer.created", name="onboarding"
)


def fulfil(order: str, timeout_s: float) -> None:
    paid = wait_for("payment.settled", key=order, timeout=timeout_s, on_timeout="continue")
    app.enqueue(chain(reserve_stock.si(order), paid, ship.s()))


def main() -> None:
    app.emit("customer.created", {"plan": "pro"}, key="c-7")
    app.emit("order.placed", {"total": 40}, key="o-1")
    fulfil("o-1", timeout_s=60)
    fulfil("o-3", timeout_s=1)  # its payment never comes
    worker = Worker(app, WorkerConfig(poll_interval_s=0.05))
    worker.start()
    try:
        time.sleep(1.0)  # the payment provider answers a moment later
        event_id = app.emit("payment.settled", {"amount": 40}, key="o-1")
        app.emit("payment.settled", {"amount": 40}, key="o-1", event_id=event_id)  # a retry
        deadline = time.monotonic() + 20
        while len(seen) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.stop()
        worker.join(10)
    for line in sorted(seen):
        print(line)
    for delivered in app.events.recent():
        reached = "nothing (emitted before)" if delivered.duplicate else delivered.subscribers
        event = delivered.event
        print(f"  {event.name} {event.key}: {reached}, {delivered.waiters} wait(s)")
    app.close()


if __name__ == "__main__":
    main()
