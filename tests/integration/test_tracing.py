"""OpenTelemetry with the SDK's in-memory exporter: a message enqueued inside a span
carries its traceparent, and the worker runs the handler in a span linked to it, with
the message's fields as attributes; a failed run is marked as an error."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, RetryPolicy

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The in-memory exporter of this process's tracer provider (set once: OpenTelemetry
    allows one global provider per process)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
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
    untraced = invoice.delay(8)  # no span active: no traceparent
    stored_untraced = app.get(id=untraced)
    assert stored_untraced is not None and "traceparent" not in stored_untraced.message.headers
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
    (link,) = run.links
    assert link.context.span_id == request.get_span_context().span_id
    assert link.context.trace_id == request.get_span_context().trace_id
    assert runs[untraced].links == ()  # nothing to link to
    failed = next(span for span in runs.values() if span.name == f"run {broken.name}")
    assert failed.status.status_code is StatusCode.ERROR
    assert "no such customer" in (failed.status.description or "")
