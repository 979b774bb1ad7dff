"""Storage never changes or delays an answer: a database outage, a slow database, a row the database
refuses, a full queue or missing tables are counted and logged while the answers go out unchanged.
Runs on SQLite and, with `-m postgres`, PostgreSQL."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace

import pytest
from django.db import OperationalError, connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from api.systemone.service import received_of_body
from audit.models import Evaluation, EvaluationAnswer
from audit.storage import store as storing
from audit.storage import writer
from audit.storage.records import StoredEvaluation
from tests.conftest import README_REQUEST
from tests.database import db
from tests.stored import drained

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


async def test_a_database_outage_still_returns_the_answer_and_is_counted(api, fake, store, monkeypatch):
    monkeypatch.setattr(writer, "RETRY_DELAYS", (0.01,))
    expected = (await api.post("/v1/systemone", json=README_REQUEST)).json()
    await drained()
    before = storing.storage_stats()

    def refuse(self, *args, **kwargs):
        raise OperationalError("connection refused (simulated outage)")

    writer.writer_stop()  # the next write opens a fresh connection, into the outage
    monkeypatch.setattr(BaseDatabaseWrapper, "ensure_connection", refuse)
    response = await api.post("/v1/systemone", json=README_REQUEST)
    assert response.status_code == 200
    assert response.json() == expected
    await drained()
    monkeypatch.undo()

    after = storing.storage_stats()
    assert after["failed"] == before["failed"] + 1 and after["stored"] == before["stored"]
    assert await db(lambda: Evaluation.objects.count()) == 1  # only the one before the outage


async def test_a_slow_database_does_not_delay_the_answer(api, fake, store, monkeypatch):
    real_insert = storing.rows_insert

    def slow_insert(batch):
        time.sleep(1.0)
        real_insert(batch)

    monkeypatch.setattr(storing, "rows_insert", slow_insert)
    await api.post("/v1/systemone", json=README_REQUEST)  # warm pools
    start = time.perf_counter()
    for _ in range(3):
        assert (await api.post("/v1/systemone", json=README_REQUEST)).status_code == 200
    assert time.perf_counter() - start < 1.0  # three answers while the first write still sleeps
    await drained()
    assert await db(lambda: Evaluation.objects.count()) == 4


async def test_a_failed_batch_is_retried_row_by_row_so_one_bad_row_loses_nothing_else(api, fake, store):
    # PostgreSQL refuses NUL characters in text and jsonb: that row is stored scrubbed, the others untouched.
    nul_key = {**README_REQUEST, "questions": {"pick": {"type": "choice", "criteria": {"a\x00b": None, "c": None}}}}
    responses = await asyncio.gather(
        *(api.post("/v1/systemone", json=body) for body in (README_REQUEST, nul_key, README_REQUEST))
    )
    assert [r.status_code for r in responses] == [200, 200, 200]
    await drained()
    assert await db(lambda: Evaluation.objects.count()) == 3
    choice = await db(lambda: EvaluationAnswer.objects.get(question_id="pick"))
    stored_key = "a\ufffdb" if connection.vendor == "postgresql" else "a\x00b"
    assert choice.option_keys == [stored_key, "c"]


async def test_a_full_queue_drops_and_counts_instead_of_blocking(api, fake, store, monkeypatch):
    small = writer.BatchWriter(queue_size=1)
    monkeypatch.setattr(storing, "writer", small)
    gate = asyncio.Event()
    release = threading.Event()
    real_write = small._batch_write

    def blocked_write(jobs):
        gate_set()
        release.wait(10)
        real_write(jobs)

    loop = asyncio.get_running_loop()

    def gate_set():
        loop.call_soon_threadsafe(gate.set)

    monkeypatch.setattr(small, "_batch_write", blocked_write)
    assert (await api.post("/v1/systemone", json=README_REQUEST)).status_code == 200  # taken by the writer
    await asyncio.wait_for(gate.wait(), 5)
    statuses = [(await api.post("/v1/systemone", json=README_REQUEST)).status_code for _ in range(3)]
    assert statuses == [200, 200, 200]  # one queued, two dropped, all answered
    release.set()
    assert await asyncio.to_thread(small.drain, timeout=10)
    stats = small.stats.of(storing.sink.name)
    assert (stats.written, stats.dropped) == (2, 2)
    small.stop(timeout=10)
    assert await db(lambda: Evaluation.objects.count()) == 2


def test_storage_errors_never_escape_evaluation_store(monkeypatch, settings):
    settings.OPENJEV = replace(settings.OPENJEV, store_evaluations="full")

    def broken_submit(*, sink, job):
        raise RuntimeError("boom")

    before = storing.storage_stats()["failed"]
    monkeypatch.setattr(storing.writer, "submit", broken_submit)
    storing.evaluation_store(
        record=StoredEvaluation(
            request_id="req_x",
            created_at=timezone.now(),
            level="full",
            caller=None,
            received=received_of_body(data={}),
            served_model="m",
            backend="sglang",
            total_ms=1.0,
        )
    )
    assert storing.storage_stats()["failed"] == before + 1


async def test_missing_tables_fail_fast_with_one_hint_not_row_by_row_retries(api, fake, store, monkeypatch):
    from django.db import ProgrammingError

    calls = []

    def unmigrated(batch):
        calls.append(len(batch))
        raise ProgrammingError('relation "evaluations_evaluation" does not exist')

    monkeypatch.setattr(storing, "rows_insert", unmigrated)
    before = storing.storage_stats()["failed"]
    responses = await asyncio.gather(*(api.post("/v1/systemone", json=README_REQUEST) for _ in range(3)))
    assert [r.status_code for r in responses] == [200, 200, 200]
    await drained()
    assert storing.storage_stats()["failed"] == before + 3
    assert sum(calls) == 3  # each row tried once, in its batch; no retries against a schema that is not there
