"""OpenTelemetry: one trace from a web request's enqueue through every run it leads to.

pip install 'tickwork[otel]'
python -m examples.tracing          # runs a worker here and prints the trace as a tree
TICKWORK_TRACE_RUNS=child tickwork worker -A examples.tracing   # a worker of the same app

The request's span is the parent of the enqueue's producer span (``enqueue TASK``); each
run's span (``run TASK``) is that span's child here (``trace_runs="child"``; the default,
``"link"``, starts a trace per run linked to it); the chain's next steps carry the same
producer span; what a handler enqueues (the event ``checkout.done``) is enqueued inside
its run's span, so the subscriber's run joins the trace too. A real application hands
its spans to an exporter (OTLP to a collector, say) instead of the in-memory one here.
"""

from __future__ import annotations

import time

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tickwork import App, Worker, WorkerConfig, chain
from tickwork.events import Event
from tickwork.settings import Settings

app = App(settings=Settings.load(trace_runs="child"))


@app.task
def reserve(order: str) -> str:
    return order


@app.task
def charge(order: str) -> str:
    return order


@app.task
def ship(order: str) -> None:
    app.emit("checkout.done", {"order": order}, key=order)


@app.task(on_events="checkout.done")
def thank(event: Event) -> None: ...


def tree(spans: tuple[ReadableSpan, ...]) -> list[str]:
    """The spans as an indented tree, parents first, in start order."""
    ids = {span.context.span_id for span in spans}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in ids else None, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in children.get(parent, []):
            lines.append(f"{'  ' * depth}{span.name} ({span.kind.name.lower()})")
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # before the worker starts: it looks for one then

    with trace.get_tracer("shop").start_as_current_span("POST /checkout"):
        app.enqueue(chain(reserve.si("o-1"), charge.s(), ship.s()))
    worker = Worker(app, WorkerConfig(concurrency=2))
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while worker.stats.acked < 5 and time.monotonic() < deadline:  # 3 steps, event, thank
            time.sleep(0.05)
    finally:
        worker.stop()
        worker.join(30)
    spans = exporter.get_finished_spans()
    print("\n".join(tree(spans)))
    assert len({span.context.trace_id for span in spans}) == 1, "one trace"
    assert any(span.name == f"run {thank.name}" for span in spans), "the subscriber ran"


if __name__ == "__main__":
    main()
