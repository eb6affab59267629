"""OpenTelemetry, when installed (the ``otel`` extra), after OpenTelemetry's messaging
conventions: each enqueue is a span of kind PRODUCER (``enqueue TASK``; ``enqueue_many``
and a workflow's enqueue are one span each: ``producer_span``), current while its
messages are built, so each carries its W3C ``traceparent`` in its headers; the worker
runs each handler in a span of kind CONSUMER (``run TASK``), with the message id, task,
queue, key, attempt and lateness as attributes, linked to that producer span or its
child (``Settings.trace_runs``); a run that fails is marked as an error. Each time a
durable run's step executes (not when it is replayed) is a span of its own inside the
run's (``step NAME``). What a handler enqueues (a spawned child, an event, a message) is
enqueued in the run's span, and the steps of a chain or a graph carry the span of the
enqueue that made them: one trace from the enqueue through every run it leads to.

Spans go to whatever tracer provider the application configured (in the worker process,
and in each child of a process pool: the ``-A`` module is imported there). Without
OpenTelemetry installed, or until the application sets a tracer provider, no span is
made (under a microsecond per message): a process looks for a provider as it first
needs one, and while none is set, again at most once a second.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Protocol

from tickwork.scheduler.model import headers as header_names

try:
    from opentelemetry import trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    #: the header carries W3C's ``traceparent`` alone, whatever the global propagator
    W3C = TraceContextTextMapPropagator()

    ENABLED = True
except ImportError:  # pragma: no cover - depends on the environment
    ENABLED = False


class Traced(Protocol):
    """What a run's span says of it (``runs.context.RunInfo`` has it; named here so that
    the step spans' module, which the run context imports, imports nothing of it)."""

    @property
    def message_id(self) -> str: ...
    @property
    def task(self) -> str: ...
    @property
    def queue(self) -> str: ...
    @property
    def key(self) -> str | None: ...
    @property
    def attempt(self) -> int: ...
    @property
    def traceparent(self) -> str | None: ...
    @property
    def lateness_ms(self) -> int: ...


class TraceSetting(Protocol):
    """Where a run's span hangs (``Settings.trace_runs``): "link" or "child"."""

    @property
    def trace_runs(self) -> str: ...


TRACEPARENT = header_names.TRACEPARENT

#: records how a run ended on its span: (verdict, error type, error)
Outcome = Callable[[str, str, str], None]


def _ignore(verdict: str, error_type: str, error: str) -> None:
    """What ``handler_span`` yields without OpenTelemetry."""


#: what ``handler_span`` returns when nothing is traced (callers may skip it then)
NO_SPAN: AbstractContextManager[Outcome] = nullcontext(_ignore)


def with_traceparent(headers: Mapping[str, str] | None) -> Mapping[str, str] | None:
    """``headers`` plus the current span's ``traceparent`` (a caller's own wins); the
    same headers when no span is active or OpenTelemetry is not installed."""
    if not ENABLED or (headers is not None and TRACEPARENT in headers):
        return headers
    if not trace.get_current_span().get_span_context().is_valid:
        return headers  # what inject would find, without its work
    carrier: dict[str, str] = {}
    W3C.inject(carrier)
    if TRACEPARENT not in carrier:
        return headers
    return {TRACEPARENT: carrier[TRACEPARENT], **(headers or {})}


def handler_span(info: Traced, settings: TraceSetting) -> AbstractContextManager[Outcome]:
    """A span around one run of a handler, linked to its producer's span or its child
    (``settings.trace_runs``); yields a function that records its outcome. Nothing at
    all until the application sets a tracer provider (the API's no-op tracer still
    costs a measurable part of a run)."""
    if not ENABLED or not configured():
        return NO_SPAN
    return _span(info, settings.trace_runs == "child")


def step_span(name: str, step_id: str | None) -> AbstractContextManager[object]:
    """A span around one execution of a durable run's step (current inside it, so what
    the step enqueues or calls is traced under it); nothing when no provider is set."""
    if not ENABLED or not configured():
        return nullcontext()
    attributes = {"tickwork.step": name, "tickwork.step_id": step_id or ""}
    tracer = _tracer()
    return tracer.start_as_current_span(
        f"step {name}", kind=SpanKind.INTERNAL, attributes=attributes
    )


