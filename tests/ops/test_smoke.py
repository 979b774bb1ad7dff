"""The smoke test against real servers: passing on the fake backend and on the embedded engine, waiting
through a start, and failing clearly against servers that answer wrong."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import httpx
import pytest
from django.core.management import CommandError, call_command

from serving.evaluator import evaluator_install
from serving.smoke import SmokeFailed, smoke_run, startup_wait
from serving.smoke_checks import TYPES_QUESTIONS
from testbed.evaluators import fake_evaluator
from testbed.live_server import LiveServer
from testbed.ports import free_port
from tests.ops.fake_sglang_python import keyword_model
from tests.ops.helpers import ROOT, Serve, fake_python_write, serve_env

pytestmark = pytest.mark.servers


def _quiet(line: str) -> None:
    pass


@pytest.fixture
def right(fake):
    """A fake model that answers the smoke test's questions right: Billing (payments), Yes to the refund."""
    fake.logprob_fn = keyword_model(["Payments", "Yes"])
    return fake


def test_smoke_passes_on_the_fake_backend_and_writes_its_report(right, asgi_server, tmp_path):
    output = tmp_path / "smoke-result.json"
    lines: list[str] = []
    report = smoke_run(url=asgi_server.url, output=output, timeout=30, say=lines.append)
    assert json.loads(output.read_text()) == report
    assert report["ok"] and report["failures"] == []
    assert report["max_answers"] == 255 and report["model"] == "jev-latest"
    assert report["startup_wait_seconds"] >= 0 and report["container_startup_seconds"] is not None
    types = report["requests"]["types"]
    assert types["status"] == 200 and list(types["response"]["answers"]) == list(TYPES_QUESTIONS)
    assert "prefill;dur=" in report["server_timing"] and report["latency_ms"] > 0
    assert report["prefix_tokens"] > 0 and isinstance(report["cached_tokens"], int)
    biggest = report["requests"]["max_choice"]
    assert biggest["status"] == 200 and len(biggest["response"]["answers"]["department"]["probabilities"]) == 255
    assert report["requests"]["too_many"]["status"] == 422
    assert {c["name"] for c in report["checks"]} >= {
        "semantic: a refund request is a refund",
        "semantic: billing beats technical",
        "choice with 256 options is refused with 422",
    }
    assert any(line.startswith("PASS semantic: billing beats technical") for line in lines)


def test_cached_tokens_are_null_when_the_backend_does_not_report_them(right, asgi_server, tmp_path):
    right.report_cached_tokens = False
    report = smoke_run(url=asgi_server.url, output=tmp_path / "r.json", timeout=30, say=_quiet)
    assert report["ok"] and report["cached_tokens"] is None
    assert report["requests"]["max_choice"]["cached_tokens"] is None


def test_smoke_fails_clearly_against_a_model_that_answers_wrong(fake, asgi_server, tmp_path):
    fake.logprob_fn = keyword_model(["Bugs", "No"])
    output = tmp_path / "smoke-result.json"
    expected = r"a refund request is a refund \(P\(refund\) = 0\.0.*billing beats technical"
    with pytest.raises(SmokeFailed, match=expected) as failure:
        smoke_run(url=asgi_server.url, output=output, timeout=30, say=_quiet)
    written = json.loads(output.read_text())
    assert written == failure.value.report and written["ok"] is False
    assert written["failures"] == ["semantic: a refund request is a refund", "semantic: billing beats technical"]


def test_smoke_fails_when_one_option_too_many_is_accepted(right, settings, tmp_path):
    settings.OPENJEV = replace(settings.OPENJEV, max_answers=300)
    evaluator_install(fake_evaluator(right, max_answers=300))
    try:
        with LiveServer() as server, pytest.raises(SmokeFailed, match="256 options is refused with 422"):
            smoke_run(url=server.url, max_answers=255, output=tmp_path / "r.json", timeout=30, say=_quiet)
    finally:
        evaluator_install(None)


