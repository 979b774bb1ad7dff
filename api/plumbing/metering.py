"""One meter per evaluating request: what the metrics (`serving.metrics`) and the trace (`api.plumbing.tracing`) of the
request are made of, recorded as it goes and reported once, when it ends.

The outermost ASGI wrapper (`Metering`) opens a meter for every request to an evaluating route and closes it
with the status the client got, whoever answered (the body reader's 413, DRF's 405, a view's 429, a 500), so
`openjev_requests_total` counts every answer and `/metrics` and `/health` count nothing. The WebSocket stream
opens one per evaluation message. The code in between adds what it knows: phases as they end (`phase_timed`),
the caller (`meter_caller`), and, from the stored record, the evaluation itself (`meter_evaluated`).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from api.plumbing.formats import wire_format_named, wire_formats
from api.plumbing.requestids import request_id_current
from api.plumbing.tracing import RequestSpan, request_span_end, request_span_start
from inference.runner import Outcome
from inference.tracing import trace_headers_bound
from serving import metrics
from serving.asgi_types import ASGIApp, Message, Receive, Scope, Send

request_log = logging.getLogger("openjev.request")
"""One line per evaluating request, with JSON logs (`api.plumbing.log_format`)."""

STREAM_API = "stream"
"""The `api` label of the WebSocket stream's evaluations."""
STREAM_SYSTEM = "typesafe"
"""OpenInference's `decision.system` of the System One stream's evaluations (it is no wire format of its own); every
wire format's is its `WireFormat.system`."""
CLIENT_CLOSED = 499
"""The status of a request whose client hung up before an answer started (as nginx logs it, and storage)."""


def decision_system(api: str) -> str | None:
    """OpenInference's `decision.system` of an API's calls: the API ecosystem the client speaks."""
    if api == STREAM_API:
        return STREAM_SYSTEM
    found = wire_format_named(api)
    return None if found is None else found.system


@dataclass
class Meter:
    """What one evaluating request has shown so far."""

    api: str
    route: str
    """The route the request was for, as the JSON log line names it (never the path a client sent)."""
    started: float = field(default_factory=time.perf_counter)
    started_ns: int = field(default_factory=time.time_ns)
    phases: list[tuple[str, int, int]] = field(default_factory=list)
    """(phase, start, end) in epoch nanoseconds, in the order they ended."""
    caller: str | None = None
    """The caller's public label (`oj_<prefix>`, `env`; '' without a key), once authenticated."""
    attributes: dict[str, Any] = field(default_factory=dict)
    """The trace's attributes of the evaluation (models, counts, label mass)."""
    span: RequestSpan | None = None

    def phase(self, name: str, start_ns: int, end_ns: int) -> None:
        self.phases.append((name, start_ns, end_ns))


_current: ContextVar[Meter | None] = ContextVar("openjev_meter", default=None)


def meter_current() -> Meter | None:
    return _current.get()


@contextmanager
def meter_open(*, api: str, route: str, name: str, headers: Any = ()) -> Iterator[Meter]:
    """A meter (and, with tracing on, a server span continuing the client's `traceparent`) for one request to
    `route` inside the block; the caller reports it with `meter_close`."""
    meter = Meter(api=api, route=route)
    meter.span = request_span_start(name=name, headers=headers, start_ns=meter.started_ns)
    token = _current.set(meter)
    try:
        with trace_headers_bound(headers=meter.span.headers if meter.span is not None else None):
            yield meter
    finally:
        _current.reset(token)


@contextmanager
def phase_timed(name: str) -> Iterator[None]:
    """Record the block as phase `name` of the current request (nothing outside one)."""
    meter = _current.get()
    if meter is None:
        yield
        return
    start = time.time_ns()
    try:
        yield
    finally:
        meter.phase(name, start, time.time_ns())


def phase_ended(name: str, *, start_ns: int) -> None:
    """Record phase `name` of the current request from `start_ns` until now (nothing outside one): a phase that ends
    inside work done elsewhere, such as a body's decoding in the body lane, before the work goes on."""
    meter = _current.get()
    if meter is not None:
        meter.phase(name, start_ns, time.time_ns())


def meter_caller(*, label: str | None) -> None:
    meter = _current.get()
    if meter is not None:
        meter.caller = label


_children: dict[tuple[Any, tuple[str, ...]], Any] = {}
"""Each metric's children by their label values, keyed by the metric object itself (held, so never reused)."""


def labelled(metric: Any, *values: str) -> Any:
    """`metric.labels(*values)`, its child kept: the library checks and locks on every lookup, and a request
    updates a dozen series (the label values are the code's few, so the dict stays small)."""
    key = (metric, values)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*values)
    return child


def meters_prepare(*, apis: Sequence[str]) -> None:
    """Create each API's own series at zero when the process starts, so the first scrape already shows them: a
    rate over a series that appears with its first requests already counted reads no increase, and a dashboard
    or an alert on it stays empty until the next request. (Series labelled by status or key appear with their
    first request: their values are not known up front.)"""
    for api in apis:
        for metric in (
            metrics.request_duration,
            metrics.questions_per_request,
            metrics.label_mass,
            metrics.refusals_total,
            metrics.input_tokens_total,
            metrics.cached_tokens_total,
        ):
            labelled(metric, api)
        for phase in metrics.PHASES:  # the phase panel's rate, else empty after a burst the first scrape missed
            labelled(metrics.phase_duration, api, phase)


