"""Issue #33's acceptance, on `serve --workers 2` and the SGLang stand-in, as deployed: 20 System One, 20
Decisions and 5 invalid requests are counted 45 times out of 45 in every scrape, whichever worker answers it;
the spans reach an OTLP/HTTP receiver with OpenInference's `decision.system` of each wire format, a client's
`traceparent` is continued and passed on to the backend; with `OPENJEV_LOG_FORMAT=json` every line of the log
is a JSON object and each request has a line of its own with its ids, route, status and duration."""

from __future__ import annotations

import json
from collections import Counter

import httpx
import pytest

from testbed.otlp import OtlpReceiver, ReceivedSpan
from tests.observability.helpers import Samples, samples_of, total
from tests.observability.servers import SENT, requests_of_known_outcome, serve_two_workers, workers_answering

pytestmark = pytest.mark.servers

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
SERVER = 2
"""OTLP's SpanKind SERVER."""
ROUTES = {"systemone": "/v1/systemone", "decisions": "/v1/decisions"}


def scrapes_over_new_connections(url: str, *, count: int = 6, tries: int = 60) -> list[tuple[int, Samples]]:
    """At least `count` scrapes of `/metrics`, each on a new connection, until both workers have answered some:
    (the worker that answered, what it showed). The worker is the one `/health` names on the same connection."""
    scrapes: list[tuple[int, Samples]] = []
    for _ in range(tries):
        with httpx.Client(base_url=url, timeout=30) as client:  # one connection: one worker
            worker = client.get("/health").json()["worker_pid"]
            response = client.get("/metrics")
            assert response.status_code == 200, response.text
            scrapes.append((worker, samples_of(response.text)))
        if len(scrapes) >= count and len({w for w, _ in scrapes}) == 2:
            return scrapes
    raise AssertionError(f"{tries} scrapes over new connections reached only workers { ({w for w, _ in scrapes}) }")


def server_spans(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return [span for span in spans if span.kind == SERVER]


def all_requests_traced(spans: list[ReceivedSpan]) -> bool:
    return len(server_spans(spans)) >= sum(SENT.values())


def test_every_scrape_of_either_worker_counts_all_45_requests_and_every_request_is_traced(fake, tmp_path):
    with OtlpReceiver() as receiver:
        serve = serve_two_workers(
            fake_url=fake.url,
            log=tmp_path / "serve.log",
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
            OTEL_BSP_SCHEDULE_DELAY="200",
            OTEL_SERVICE_NAME="openjev-acceptance",
        )
        with serve:
            workers = workers_answering(serve.url, want=2)
            fake.reset()
            assert requests_of_known_outcome(serve.url, traceparent=TRACEPARENT) == Counter(SENT)

            scrapes = scrapes_over_new_connections(serve.url)
            assert {worker for worker, _ in scrapes} == workers
            for worker, samples in scrapes:
                assert total(samples, "openjev_requests_total") == 45, worker
                assert total(samples, "openjev_request_duration_seconds_count") == 45, worker
                for (api, status), sent in SENT.items():
                    assert total(samples, "openjev_requests_total", api=api, status=status) == sent, (worker, api)

            spans = receiver.wait_for(all_requests_traced, timeout=30)
            assert serve.terminate() == 0, serve.log
        assert receiver.rejected == 0

    requests = server_spans(spans)
    assert len(requests) == 45, [span.name for span in requests]
    statuses = Counter(
        (span.name.rsplit("/", 1)[1], str(span.attributes["http.response.status_code"])) for span in requests
    )
    assert statuses == Counter(SENT)
    systems = Counter(span.attributes.get("decision.system") for span in requests)
    # A request for a model not served is a decision request too; a body that is no request, or a GET, is not.
    assert systems == {"typesafe": 20 + 2, "openai": 20 + 1, None: 2}
    for span in requests:
        api = span.name.rsplit("/", 1)[1]
        if "decision.system" in span.attributes:
            assert span.attributes["decision.system"] == {"systemone": "typesafe", "decisions": "openai"}[api]
            assert span.attributes["openinference.span.kind"] == "DECISION"
        if span.attributes["http.response.status_code"] == 200:
            assert span.attributes["decision.token_count.input"] > 0 and span.attributes["openjev.question_count"] == 3
        assert span.resource["service.name"] == "openjev-acceptance"
        assert span.attributes["openjev.request_id"].startswith("req_")

    # The client's traceparent is continued: its trace, its span as the parent.
    (continued,) = [span for span in requests if span.trace_id == TRACE_ID]
    assert continued.name == "POST /v1/systemone" and continued.parent_span_id == PARENT_ID
    assert all(span.parent_span_id == "" for span in requests if span is not continued)
    # Each request's phases are child spans of it.
    phases = {span.name for span in spans if span.parent_span_id == continued.span_id}
    assert {"parse", "limits", "prefill", "branches", "render"} == phases  # storage off: no wait for a disk

    # The stand-in got a traceparent on every /generate call: the trace of the request that made it, the span of
    # that request as its parent.
    generated = [record for record in fake.requests if record["path"] == "/generate"]
    assert len(generated) >= 40
    sent_on = [record["headers"]["traceparent"].split("-") for record in generated]
    by_span = {span.span_id: span.trace_id for span in requests}
    assert all(by_span[parent] == trace for _, trace, parent, _ in sent_on)
    assert sum(trace == TRACE_ID for _, trace, _, _ in sent_on) >= 2  # warm-up and branches of the continued one


REQUEST_FIELDS = ("request_id", "trace_id", "route", "status", "duration_ms")


def test_with_json_logs_every_line_is_an_object_and_each_request_has_a_line_with_its_ids(fake, tmp_path):
    with OtlpReceiver() as receiver:
        serve = serve_two_workers(
            fake_url=fake.url,
            log=tmp_path / "serve.log",
            OPENJEV_LOG_FORMAT="json",
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
            OTEL_BSP_SCHEDULE_DELAY="200",
        )
        with serve:
            workers_answering(serve.url, want=2)
            assert requests_of_known_outcome(serve.url, traceparent=TRACEPARENT) == Counter(SENT)
            spans = receiver.wait_for(all_requests_traced, timeout=30)
            assert serve.terminate() == 0, serve.log
        lines = serve.log.splitlines()

    entries = []
    for number, line in enumerate(lines, 1):
        entry = json.loads(line)  # every line, the parent's and both workers', uvicorn's too
        assert isinstance(entry, dict), (number, line)
        assert {"time", "level", "logger", "message"} <= entry.keys(), (number, line)
        entries.append(entry)
    assert {entry["logger"] for entry in entries} >= {"openjev.serve", "uvicorn.error", "openjev.request"}

    requests = [entry for entry in entries if entry["logger"] == "openjev.request"]
    assert len(requests) == 45
    for entry in requests:
        assert set(REQUEST_FIELDS) <= entry.keys(), entry
        assert entry["route"] == ROUTES[entry["api"]] and isinstance(entry["duration_ms"], float)
        assert entry["request_id"].startswith("req_") and len(entry["trace_id"]) == 32
    statuses = Counter((entry["api"], str(entry["status"])) for entry in requests)
    assert statuses == Counter(SENT)
    # The ids in the log are the trace's: the continued request's line carries the client's trace id.
    (continued,) = [entry for entry in requests if entry["trace_id"] == TRACE_ID]
    assert continued["route"] == "/v1/systemone" and continued["status"] == 200
    traced = {span.attributes["openjev.request_id"]: span.trace_id for span in server_spans(spans)}
    assert {entry["request_id"]: entry["trace_id"] for entry in requests} == traced
