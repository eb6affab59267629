"""Events as triggers on every backend: ``app.emit`` reaches each subscribed task once
(wildcards, an event id emitted twice delivers once), waits in a chain or a graph get
the event or time out, subscriptions are stored, reconciled and read back, and bad
input is refused with nothing stored."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from tests.support.helpers import running
from tests.support.helpers import wait_for as eventually
from tickwork.scheduler import App, InvalidMessage, chain
from tickwork.scheduler.events.subscriptions import SUBSCRIPTIONS_QUEUE, stored_subscriptions
from tickwork.scheduler.events.waits import WAIT_TASK, read_waiters, wait_for
from tickwork.scheduler.events.workflows import EVENT, WORKFLOW_TASK, run_id
from tickwork.scheduler.ids import identity_chain_id
from tickwork.scheduler.model.event_names import Event
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.workflows.graphs import after, graph


class Seen:
    """What handlers saw, under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.items: list[Any] = []

    def add(self, item: Any) -> None:
        with self._lock:
            self.items.append(item)

    def count(self, item: Any) -> int:
        with self._lock:
            return self.items.count(item)


def test_an_event_reaches_each_matching_subscriber_once(app: App) -> None:
    seen = Seen()

    @app.task(on_events=["order.*"])
    def on_order(event: Event) -> None:
        seen.add(("order", event.name, event.key, event.payload["total"]))

    @app.task(on_events="**")
    def audit(event: dict[str, Any]) -> None:
        seen.add(("audit", event["name"]))

    @app.task(on_events=["billing.**"])
    def billing(event: Event) -> None:
        seen.add(("billing", event.name))

    @app.task
    def sentinel() -> None:
        seen.add("sentinel")

    first = app.emit("order.created", {"total": 12}, key="o-1")
    assert app.emit("order.created", {"total": 12}, key="o-1", event_id=first) == first
    app.emit("order.line.added", {"total": 3})  # order.* is one segment: not on_order
    with running(app):
        eventually(lambda: seen.count(("audit", "order.line.added")) == 1, timeout_s=20)
        eventually(lambda: seen.count(("order", "order.created", "o-1", 12)) == 1, timeout_s=20)
        # the same id emitted again once its first message is gone (acked after the
        # deliveries it wrote, which may run first): delivered nothing more
        carrier = identity_chain_id("default", f"event:{first}")
        eventually(lambda: app.get(id=carrier) is None, timeout_s=20)
        app.emit("order.created", {"total": 12}, key="o-1", event_id=first)
        eventually(lambda: len(app.events.recent()) == 3, timeout_s=20)
        # a delivery written for the duplicate would be due now: a sentinel due later runs
        # after it would have
        sentinel.schedule(delay=timedelta(milliseconds=300))
        eventually(lambda: seen.count("sentinel") == 1, timeout_s=20)
    assert seen.count(("order", "order.created", "o-1", 12)) == 1
    assert seen.count(("audit", "order.created")) == 1
    assert not any(item[0] == "billing" for item in seen.items)
    newest, *older = app.events.recent()
    assert newest.duplicate and newest.event.id == first and newest.subscribers == []
    (delivered,) = [d for d in older if d.event.id == first]
    assert sorted(delivered.subscribers) == [audit.name, on_order.name]