SPAN_OF_PHASE = {
    "admission": "limits",
    "parse": "parse",
    "validate": "parse",
    "prefill": "prefill",
    "branches": "branches",
    "render": "render",
    "store": "store",
}
"""The trace's child spans: parse (the JSON and the wire format together), limits, prefill, branches, render and
store. Prepare is a metric only: each span costs the process a few tens of microseconds to build and export."""


def spans_of_phases(phases: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """The phases as the trace's spans: renamed, one span per name from its first start to its last end."""
    spans: dict[str, tuple[int, int]] = {}
    for phase, start, end in phases:
        name = SPAN_OF_PHASE.get(phase)
        if name is not None:
            first, last = spans.get(name, (start, end))
            spans[name] = (min(first, start), max(last, end))
    return [(name, start, end) for name, (start, end) in spans.items()]


def meter_close(*, meter: Meter, status: int) -> None:
    """Report the request: its count and duration by status, its phases, its per-key series (when on), its span,
    and with JSON logs its own log line."""
    api = meter.api
    seconds = time.perf_counter() - meter.started
    labelled(metrics.requests_total, api, str(status)).inc()
    labelled(metrics.request_duration, api).observe(seconds)
    if settings.OPENJEV.log_format == "json":
        extra = {"route": meter.route, "status": status, "duration_ms": round(seconds * 1000, 3)}
        request_log.info("%s %s %.1f ms", meter.route, status, seconds * 1000, extra=extra)
    for phase, start, end in meter.phases:
        labelled(metrics.phase_duration, api, phase).observe((end - start) / 1e9)
    if settings.OPENJEV.metrics_per_key and meter.caller is not None:
        labelled(metrics.key_requests_total, meter.caller, api, str(status)).inc()
    if meter.span is not None:
        request_span_end(
            span=meter.span,
            phases=spans_of_phases(meter.phases),
            attributes={**meter.attributes, "openjev.request_id": request_id_current()},
            status=status,
            end_ns=time.time_ns(),
        )


def meter_evaluated(
    *, outcome: Outcome | None, requested_model: str, served_model: str, questions: int, refusal_below: float
) -> None:
    """What one evaluation shows, from its stored record: questions, answers by type, the lowest label mass,
    tokens, backend generations and refusals; the prepare, prefill and branches phases as the core timed them."""
    meter = _current.get()
    # An evaluation outside any request (a dataset run, a batch line) counts under the first installed format.
    api = meter.api if meter is not None else wire_formats()[0].name
    labelled(metrics.questions_per_request, api).observe(questions)
    if meter is not None:
        meter.attributes |= {
            "openinference.span.kind": "DECISION",
            "decision.system": decision_system(api),
            "decision.provider": "openjev",
            "decision.request.model_name": requested_model or None,
            "decision.response.model_name": served_model or None,
            "decision.model_name": served_model or None,
            "openjev.question_count": questions,
        }
    if outcome is None:
        return
    answers = outcome.answers
    for kind, count in Counter(a.question.type for a in answers).items():
        labelled(metrics.answers_total, api, kind).inc(count)
    lowest = min((a.label_mass for a in answers), default=1.0)
    labelled(metrics.label_mass, api).observe(lowest)
    refused = sum(1 for a in answers if a.label_mass < refusal_below)
    if refused:
        labelled(metrics.refusals_total, api).inc(refused)
    labelled(metrics.input_tokens_total, api).inc(outcome.usage.input_tokens)
    if outcome.cached_tokens:
        labelled(metrics.cached_tokens_total, api).inc(outcome.cached_tokens)
    metrics.backend_generations_total.inc(outcome.generations)
    if meter is None:
        return
    if settings.OPENJEV.metrics_per_key and meter.caller is not None:
        labelled(metrics.key_input_tokens_total, meter.caller).inc(outcome.usage.input_tokens)
    timings = outcome.timings
    prefill_start = timings.prefill_started_ns
    if prefill_start:
        branches_start = prefill_start + int(timings.prefill_ms * 1e6)
        meter.phase("prepare", prefill_start - int(timings.prepare_ms * 1e6), prefill_start)
        meter.phase("prefill", prefill_start, branches_start)
        meter.phase("branches", branches_start, branches_start + int(timings.branches_ms * 1e6))
    meter.attributes |= {
        "decision.token_count.input": outcome.usage.input_tokens,
        "decision.token_count.output": outcome.usage.output_tokens,
        "openjev.label_mass": lowest,
        "openjev.refusals": refused,
    }


class Metering:
    """Opens and closes a meter for each request `api_of` names an evaluating API for (see the module)."""

    def __init__(self, app: ASGIApp, *, api_of: Any) -> None:
        self.app = app
        self.api_of = api_of
        """scope -> the API's name, or None for a request that is not an evaluation (`/metrics`, `/health`)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        api = self.api_of(scope) if scope["type"] == "http" else None
        if api is None:
            await self.app(scope, receive, send)
            return
        status = [CLIENT_CLOSED]  # no response started: the client hung up first

        async def send_seen(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        served = wire_format_named(api)
        route = served.path if served is not None else f"/v1/{api}"
        name = f"{scope.get('method', 'POST')} /v1/{api}"  # the route, never the path a client sent
        with meter_open(api=api, route=route, name=name, headers=scope["headers"]) as meter:
            try:
                await self.app(scope, receive, send_seen)
            except Exception:
                status[0] = 500 if status[0] == CLIENT_CLOSED else status[0]
                raise
            finally:
                meter_close(meter=meter, status=status[0])
