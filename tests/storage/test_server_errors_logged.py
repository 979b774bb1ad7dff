"""Every 5xx logs its traceback once, with the request id where there is one: a bug behind the admin (Django's
own error view answers) and a bug behind the API (our error mapping answers) alike."""

from __future__ import annotations

import logging

import pytest

from audit.admin import dashboard
from tests.conftest import README_REQUEST

pytestmark = [pytest.mark.django_db(transaction=True)]


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR and r.exc_info]


def test_a_bug_behind_the_admin_is_a_500_whose_traceback_django_logs_once(admin_client, monkeypatch, caplog):
    def broken(**kwargs: object) -> None:
        raise ZeroDivisionError("a bug in the dashboard")

    monkeypatch.setattr(dashboard, "window_stats_compute", broken)
    admin_client.raise_request_exception = False
    with caplog.at_level(logging.ERROR):
        response = admin_client.get("/admin/evaluations/evaluation/dashboard/")
    assert response.status_code == 500
    (logged,) = _tracebacks(caplog)
    assert logged.name == "django.request" and logged.exc_info and logged.exc_info[0] is ZeroDivisionError


async def test_a_bug_behind_the_api_logs_its_traceback_once_with_the_request_id(api, fake, monkeypatch, caplog):
    from api.plumbing import evaluate

    async def broken(**kwargs: object) -> None:
        raise ZeroDivisionError("a bug in the core")

    monkeypatch.setattr(evaluate, "evaluation_run", broken)
    with caplog.at_level(logging.INFO):
        response = await api.post("/v1/systemone", json=README_REQUEST)
    assert response.status_code == 500
    (logged,) = _tracebacks(caplog)
    assert logged.exc_info and logged.exc_info[0] is ZeroDivisionError
    request_id = response.headers["x-typesafe-request-id"]
    assert any(request_id in r.getMessage() for r in caplog.records if r.name == "api.plumbing.error_responses")
