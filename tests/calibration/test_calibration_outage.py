"""Calibrations while the database is down or frozen: the calibrations last read keep applying, a process that has
read none serves uncalibrated answers after at most a short wait, and no answer waits for the database."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from django.db import OperationalError
from django.db.backends.base.base import BaseDatabaseWrapper

from audit.models import Calibration, EvaluationAnswer
from calibration import applied
from calibration.applied import CALIBRATED_HEADER, calibration_cache_forget
from serving.refreshed import REQUEST_WAIT_SECONDS
from tests.conftest import README_REQUEST
from tests.database import db
from tests.stored import drained

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


async def team_calibrated(api) -> None:
    """An active temperature calibration of the README's `team` question."""
    assert (await api.post("/v1/systemone", json=README_REQUEST)).status_code == 200
    await drained()

    def create() -> None:
        answer = EvaluationAnswer.objects.get(question_id="team")
        Calibration.objects.create(
            key=answer.question_key,
            question_type="choice",
            option_keys=answer.option_keys,
            method="temperature",
            temperature=2.0,
            report={},
            active=True,
        )

    await db(create)
    calibration_cache_forget()


async def test_calibrations_last_read_keep_applying_while_the_database_is_down(api, fake, store, monkeypatch):
    await team_calibrated(api)
    assert (await api.post("/v1/systemone", json=README_REQUEST)).headers[CALIBRATED_HEADER] == "team"
    monkeypatch.setattr(applied._cache, "every", 0.05)  # refreshes come due during the outage

    def refuse(self, *args, **kwargs):
        raise OperationalError("connection refused (simulated outage)")

    with monkeypatch.context() as outage:
        outage.setattr(BaseDatabaseWrapper, "ensure_connection", refuse)
        for _ in range(5):
            started = time.monotonic()
            response = await api.post("/v1/systemone", json=README_REQUEST)
            assert response.status_code == 200 and response.headers[CALIBRATED_HEADER] == "team"
            assert time.monotonic() - started < 1.0
            await asyncio.sleep(0.1)
        health = (await api.get("/health")).json()
        assert health["caches"]["calibrations"] >= 0.4  # the value served is as old as the outage
    await drained()


async def test_a_process_that_has_read_no_calibration_answers_uncalibrated_within_the_bound(
    api, fake, store, monkeypatch
):
    await team_calibrated(api)
    thaw = threading.Event()
    real_fetch = applied._active_fetch

    def frozen():
        thaw.wait(30)  # a database that took the query and never answers
        return real_fetch()

    monkeypatch.setattr(applied, "_active_fetch", frozen)
    started = time.monotonic()
    try:
        response = await api.post("/v1/systemone", json=README_REQUEST)
    finally:
        thaw.set()
    assert response.status_code == 200 and CALIBRATED_HEADER not in response.headers
    assert time.monotonic() - started < REQUEST_WAIT_SECONDS + 1.0
    await drained()