def test_the_command_uses_openjev_api_key(right, asgi_server, settings, tmp_path, monkeypatch, capsys):
    settings.OPENJEV = replace(settings.OPENJEV, api_key="s3cret")
    output = tmp_path / "smoke-result.json"
    with pytest.raises(CommandError, match="wants an API key: set OPENJEV_API_KEY"):
        call_command("smoke", asgi_server.url, "--output", str(output), "--timeout", "10")
    assert json.loads(output.read_text())["ok"] is False
    monkeypatch.setenv("OPENJEV_API_KEY", "s3cret")
    call_command("smoke", asgi_server.url, "--output", str(output), "--timeout", "10")
    assert json.loads(output.read_text())["ok"] is True
    assert "report written to" in capsys.readouterr().out


def _mock(statuses: list[int]) -> httpx.MockTransport:
    answers = iter(statuses)

    def handle(request: httpx.Request) -> httpx.Response:
        status = next(answers)
        if status == 0:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(status, json={"status": "ok", "startup_seconds": 41.5} if status == 200 else {})

    return httpx.MockTransport(handle)


def test_startup_retries_gateway_errors_and_refused_connections():
    with httpx.Client(base_url="http://api", transport=_mock([0, 502, 503, 504, 0, 200])) as client:
        waited, health = startup_wait(client=client, timeout=10, say=_quiet, interval=0.01)
    assert health["startup_seconds"] == 41.5 and waited >= 0


@pytest.mark.parametrize(("statuses", "message"), [([404], "answered 404"), ([503] * 50, "did not become healthy")])
def test_startup_gives_up_on_a_wrong_url_at_once_and_on_a_server_that_never_starts(statuses, message):
    with (
        httpx.Client(base_url="http://api", transport=_mock(statuses)) as client,
        pytest.raises(SmokeFailed, match=message),
    ):
        startup_wait(client=client, timeout=0.2, say=_quiet, interval=0.01)


def test_smoke_command_waits_for_serve_to_start_and_passes(tmp_path):
    """The one-command path: `serve` launching (fake) SGLang that takes a while to load, and `smoke`
    started at the same moment, waiting through refused connections until the API is up."""
    python = fake_python_write(tmp_path)
    env = serve_env(FAKE_SGLANG_START_DELAY="3", FAKE_SGLANG_FAVOR_WORDS="Payments,Yes")
    with Serve(
        ["--sglang-python", str(python), "--sglang-port", str(free_port())], log=tmp_path / "serve.log", env=env
    ) as serve:
        output = tmp_path / "smoke-result.json"
        smoke = subprocess.run(
            [sys.executable, "manage.py", "smoke", serve.url, "--output", str(output), "--timeout", "120"],
            cwd=ROOT,
            env=serve_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert smoke.returncode == 0, smoke.stdout + smoke.stderr + serve.log
        report = json.loads(output.read_text())
        assert report["ok"] and report["startup_wait_seconds"] > 0
        assert report["container_startup_seconds"] >= 3  # includes SGLang's (fake) load
        assert "waiting for" in smoke.stdout and "smoke test passed" in smoke.stdout
        assert serve.terminate() == 0


@pytest.mark.embedded
def test_smoke_passes_on_the_embedded_engine(tmp_path, settings):
    cache = str(settings.OPENJEV.model_cache)  # the one `make serve` and the other embedded tests fill
    env = serve_env(OPENJEV_BACKEND="local", OPENJEV_MODEL_CACHE=cache, OPENJEV_REQUEST_TIMEOUT="1200")
    with Serve([], log=tmp_path / "serve.log", env=env) as serve:
        serve.wait_healthy(timeout=300)
        output = tmp_path / "smoke-result.json"
        smoke = subprocess.run(
            [sys.executable, "manage.py", "smoke", serve.url, "--output", str(output), "--request-timeout", "900"],
            cwd=ROOT,
            env=serve_env(),
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert smoke.returncode == 0, smoke.stdout + smoke.stderr
        report = json.loads(output.read_text())
        assert report["ok"] and report["health"]["backend"] == "local"
        assert report["max_answers"] == 255 and isinstance(report["cached_tokens"], int)
        assert serve.terminate() == 0
