"""OpenTelemetry traces of evaluating requests: one server span per request, continuing the client's W3C
`traceparent`, with a child span per phase (parse, admission, prepare, prefill, branches, render, store) and
OpenInference's decision attributes.

On when the standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set and the
`otel` extra is installed; spans go out in batches over OTLP/HTTP (`http/protobuf`, the only protocol served),
configured by the SDK's own `OTEL_*` variables (service name, resource attributes, headers, sampler). Unset, no
tracing library is imported and a request pays one attribute read.

Phases are recorded by the request's meter (`api.plumbing.metering`) as they happen and become spans when the request
ends, with the times they had: the core times prefill and branches itself, and so needs no tracing library.
The request's `traceparent` is handed to the backend calls (`inference.tracing`), so SGLang's spans join it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

PROTOCOLS = ("http/protobuf",)


@dataclass
class _Tracing:
    provider: Any
    """The SDK's TracerProvider (it flushes its batches at exit)."""
    tracer: Any
    propagator: Any
    api: Any
    """opentelemetry.trace, imported once tracing is on."""
    context: Any
    """opentelemetry.context."""


_state: dict[str, _Tracing | None] = {"tracing": None}


def tracing_setup(*, environ: Mapping[str, str] = os.environ) -> bool:
    """Turn tracing on when the environment asks for it (see the module); True when it is on. Called once per
    process, in each worker (a span processor's thread does not survive a fork)."""
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint or environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        _state["tracing"] = None
        return False
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    if protocol not in PROTOCOLS:
        log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s is not served (only http/protobuf): tracing stays off", protocol)
        return False
    try:
        from opentelemetry import context, trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but the otel extra is not installed: tracing stays off")
        return False
    provider = TracerProvider(resource=Resource.create({"service.name": environ.get("OTEL_SERVICE_NAME", "openjev")}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _state["tracing"] = _Tracing(
        provider=provider,
        tracer=provider.get_tracer("openjev"),
        propagator=TraceContextTextMapPropagator(),
        api=trace,
        context=context,
    )
    log.info("tracing to %s over OTLP/HTTP", endpoint)
    return True


def tracing_on() -> bool:
    return _state["tracing"] is not None


def tracing_flush(*, timeout: float = 10.0) -> None:
    """Send the spans waiting in the batch now (a test's receiver reads them; the SDK flushes at exit)."""
    tracing = _state["tracing"]
    if tracing is not None:
        tracing.provider.force_flush(int(timeout * 1000))


def tracing_stop() -> None:
    """Turn tracing off in this process, flushing what is waiting first."""
    tracing = _state["tracing"]
    _state["tracing"] = None
    if tracing is not None:
        tracing.provider.shutdown()


@dataclass
class RequestSpan:
    """A request's server span, current while the request runs (logs read its trace id from it)."""

    span: Any
    token: Any
    headers: dict[str, str]
    """`traceparent` (and `tracestate`) of this span, for the backend calls."""


def request_span_start(*, name: str, headers: Iterable[tuple[bytes, bytes]], start_ns: int) -> RequestSpan | None:
    """A server span for one request, a child of the client's `traceparent` when it sent one; None when tracing
    is off."""
    tracing = _state["tracing"]
    if tracing is None:
        return None
    carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers if k in (b"traceparent", b"tracestate")}
    parent = tracing.propagator.extract(carrier=carrier)
    span = tracing.tracer.start_span(name, context=parent, kind=tracing.api.SpanKind.SERVER, start_time=start_ns)
    current = tracing.api.set_span_in_context(span, parent)
    token = tracing.context.attach(current)
    outgoing: dict[str, str] = {}
    tracing.propagator.inject(outgoing, context=current)
    return RequestSpan(span=span, token=token, headers=outgoing)


def request_span_end(
    *,
    span: RequestSpan,
    phases: Iterable[tuple[str, int, int]],
    attributes: Mapping[str, Any],
    status: int,
    end_ns: int,
) -> None:
    """End the request's span: a child span per phase (name, start, end in epoch ns), its attributes, an error
    status for a 5xx (the server's failure; a 4xx is the client's)."""
    tracing = _state["tracing"]
    assert tracing is not None, "a span exists only while tracing is on"
    inside = tracing.api.set_span_in_context(span.span)
    for phase, start, end in phases:
        tracing.tracer.start_span(phase, context=inside, start_time=start).end(end_time=end)
    span.span.set_attributes({k: v for k, v in attributes.items() if v is not None})
    span.span.set_attribute("http.response.status_code", status)
    if status >= 500:
        span.span.set_status(tracing.api.Status(tracing.api.StatusCode.ERROR, f"HTTP {status}"))
    span.span.end(end_time=end_ns)
    tracing.context.detach(span.token)


def trace_id_current() -> str | None:
    """The current span's trace id (32 hex digits), for the logs; None without a traced request."""
    tracing = _state["tracing"]
    if tracing is None:
        return None
    found = tracing.api.get_current_span().get_span_context()
    return f"{found.trace_id:032x}" if found.is_valid else None
