"""What a client may not learn (backend URLs, credentials, backend text, startup reasons), what operators
get instead (the log and the stored row, redacted), and which routes need the key when auth is on."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from api.plumbing.error_responses import PUBLIC_MESSAGES
from inference.backends.sglang import SGLangBackend
from serving.config_reading import config_describe, config_from_env
from serving.evaluator import evaluator_build, evaluator_install
from serving.redaction import RedactingFormatter, text_redact
from testbed.qwen3 import qwen3_tokenizer
from tests.api.helpers import assert_error
from tests.conftest import README_REQUEST

SECRET = "hunter2-backend-password"
BACKEND_KEY = "sk-backend-key-0123456789"


def credentialed_engine(fake, settings):
    """The fake SGLang reached through a URL with credentials in it, and a backend API key."""
    url = fake.url.replace("http://", f"http://openjev:{SECRET}@")
    settings.OPENJEV = replace(settings.OPENJEV, backend="sglang", backend_url=url, backend_api_key=BACKEND_KEY)
    backend = SGLangBackend(url=url, model="Qwen/Qwen3.6-35B-A3B", tokenizer=qwen3_tokenizer(), api_key=BACKEND_KEY)
    evaluator_install(evaluator_build(config=settings.OPENJEV, backend=backend))


FAULTS = {
    "unreachable backend": (503, "backend_unavailable"),
    "backend not ready": (503, "backend_unavailable"),
    "backend error with its own text": (502, "backend_error"),
    "malformed log-probs": (502, "backend_error"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_a_fault_answers_a_generic_message_with_the_request_id_and_logs_the_redacted_cause(
    api, fake, settings, caplog, fault
):
    credentialed_engine(fake, settings)
    if fault == "unreachable backend":
        fake.dead()
    elif fault == "backend not ready":
        fake.fail_status = 503
    elif fault == "backend error with its own text":
        fake.fail_status = 500
    else:
        fake.malformed = "missing_logprobs"
    caplog.set_level(logging.WARNING)
    response = await api.post("/v1/systemone", json=README_REQUEST)
    status, error_type = FAULTS[fault]
    assert_error(response, status, error_type)
    request_id = response.headers["x-typesafe-request-id"]
    assert response.json()["detail"]["message"] == f"{PUBLIC_MESSAGES[status]} (request id {request_id})"
    lines = [RedactingFormatter("%(message)s").format(r) for r in caplog.records if request_id in r.getMessage()]
    assert len(lines) == 1 and SECRET not in lines[0] and BACKEND_KEY not in lines[0]
    assert not lines[0].endswith(PUBLIC_MESSAGES[status])  # operators get the cause
    if fault == "unreachable backend":
        assert "***@127.0.0.1" in lines[0]


async def test_the_same_fault_gives_the_same_message_but_for_the_id(api, fake):
    fake.fail_status = 500
    first, second = [
        (await api.post("/v1/systemone", json=README_REQUEST)).json()["detail"]["message"] for _ in range(2)
    ]
    assert first != second and first.split(" (request id")[0] == second.split(" (request id")[0]


async def test_a_bug_answers_500_with_the_request_id_and_no_exception_text(api, fake, monkeypatch):
    from api.plumbing import evaluate

    async def broken(**kwargs):
        raise KeyError(f"http://admin:{SECRET}@db.internal/")

    monkeypatch.setattr(evaluate, "evaluation_run", broken)
    response = await api.post("/v1/systemone", json=README_REQUEST)
    assert_error(response, 500, "internal_error")
    assert SECRET not in response.text and "KeyError" not in response.text
    assert response.headers["x-typesafe-request-id"] in response.json()["detail"]["message"]


async def test_classify_faults_are_generic_too(api, fake, monkeypatch):
    from api.classify import service

    async def unavailable(*, name):
        from inference.errors import BackendUnavailable

        raise BackendUnavailable(f"SGLang at http://u:{SECRET}@10.0.0.1 is unreachable")

    monkeypatch.setattr(service, "classifier_find", unavailable)
    response = await api.post("/v1/classify", json={"model": "sentiment", "input": "hi"})
    assert response.status_code == 503
    body = response.json()
    assert body["type"] == "backend_unavailable" and SECRET not in response.text and "10.0.0.1" not in response.text
    assert body["error"].endswith(f"(request id {response.headers['x-typesafe-request-id']})")
    assert response.headers["x-typesafe-request-id"].startswith("classify-")


def test_redaction_removes_url_credentials_and_configured_secrets():
    text = (
        f"SGLang at http://user:{SECRET}@gw:30000 failed; db postgresql://app:p@ss@db:5432/x; "
        f"header Bearer {BACKEND_KEY}; short abc"
    )
    redacted = text_redact(text=text, secrets=[BACKEND_KEY, "abc", None])
    assert SECRET not in redacted and BACKEND_KEY not in redacted and "p@ss" not in redacted
    assert "http://***@gw:30000" in redacted and "postgresql://***@db:5432/x" in redacted
    assert redacted.endswith("short abc")  # too short to search for


def test_config_describe_redacts_urls_and_secrets():
    config = config_from_env(
        {
            "OPENJEV_BACKEND_URL": f"http://u:{SECRET}@gw:30000",
            "OPENJEV_DATABASE_URL": f"postgresql://app:{SECRET}@db/openjev",
            "OPENJEV_API_KEY": "client-key-123456",
            "OPENJEV_SECRET_KEY": "s" * 50,
        }
    )
    described = repr(config_describe(config))
    assert SECRET not in described and "client-key-123456" not in described and "s" * 50 not in described
    assert "http://***@gw:30000" in described


def test_every_log_line_is_redacted_by_the_site_formatter(settings):
    settings.OPENJEV = replace(settings.OPENJEV, backend_api_key=BACKEND_KEY)
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "waiting for %s/health with %s", (f"http://u:{SECRET}@gw", BACKEND_KEY), None
    )
    line = RedactingFormatter("%(message)s").format(record)
    assert line == "waiting for http://***@gw/health with ***"


OPEN = ["/health", "/health/live"]
KEYED = [
    ("GET", "/v1/models"),
    ("GET", "/v1/limits"),
    ("OPTIONS", "/v1/systemone"),
    ("OPTIONS", "/v1/models"),
    ("POST", "/v1/systemone"),
    ("GET", "/v1/systemone"),
    ("POST", "/v1/classify"),
    ("DELETE", "/v1/limits"),
]


@pytest.mark.parametrize("method, path", KEYED)
async def test_with_auth_on_every_v1_route_needs_the_key(api, fake, settings, method, path):
    settings.OPENJEV = replace(settings.OPENJEV, require_api_key=True, api_key="client-key-123456")
    refused = await api.request(method, path)
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert refused.headers["x-typesafe-request-id"]
    allowed = await api.request(
        method,
        path,
        headers={"Authorization": "Bearer client-key-123456"},
        json=README_REQUEST if method == "POST" and path.endswith("systemone") else None,
    )
    assert allowed.status_code != 401


@pytest.mark.parametrize("path", OPEN)
async def test_with_auth_on_the_health_checks_stay_open(api, fake, settings, path):
    settings.OPENJEV = replace(settings.OPENJEV, require_api_key=True)
    assert (await api.get(path)).status_code == 200


async def test_without_auth_every_route_answers_without_a_key(api, fake):
    for path in ("/v1/models", "/v1/limits"):
        assert (await api.get(path)).status_code == 200
    assert (await api.options("/v1/systemone")).status_code == 200
