"""The trace an evaluation belongs to, as the headers a backend call carries (W3C `traceparent`, `tracestate`).

The HTTP edge knows the trace (it continues the client's `traceparent` in a span of its own); the backends only
pass it on, so SGLang's own tracing, or a gateway's, joins the same trace. A context variable carries it: it
follows the evaluation into every task it starts, and the core needs no tracing library to pass a header on.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

_headers: ContextVar[Mapping[str, str] | None] = ContextVar("openjev_trace_headers", default=None)


def trace_headers_current() -> Mapping[str, str] | None:
    """The trace headers for backend calls made now; None outside a traced evaluation."""
    return _headers.get()


@contextmanager
def trace_headers_bound(*, headers: Mapping[str, str] | None) -> Iterator[None]:
    """`headers` on every backend call made inside the block (and in the tasks it starts)."""
    token = _headers.set(headers or None)
    try:
        yield
    finally:
        _headers.reset(token)
