"""OpenTelemetry with the SDK's in-memory exporter: each enqueue is a producer span (the
child of the caller's span, if any) whose traceparent its message carries; the worker
runs the handler in a span linked to it (or its child: ``trace_runs="child"``), with the
message's fields as attributes; a failed run is marked as an error. One trace goes from
an enqueue through a chain, a graph, an event and a durable run's steps and children."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.support.helpers import running, wait_for
from tickwork import after, chain, current_run, graph
from tickwork.events import Event
from tickwork.scheduler import App, RetryPolicy
from tickwork.scheduler.runs import tracing
from tickwork.scheduler.settings import Settings

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The in-memory exporter of this process's tracer provider (set once: OpenTelemetry
    allows one global provider per process)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    tracing.look_for_provider()  # an earlier test may have asked, and found none, just now
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def test_a_handler_runs_in_a_span_linked_to_its_producer(
    sqlite_app: App, spans: InMemorySpanExporter
) -> None:
    app = sqlite_app

    @app.task
    def invoice(n: int) -> None: ...

    @app.task(retry=RetryPolicy(retries=0))
    def broken() -> None:
        raise ValueError("no such customer")

    tracer = trace.get_tracer("checkout")
    with tracer.start_as_current_span("POST /checkout") as request:
        message_id = invoice.schedule(args=(7,), key="inv-7")
        broken.delay()
    stored = app.get(id=message_id)
    assert stored is not None and "traceparent" in stored.message.headers
    alone = invoice.delay(8)  # no span active: its producer span is a trace's root
    stored_alone = app.get(id=alone)
    assert stored_alone is not None and "traceparent" in stored_alone.message.headers
    sends = {
        span.attributes["messaging.message.id"]: span
        for span in spans.get_finished_spans()
        if span.kind is SpanKind.PRODUCER and span.attributes
    }
    send = sends[message_id]
    assert send.name == f"enqueue {invoice.name}"
    assert send.attributes is not None
    assert send.attributes["messaging.operation.type"] == "send"
    assert send.attributes["messaging.destination.name"] == "default"
    assert send.parent is not None and send.parent.span_id == request.get_span_context().span_id
    assert sends[alone].parent is None
    with running(app) as worker:
        wait_for(lambda: worker.stats.acked == 2 and worker.stats.poisoned == 1)
    runs = {
        span.attributes["messaging.message.id"]: span
        for span in spans.get_finished_spans()
        if span.name.startswith("run ") and span.attributes
    }
    run = runs[message_id]
    assert run.name == f"run {invoice.name}" and run.kind is SpanKind.CONSUMER
    assert run.attributes is not None
    assert run.attributes["tickwork.task"] == invoice.name
    assert run.attributes["tickwork.key"] == "inv-7"
    assert run.attributes["tickwork.attempt"] == 1
    assert run.attributes["tickwork.lateness_ms"] >= 0  # type: ignore[operator]
    assert run.attributes["tickwork.outcome"] == "ack"
    assert run.attributes["messaging.operation.type"] == "process"
    (link,) = run.links  # linked (the default), a trace of its own
    assert link.context.span_id == send.context.span_id
    assert link.context.trace_id == request.get_span_context().trace_id
    assert run.parent is None and run.context.trace_id != send.context.trace_id
    (link_alone,) = runs[alone].links
    assert link_alone.context.span_id == sends[alone].context.span_id
    failed = next(span for span in runs.values() if span.name == f"run {broken.name}")
    assert failed.status.status_code is StatusCode.ERROR
    assert "no such customer" in (failed.status.description or "")


@pytest.fixture
def child_app(sqlite_url: str) -> Iterator[App]:
    """An app whose runs' spans are their producers' children (``trace_runs="child"``)."""
    application = App(settings=Settings(backend=sqlite_url, trace_runs="child"))
    yield application
    application.close()


def _by_name(spans: InMemorySpanExporter) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in spans.get_finished_spans():
        found.setdefault(span.name, []).append(span)
    return found


def _child_of(span: ReadableSpan, parent: ReadableSpan) -> bool:
    return span.parent is not None and span.parent.span_id == parent.context.span_id


def test_one_trace_through_a_chain_and_a_graph(child_app: App, spans: InMemorySpanExporter) -> None:
    """Producer span, then each run as its child: every step of a chain (written by the
    worker as the step before ends) and of a graph (stored at its enqueue)."""
    app = child_app

    @app.task
    def extract() -> int:
        return 2

    @app.task
    def double(n: int) -> int:
        return n * 2

    tracer = trace.get_tracer("etl")
    with tracer.start_as_current_span("nightly") as nightly:
        app.enqueue(chain(extract.si(), double.s(), double.s()))
        app.enqueue(graph({"a": extract.si(), "b": after("a", double.s())}))
    with running(app) as worker:
        wait_for(lambda: worker.stats.acked == 5)
    found = _by_name(spans)
    (root,) = [s for s in spans.get_finished_spans() if s.name == "nightly"]
    assert root.context.span_id == nightly.get_span_context().span_id
    (send_chain,) = found[f"enqueue {extract.name}"]
    (send_graph,) = found["enqueue graph"]
    assert _child_of(send_chain, root) and _child_of(send_graph, root)
    assert send_chain.kind is SpanKind.PRODUCER and send_graph.kind is SpanKind.PRODUCER
    runs = found[f"run {extract.name}"] + found[f"run {double.name}"]
    assert len(runs) == 5
    in_chain = [r for r in runs if _child_of(r, send_chain)]
    in_graph = [r for r in runs if _child_of(r, send_graph)]
    assert len(in_chain) == 3 and len(in_graph) == 2, [(r.name, r.parent) for r in runs]
    assert {r.context.trace_id for r in runs} == {root.context.trace_id}
    assert all(r.links == () for r in runs)  # a child, not a link


def test_one_trace_through_an_event_and_a_durable_run(
    child_app: App, spans: InMemorySpanExporter
) -> None:
    """A handler's emit, the event's delivery, the subscriber's run; a durable run's
    steps (spans only for steps that execute, not for replayed ones), and the child it
    spawns: all in the trace of the first enqueue."""
    app = child_app

    @app.task(on_events="invoice.sent")
    def book(event: Event) -> None: ...

    @app.task
    def send_invoice() -> None:
        app.emit("invoice.sent", {"n": 1})

    @app.task(keep_result=True)
    def render() -> str:
        return "pdf"

    @app.task(durable=True, keep_result=True)
    def publish() -> Any:
        run = current_run()
        run.step("price", lambda: 40)
        [child] = run.gather([run.spawn(render.call())])  # the run waits: a replay after
        return run.step("mail", lambda: child)

    tracer = trace.get_tracer("api")
    with tracer.start_as_current_span("POST /invoices") as request:
        send_invoice.delay()
        handle = publish.delay()
    with running(app, concurrency=2):
        wait_for(lambda: handle.status().value == "succeeded", timeout_s=30)
        wait_for(lambda: f"run {book.name}" in _by_name(spans), timeout_s=30)
    found = _by_name(spans)
    trace_id = request.get_span_context().trace_id
    (booked,) = found[f"run {book.name}"]
    assert booked.context.trace_id == trace_id, "the subscriber's run is in the trace"
    (emitted,) = [s for s in spans.get_finished_spans() if s.name.startswith("enqueue tickwork")]
    (sender,) = found[f"run {send_invoice.name}"]
    assert _child_of(emitted, sender), "the emit is enqueued in the handler's span"
    publishes = found[f"run {publish.name}"]
    assert len(publishes) >= 2, "the run resumed after its gather"
    assert all(r.context.trace_id == trace_id for r in publishes)
    (price,) = found["step price"]  # replays do not run it again: one span
    (mail,) = found["step mail"]
    assert any(_child_of(price, r) for r in publishes)
    assert any(_child_of(mail, r) for r in publishes)
    assert price.attributes is not None and str(price.attributes["tickwork.step_id"])
    (rendered,) = found[f"run {render.name}"]
    (spawned,) = found[f"enqueue {render.name}"]
    assert _child_of(rendered, spawned) and any(_child_of(spawned, r) for r in publishes)


def test_enqueue_many_is_one_producer_span_its_messages_carry(
    child_app: App, spans: InMemorySpanExporter
) -> None:
    app = child_app

    @app.task
    def load(n: int) -> None: ...

    report = app.enqueue_many(load.call(n) for n in range(3))
    (send,) = [s for s in spans.get_finished_spans() if s.kind is SpanKind.PRODUCER]
    assert send.name == "enqueue_many" and send.attributes is not None
    assert send.attributes["messaging.batch.message_count"] == 3
    with running(app) as worker:
        wait_for(lambda: worker.stats.acked == 3)
    runs = [s for s in spans.get_finished_spans() if s.name == f"run {load.name}"]
    assert len(runs) == 3 and all(_child_of(run, send) for run in runs)
    assert len(report.ids) == 3


@pytest.mark.asyncio
async def test_aenqueue_is_a_producer_span_too(child_app: App, spans: InMemorySpanExporter) -> None:
    app = child_app

    @app.task
    def ping() -> None: ...

    message_id = await app.aenqueue(ping.call())
    (send,) = [s for s in spans.get_finished_spans() if s.kind is SpanKind.PRODUCER]
    assert send.attributes is not None and send.attributes["messaging.message.id"] == message_id
    stored = app.get(id=message_id)
    assert stored is not None
    assert format(send.context.span_id, "016x") in stored.message.headers["traceparent"]
