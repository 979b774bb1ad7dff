"""`GET /metrics`: every evaluating request counted once with the status its client got, whoever answered it, and
nothing else counted; phases, answers, tokens and limits measured; an optional scrape token; no secret and, unless
the operator asks, no key in any series."""

from __future__ import annotations

import json
from dataclasses import replace

import httpx
import pytest

from api.decisions.openapi_examples import DECISIONS_REQUEST
from tests.conftest import README_REQUEST
from tests.observability.helpers import Samples, samples_of, total, value


async def scrape(api: httpx.AsyncClient, **headers: str) -> Samples:
    response = await api.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return samples_of(response.text)


def growth(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return total(after, name, **labels) - total(before, name, **labels)


async def test_every_evaluating_request_is_counted_once_with_its_status(api, fake):
    before = await scrape(api)
    assert (await api.post("/v1/systemone", json=README_REQUEST)).status_code == 200
    assert (await api.post("/v1/decisions", json=DECISIONS_REQUEST)).status_code == 200
    assert (await api.post("/v1/systemone", json={**README_REQUEST, "model": "nope"})).status_code == 422
    assert (
        await api.post("/v1/decisions", content=b"{", headers={"Content-Type": "application/json"})
    ).status_code == 400
    too_large = await api.post("/v1/systemone", content=b"x" * (3 << 20), headers={"Content-Type": "application/json"})
    assert too_large.status_code == 413  # refused by the body reader, before Django
    assert (await api.get("/v1/systemone")).status_code == 405
    await api.get("/health")
    await api.get("/health/live")
    await api.get("/v1/models")
    after = await scrape(api)
    counted = {
        ("systemone", "200"): 1,
        ("decisions", "200"): 1,
        ("systemone", "422"): 1,
        ("decisions", "400"): 1,
        ("systemone", "413"): 1,
        ("systemone", "405"): 1,
    }
    for (api_name, status), n in counted.items():
        assert growth(before, after, "openjev_requests_total", api=api_name, status=status) == n, (api_name, status)
    assert growth(before, after, "openjev_requests_total") == 6  # /metrics, /health, /v1/models: not evaluations
    assert growth(before, after, "openjev_request_duration_seconds_count") == 6


async def test_an_answered_request_shows_its_phases_answers_tokens_and_label_mass(api, fake):
    before = await scrape(api)
    answer = await api.post("/v1/systemone", json=README_REQUEST)
    after = await scrape(api)
    for phase in ("admission", "parse", "validate", "prepare", "prefill", "branches", "render"):
        assert growth(before, after, "openjev_phase_duration_seconds_count", api="systemone", phase=phase) == 1, phase
    # Storage is off here (no database): the answer waited for no spool sync, so it has no `store` phase.
    assert growth(before, after, "openjev_phase_duration_seconds_count", api="systemone", phase="store") == 0
    for kind in ("noul", "choice", "score"):
        assert growth(before, after, "openjev_answers_total", api="systemone", type=kind) == 1
    assert (
        growth(before, after, "openjev_input_tokens_total", api="systemone") == answer.json()["usage"]["input_tokens"]
    )
    assert growth(before, after, "openjev_label_mass_count", api="systemone") == 1
    assert growth(before, after, "openjev_questions_per_request_sum", api="systemone") == 3
    assert growth(before, after, "openjev_backend_generations_total") >= 4
    assert value(after, "openjev_evaluations_in_flight") == 0


async def test_429s_are_counted_by_the_limit_that_refused(api, fake, settings):
    settings.OPENJEV = replace(settings.OPENJEV, key_requests_per_minute=1)
    before = await scrape(api)
    await api.post("/v1/systemone", json=README_REQUEST)
    refused = await api.post("/v1/systemone", json=README_REQUEST)
    assert refused.status_code == 429
    after = await scrape(api)
    assert growth(before, after, "openjev_rate_limited_total", limit="requests") == 1
    assert growth(before, after, "openjev_requests_total", api="systemone", status="429") == 1


async def test_backend_failures_are_counted_by_kind(api, fake):
    before = await scrape(api)
    fake.stop()
    failed = await api.post("/v1/systemone", json=README_REQUEST)
    after = await scrape(api)
    assert failed.status_code == 503
    assert growth(before, after, "openjev_backend_errors_total", kind="unavailable") == 1
    assert growth(before, after, "openjev_requests_total", api="systemone", status="503") == 1


async def test_each_scrape_checks_the_backend_so_backend_up_holds_without_health_probes(api, fake):
    from serving import metrics

    metrics.backend_up.set(0)  # as a process no balancer has probed starts
    assert value(await scrape(api), "openjev_backend_up") == 1
    fake.stop()
    assert value(await scrape(api), "openjev_backend_up") == 0


async def test_the_stream_counts_each_evaluation_under_its_own_api(asgi_server, fake):
    from websockets.asyncio.client import connect

    async with httpx.AsyncClient(base_url=asgi_server.url) as client:
        before = await scrape(client)
        async with connect(asgi_server.url.replace("http://", "ws://") + "/v1/systemone/stream") as socket:
            await socket.send(json.dumps({"id": 1, **README_REQUEST}))
            await socket.send(json.dumps({"id": 2, **README_REQUEST, "model": "nope"}))
            ended = 0
            while ended < 2:
                ended += json.loads(await socket.recv())["type"] in ("done", "error")
        after = await scrape(client)
    assert growth(before, after, "openjev_requests_total", api="stream", status="200") == 1
    assert growth(before, after, "openjev_requests_total", api="stream", status="422") == 1


async def test_a_socket_refused_because_the_process_is_full_counts_as_overloaded(asgi_server, settings):
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    settings.OPENJEV = replace(settings.OPENJEV, max_websockets=1)
    url = asgi_server.url.replace("http://", "ws://") + "/v1/systemone/stream"
    async with httpx.AsyncClient(base_url=asgi_server.url) as client:
        before = await scrape(client)
        async with connect(url), connect(url) as refused:
            with pytest.raises(ConnectionClosed) as closed:
                await refused.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4529
        after = await scrape(client)
    assert growth(before, after, "openjev_overloaded_total", reason="websockets") == 1


async def test_the_counters_alerts_read_increases_of_exist_at_zero_for_every_label_value_from_the_start(api):
    from api.plumbing.formats import wire_formats
    from api.plumbing.metering import STREAM_API
    from serving import metrics

    samples = await scrape(api)
    expected = {
        ("openjev_rate_limited_total", "limit"): metrics.LIMITS,
        ("openjev_overloaded_total", "reason"): metrics.OVERLOAD_REASONS,
        ("openjev_ratelimit_store_failures_total", "policy"): metrics.STORE_POLICIES,
        ("openjev_backend_errors_total", "kind"): metrics.BACKEND_ERROR_KINDS,
        ("openjev_refusals_total", "api"): (*(f.name for f in wire_formats()), STREAM_API),
    }
    for (name, label), values in expected.items():
        for found in values:
            assert (name, frozenset({label: found}.items())) in samples, (name, found)
    for sink in metrics.STORAGE_SINKS:
        for outcome in metrics.STORAGE_OUTCOMES:
            assert ("openjev_storage_writes_total", frozenset({"sink": sink, "outcome": outcome}.items())) in samples
    for phase in metrics.PHASES:  # a rate over the phases sees a burst the first scrape missed
        labels = frozenset({"api": STREAM_API, "phase": phase}.items())
        assert ("openjev_phase_duration_seconds_count", labels) in samples, phase


async def test_a_scrape_token_is_required_when_set(api, settings):
    settings.OPENJEV = replace(settings.OPENJEV, metrics_token="scrape-token-0123456789")
    refused = await api.get("/metrics")
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert (await api.get("/metrics", headers={"Authorization": "Bearer wrong"})).status_code == 401
    await scrape(api, Authorization="Bearer scrape-token-0123456789")


async def test_the_scrape_shows_the_build_and_the_workers(api):
    samples = await scrape(api)
    builds = [labels for (name, labels), v in samples.items() if name == "openjev_build_info" and v == 1]
    assert len(builds) == 1 and dict(builds[0])["version"] == "0.1.0"
    assert value(samples, "openjev_workers_up") == 1 and value(samples, "openjev_workers_configured") == 1


@pytest.mark.django_db(transaction=True)
async def test_keys_appear_only_as_public_labels_and_only_when_per_key_series_are_on(api, fake, settings):
    from audit.keys import apikey_issue
    from tests.database import db

    settings.OPENJEV = replace(settings.OPENJEV, require_api_key=True, metrics_token=None)
    issued = await db(lambda: apikey_issue(name="metered"))
    headers = {"Authorization": f"Bearer {issued.secret}"}
    assert (await api.post("/v1/systemone", json=README_REQUEST, headers=headers)).status_code == 200
    text = (await api.get("/metrics")).text
    assert issued.secret not in text and issued.label not in text and "openjev_key_requests_total{" not in text

    settings.OPENJEV = replace(settings.OPENJEV, metrics_per_key=True)
    assert (await api.post("/v1/systemone", json=README_REQUEST, headers=headers)).status_code == 200
    text = (await api.get("/metrics")).text
    assert issued.secret not in text
    samples = samples_of(text)
    assert value(samples, "openjev_key_requests_total", key=issued.label, api="systemone", status="200") >= 1
    assert value(samples, "openjev_key_input_tokens_total", key=issued.label) > 0