def test_a_wait_step_takes_the_event_or_times_out(app: App) -> None:
    seen = Seen()

    @app.task
    def begin(order: str) -> str:
        seen.add(("begin", order))
        return order

    @app.task
    def ship(event: dict[str, Any] | None) -> None:
        seen.add(("ship", None if event is None else event["payload"]["paid"]))

    def waiting(order: str, timeout: float, **options: Any) -> Any:
        step = wait_for("payment.settled", key=order, timeout=timeout, **options)
        return chain(begin.si(order), step, ship.s())

    app.enqueue(waiting("o-1", 60))
    app.enqueue(waiting("o-2", 1.0, on_timeout="continue"))
    app.enqueue(waiting("o-3", 1.0))
    app.enqueue(  # a graph's step waits alike: a wait for any key of the name
        graph(
            {
                "begin": begin.si("o-4"),
                "paid": after("begin", wait_for("payment.settled", timeout=60)),
                "ship": after("paid", ship.s()),  # the event itself, as in a chain
            }
        )
    )
    with running(app):
        # the waits have started (are registered) before the events
        eventually(lambda: _waiting(app, "o-1") == {"o-1", None}, timeout_s=30)
        app.emit("payment.settled", {"paid": 9}, key="o-9")  # o-4's (any key), not o-1's
        eventually(lambda: seen.count(("ship", 9)) == 1, timeout_s=20)
        app.emit("payment.settled", {"paid": 5}, key="o-1")
        eventually(lambda: seen.count(("ship", 5)) == 1, timeout_s=20)
        eventually(lambda: seen.count(("ship", None)) == 1, timeout_s=20)
        eventually(lambda: len(app.backend.poison.list()) == 1, timeout_s=20)
    (timed_out,) = app.backend.poison.list()
    assert timed_out.failure.error_type == "WaitTimedOut"
    assert timed_out.envelope.queue == "default"
    assert (
        seen.items.count(("ship", 5)) == 1 and len([i for i in seen.items if i[0] == "ship"]) == 3
    )
    assert WAIT_TASK.encode() in timed_out.envelope.body


def _waiting(app: App, key: str) -> set[str | None]:
    """The keys of the waits an event ``payment.settled`` with ``key`` reaches now."""
    waits = read_waiters(app.backend, "payment.settled", key, app.backend.now_ms())
    return {_wait_key(app, w.id, w.queue) for w in waits}


def _wait_key(app: App, message_id: str, queue: str) -> str | None:
    stored = app.backend.messages.get(message_id, queue)
    assert stored is not None
    key = Message.decode(stored.envelope.body).args[1]
    return None if key is None else str(key)


def test_subscriptions_are_stored_reconciled_and_removed(app: App) -> None:
    @app.task(on_events=["signup"])
    def welcome(event: Event) -> None: ...

    @app.task
    def later(event: Event) -> None: ...

    assert app.events.install() == 1
    assert app.events.install() == 0  # the same: not written again
    app.events.subscribe(later, "signup", "profile.*")
    (stored_later, stored_welcome) = app.events.subscriptions()
    assert (stored_later.task, stored_later.patterns) == (later.name, ("signup", "profile.*"))
    assert stored_welcome.queue == "default" and stored_welcome.owner == __name__
    # the code no longer declares ``later``'s: a worker's reconcile removes it
    app.registry.subscriptions.pop(later.name)
    app.events.install(reconcile=True)
    assert [s.task for s in stored_subscriptions(app.backend)] == [welcome.name]
    assert app.events.unsubscribe(welcome) and not app.events.unsubscribe(welcome)
    assert app.events.subscriptions() == []
    # subscriptions are no schedules
    assert all(info.queue != SUBSCRIPTIONS_QUEUE for info in app.schedules.list())


def test_a_subscriber_another_app_declares_gets_the_event(app: App) -> None:
    """The fan-out runs where the event's queue is worked; the subscriber's task is
    known only to the app that declared it, whose worker runs the delivery."""
    seen = Seen()
    declaring = App(app.backend)

    @declaring.task(on_events=["report.ready"], queue="reports", retries=2, priority=3)
    def publish(event: Event) -> None:
        seen.add(("publish", event.payload))

    declaring.events.install()
    app.emit("report.ready", "q3")
    with running(app):  # works "default": fans out, into "reports"
        eventually(lambda: app.backend.queues.stats("reports")[0].ready == 1, timeout_s=20)
    with running(declaring, queues=("reports",)):
        eventually(lambda: seen.count(("publish", "q3")) == 1, timeout_s=20)


