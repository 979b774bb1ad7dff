"""A local OTLP/HTTP trace receiver: what an OpenTelemetry collector would get from the service, kept for a test.

It listens on loopback, accepts `POST /v1/traces` with a protobuf body (`application/x-protobuf`, gzip or not:
what the SDK's `OTLPSpanExporter` sends), decodes it with the OTLP protocol's own message
(`ExportTraceServiceRequest`, from `opentelemetry-proto`) and keeps every span with its attributes. Point a
process at it with `OTEL_EXPORTER_OTLP_ENDPOINT=<receiver.url>`. Anything else is a 404; a body that does not
decode is a 400 (and is counted in `rejected`, so a test sees it).
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as it arrived: ids in lowercase hex (as `traceparent` writes them), attributes decoded."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    """'' for a root span."""
    kind: int
    """OTLP's SpanKind: 2 is SERVER, 1 INTERNAL."""
    status_code: int
    """OTLP's StatusCode: 0 unset, 1 ok, 2 error."""
    attributes: dict[str, Any]
    resource: dict[str, Any]
    start_ns: int
    end_ns: int


def value_of(value: AnyValue) -> Any:
    """An OTLP attribute value as Python: str, bool, int, float, bytes, list or dict."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value_of(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    return getattr(value, kind)


def attributes_of(pairs: Any) -> dict[str, Any]:
    found: list[KeyValue] = list(pairs)
    return {pair.key: value_of(pair.value) for pair in found}


def spans_decode(body: bytes) -> list[ReceivedSpan]:
    """Every span of one export request's protobuf body."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = attributes_of(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=span.kind,
                        status_code=span.status.code,
                        attributes=attributes_of(span.attributes),
                        resource=resource,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                    )
                )
    return spans


class OtlpReceiver:
    """The receiver on `127.0.0.1:<free port>`, serving in a daemon thread while the `with` block runs."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.exports = 0
        """Export requests accepted."""
        self.rejected = 0
        """Requests refused: a wrong path or method, or a body that is not an export request."""
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.split("?")[0] != "/v1/traces":
                    receiver._refuse(self, 404)
                    return
                try:
                    if self.headers.get("Content-Encoding") == "gzip":
                        body = gzip.decompress(body)
                    spans = spans_decode(body)
                except (DecodeError, OSError, EOFError):
                    receiver._refuse(self, 400)
                    return
                with receiver._lock:
                    receiver.spans.extend(spans)
                    receiver.exports += 1
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", PROTOBUF)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_GET(self) -> None:
                receiver._refuse(self, 404)

            def log_message(self, format: str, *args: Any) -> None:  # no line per export on stderr
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)

    def _refuse(self, handler: BaseHTTPRequestHandler, status: int) -> None:
        with self._lock:
            self.rejected += 1
        handler.send_response(status)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def received(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

    def wait_for(self, predicate: Callable[[list[ReceivedSpan]], bool], *, timeout: float = 30.0) -> list[ReceivedSpan]:
        """The spans received, once `predicate` holds of them (a bounded poll: the SDK exports in batches)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.received()
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(f"the spans received within {timeout} s do not qualify: {len(spans)} spans")
            time.sleep(0.05)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