#: until a tracer provider is set, whether one is is asked again at most this often (the
#: question reads the environment, too slow to ask every run); once one is, it stays
#: (OpenTelemetry sets its global provider once)
RECHECK_S = 1.0
_provider_set = False
_checked_at = -math.inf


def configured() -> bool:
    """Whether the application set a tracer provider (asked at most once a second until
    one is)."""
    global _provider_set, _checked_at
    if _provider_set:
        return True
    now = time.monotonic()
    if now - _checked_at < RECHECK_S:
        return False
    _checked_at = now
    provider = trace.get_tracer_provider()
    _provider_set = not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
    return _provider_set


#: tickwork's tracer, once a provider is set (a tracer made per span is slow)
_TRACER: trace.Tracer | None = None


def _tracer() -> trace.Tracer:
    """tickwork's tracer of the provider the application set (asked once: the SDK makes
    a tracer in tens of microseconds, a large part of a span's cost)."""
    global _TRACER
    if _TRACER is None:
        _TRACER = trace.get_tracer("tickwork")
    return _TRACER


def look_for_provider() -> None:
    """Have the next run ask whether a tracer provider is set: a worker calls it as it
    starts, so a provider its application set before is used from the first run (one set
    later, within ``RECHECK_S``)."""
    global _checked_at
    _checked_at = -math.inf


@contextmanager
def _span(info: Traced, as_child: bool) -> Iterator[Outcome]:
    links, parent = [], None
    if info.traceparent:
        carried = W3C.extract({TRACEPARENT: info.traceparent})
        producer = trace.get_current_span(carried).get_span_context()
        if producer.is_valid and as_child:
            parent = carried
        elif producer.is_valid:
            links.append(Link(producer))
    attributes: dict[str, Any] = {
        "messaging.system": "tickwork",
        "messaging.operation.type": "process",
        "messaging.operation.name": "run",
        "messaging.message.id": info.message_id,
        "messaging.destination.name": info.queue,
        "tickwork.task": info.task,
        "tickwork.attempt": info.attempt,
        "tickwork.lateness_ms": info.lateness_ms,
    }
    if info.key is not None:
        attributes["tickwork.key"] = info.key
    tracer = _tracer()
    with tracer.start_as_current_span(
        f"run {info.task}",
        context=parent,  # None: a root (only a link to the producer)
        kind=SpanKind.CONSUMER,
        links=links,
        attributes=attributes,
    ) as span:

        def outcome(verdict: str, error_type: str, error: str) -> None:
            span.set_attribute("tickwork.outcome", verdict)
            if verdict in ("fail", "poison"):
                span.set_status(Status(StatusCode.ERROR, f"{error_type}: {error}"))

        yield outcome


# -- the producer's side -----------------------------------------------------------------


class Sent(Protocol):
    """Records on the producer span what was enqueued."""

    def __call__(self, message_id: str | None, queue: str | None, count: int = 1) -> None: ...


def _unsent(message_id: str | None, queue: str | None, count: int = 1) -> None:
    """What ``producer_span`` yields without a tracer provider."""


#: what ``producer_span`` returns when nothing is traced (reusable: a nullcontext)
_NOT_TRACED: AbstractContextManager[Sent] = nullcontext(_unsent)


def producer_span(name: str) -> AbstractContextManager[Sent]:
    """A span named ``name`` around building and storing messages; yields a function
    recording the message's id and queue (or a batch's count) on it."""
    if not ENABLED or not configured():
        return _NOT_TRACED
    return _send_span(name)


@contextmanager
def _send_span(name: str) -> Iterator[Sent]:
    tracer = _tracer()
    attributes = {
        "messaging.system": "tickwork",
        "messaging.operation.type": "send",
        "messaging.operation.name": "enqueue",
    }
    with tracer.start_as_current_span(name, kind=SpanKind.PRODUCER, attributes=attributes) as span:

        def sent(message_id: str | None, queue: str | None, count: int = 1) -> None:
            if message_id is not None:
                span.set_attribute("messaging.message.id", message_id)
            if queue is not None:
                span.set_attribute("messaging.destination.name", queue)
            if count != 1:
                span.set_attribute("messaging.batch.message_count", count)

        yield sent