@pytest.mark.parametrize(
    "emit, error",
    [
        (lambda app: app.emit("bad name"), "bad event name"),
        (lambda app: app.emit("a..b"), "bad event name"),
        (lambda app: app.emit("order.*"), "bad event name"),
        (lambda app: app.emit("ok", {"when": object()}), "not JSON"),
        (lambda app: app.emit("ok", key=5), "key is a string"),
    ],
)
def test_bad_events_are_refused_with_nothing_stored(app: App, emit: Any, error: str) -> None:
    with pytest.raises(InvalidMessage, match=error):
        emit(app)
    assert app.backend.queues.stats("default")[0].ready == 0


def test_bad_subscriptions_and_waits_are_refused(app: App) -> None:
    with pytest.raises(InvalidMessage, match="one argument"):

        @app.task(on_events="signup")
        def takes_nothing() -> None: ...

    with pytest.raises(InvalidMessage, match="bad event pattern"):

        @app.task(on_events="sign up")
        def spaced(event: Event) -> None: ...

    with pytest.raises(InvalidMessage, match="at most 30 days"):
        wait_for("paid", timeout=0)
    with pytest.raises(InvalidMessage, match="on_timeout"):
        wait_for("paid", timeout=5, on_timeout="later")  # type: ignore[arg-type]
    assert app.events.subscriptions() == []


def test_an_event_starts_a_run_of_a_subscribed_workflow(app: App) -> None:
    seen = Seen()

    @app.task
    def reserve(event: dict[str, Any]) -> str:
        seen.add(("reserve", event["key"]))
        return str(event["key"])

    @app.task
    def invoice(event: dict[str, Any], currency: str) -> int:
        return int(event["payload"]["total"])

    @app.task
    def ship(parents: dict[str, Any]) -> None:
        seen.add(("ship", parents["reserve"], parents["invoice"]))

    fulfil = graph(
        {
            "reserve": reserve.call(EVENT),
            "invoice": invoice.call(EVENT, "EUR"),
            "ship": after(["reserve", "invoice"], ship.s()),
        }
    )
    app.events.subscribe(fulfil, "order.placed", name="fulfil")
    first = app.emit("order.placed", {"total": 30}, key="o-1")
    app.emit("order.placed", {"total": 45}, key="o-2")
    with running(app):
        eventually(lambda: seen.count(("ship", "o-1", 30)) == 1, timeout_s=30)
        eventually(lambda: seen.count(("ship", "o-2", 45)) == 1, timeout_s=30)
    started = app.events.recent()
    assert {tuple(d.subscribers) for d in started} == {("fulfil",)}
    run = app.batches.workflow(run_id(first, "fulfil"))
    assert run.state == "succeeded"
    # a delivery run again (its worker was killed) starts nothing more
    (event,) = [d.event for d in started if d.event.id == first]
    start = app.registry.tasks[WORKFLOW_TASK]
    assert start("fulfil", event.model_dump(mode="json")) == run_id(first, "fulfil")
    assert app.backend.queues.stats("default")[0].ready == 0
    (stored,) = app.events.subscriptions()
    assert stored.task == "fulfil" and stored.workflow is not None


def test_bad_workflow_subscriptions_are_refused_with_nothing_stored(app: App) -> None:
    @app.task
    def reserve(event: dict[str, Any]) -> None: ...

    @app.task
    def count(n: int) -> None: ...

    with pytest.raises(InvalidMessage, match="name= of its own"):
        app.events.subscribe(chain(reserve.call(EVENT), count.si(1)), "order.placed")
    with pytest.raises(InvalidMessage, match="count"):  # EVENT is no int
        app.events.subscribe(chain(count.call(EVENT), reserve.si({})), "x", name="bad")
    with pytest.raises(InvalidMessage, match="no event pattern"):
        app.events.subscribe(chain(reserve.call(EVENT), count.si(1)), name="none")
    assert app.events.subscriptions() == []
