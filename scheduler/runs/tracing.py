"""OpenTelemetry, when installed (the ``otel`` extra): a producer puts the W3C
``traceparent`` of its current span into the headers of each message it builds, and the
worker runs each handler in a span (kind CONSUMER, named ``run TASK``) linked to that
producer span, with the message id, task, queue, key, attempt and lateness as
attributes; a run that fails is marked as an error.

Spans go to whatever tracer provider the application configured (in the worker process,
and in each child of a process pool: the ``-A`` module is imported there). Without
OpenTelemetry installed, or until the application sets a tracer provider, no span is
made (under a microsecond per message): a worker looks for a provider as it starts, and
while none is set, again at most once a second.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from tickwork.scheduler.model import headers as header_names

try:
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode

    ENABLED = True
except ImportError:  # pragma: no cover - depends on the environment
    ENABLED = False

if TYPE_CHECKING:
    from tickwork.scheduler.runs.context import RunInfo

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
    propagate.inject(carrier)
    if TRACEPARENT not in carrier:
        return headers
    return {TRACEPARENT: carrier[TRACEPARENT], **(headers or {})}


def handler_span(info: RunInfo) -> AbstractContextManager[Outcome]:
    """A span around one run of a handler; yields a function that records its outcome.
    Nothing at all until the application sets a tracer provider (the API's no-op tracer
    still costs a measurable part of a run)."""
    if not ENABLED or not _configured():
        return NO_SPAN
    return _span(info)


#: until a tracer provider is set, whether one is is asked again at most this often (the
#: question reads the environment, too slow to ask every run); once one is, it stays
#: (OpenTelemetry sets its global provider once)
RECHECK_S = 1.0
_provider_set = False
_checked_at = -math.inf


def _configured() -> bool:
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


def look_for_provider() -> None:
    """Have the next run ask whether a tracer provider is set: a worker calls it as it
    starts, so a provider its application set before is used from the first run (one set
    later, within ``RECHECK_S``)."""
    global _checked_at
    _checked_at = -math.inf


@contextmanager
def _span(info: RunInfo) -> Iterator[Outcome]:
    links = []
    if info.traceparent:
        producer = trace.get_current_span(propagate.extract({TRACEPARENT: info.traceparent}))
        if producer.get_span_context().is_valid:
            links.append(Link(producer.get_span_context()))
    attributes: dict[str, Any] = {
        "messaging.system": "tickwork",
        "messaging.message.id": info.message_id,
        "messaging.destination.name": info.queue,
        "tickwork.task": info.task,
        "tickwork.attempt": info.attempt,
        "tickwork.lateness_ms": info.lateness_ms,
    }
    if info.key is not None:
        attributes["tickwork.key"] = info.key
    tracer = trace.get_tracer("tickwork")
    with tracer.start_as_current_span(
        f"run {info.task}", kind=SpanKind.CONSUMER, links=links, attributes=attributes
    ) as span:

        def outcome(verdict: str, error_type: str, error: str) -> None:
            span.set_attribute("tickwork.outcome", verdict)
            if verdict in ("fail", "poison"):
                span.set_status(Status(StatusCode.ERROR, f"{error_type}: {error}"))

        yield outcome
