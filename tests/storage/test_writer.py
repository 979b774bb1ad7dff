"""Storage never changes an answer and never loses an answered one: a database outage, a slow database, a row the
database refuses or missing tables keep the evaluations in the spool on disk until the database takes them, with
one log line per outage; a full spool refuses (503) or answers unstored, as the operator chose.
Runs on SQLite and, with `-m postgres`, PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from dataclasses import replace

import pytest
from django.db import OperationalError, ProgrammingError, connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from api.plumbing.recording import received_of_body
from audit.database import database_outage
from audit.models import Evaluation, EvaluationAnswer, KeyUsage
from audit.storage import store as storing
from audit.storage import writer
from audit.storage.records import StoredEvaluation
from audit.storage.spool import SpoolFull
from tests.conftest import README_REQUEST
from tests.database import db
from tests.stored import drained

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


async def stored_count() -> int:
    return await db(lambda: Evaluation.objects.count())


async def eventually(check, *, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.05)


async def test_an_outage_answers_unchanged_keeps_the_rows_in_the_spool_and_stores_them_when_it_ends(
    api, fake, store, monkeypatch, caplog
):
    monkeypatch.setattr(database_outage, "backoff", (0.05,))
    expected = (await api.post("/v1/systemone", json=README_REQUEST)).json()
    await drained()

    def refuse(self, *args, **kwargs):
        raise OperationalError("connection refused (simulated outage)")

    writer.writer_stop()  # the next write opens a fresh connection, into the outage
    caplog.set_level(logging.INFO)
    with monkeypatch.context() as outage:
        outage.setattr(BaseDatabaseWrapper, "ensure_connection", refuse)
        responses = [await api.post("/v1/systemone", json=README_REQUEST) for _ in range(5)]
        assert [r.json() for r in responses] == [expected] * 5
        await asyncio.sleep(0.5)  # several back-off steps into the outage
        assert storing.storage_stats()["pending"] == 5
    await drained()

    assert await stored_count() == 6  # every answer of the outage, none lost
    lines = [r.getMessage() for r in caplog.records if r.name == "audit.database"]
    assert len(lines) == 2, lines  # one when it began, one when it ended
    assert "unavailable" in lines[0] and "available again" in lines[1]


async def test_at_storage_off_usage_is_tallied_without_the_spool_kept_through_an_outage_and_written_after(
    api, fake, store, monkeypatch
):
    monkeypatch.setattr(database_outage, "backoff", (0.05,))
    store("off")

    def usage() -> Awaitable[list[tuple[int, int]]]:
        return db(lambda: list(KeyUsage.objects.values_list("evaluations", "questions")))

    def refuse(self, *args, **kwargs):
        raise OperationalError("connection refused (simulated outage)")

    writer.writer_stop()
    with monkeypatch.context() as outage:
        outage.setattr(BaseDatabaseWrapper, "ensure_connection", refuse)
        responses = [await api.post("/v1/systemone", json=README_REQUEST) for _ in range(3)]
        assert [r.status_code for r in responses] == [200, 200, 200]
        assert storing.storage_stats()["submitted"] == 0  # nothing spooled: no answer waited for a disk
        await asyncio.sleep(1.5)  # past the tally's second, into the outage
    await eventually(lambda: _equal(usage(), [(3, 9)]), seconds=5.0)  # written once due, no drain asked
    assert await stored_count() == 0


async def _equal(found: Awaitable[object], expected: object) -> bool:
    return await found == expected


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
    assert await stored_count() == 4


async def test_a_failed_batch_is_retried_row_by_row_so_one_bad_row_loses_nothing_else(api, fake, store):
    # PostgreSQL refuses NUL characters in text and jsonb: that row is stored scrubbed, the others untouched.
    nul_key = {**README_REQUEST, "questions": {"pick": {"type": "choice", "criteria": {"a\x00b": None, "c": None}}}}
    responses = await asyncio.gather(
        *(api.post("/v1/systemone", json=body) for body in (README_REQUEST, nul_key, README_REQUEST))
    )
    assert [r.status_code for r in responses] == [200, 200, 200]
    await drained()
    assert await stored_count() == 3
    choice = await db(lambda: EvaluationAnswer.objects.get(question_id="pick"))
    stored_key = "a\ufffdb" if connection.vendor == "postgresql" else "a\x00b"
    assert choice.option_keys == [stored_key, "c"]


async def test_a_full_spool_refuses_new_evaluations_with_a_retryable_503(api, fake, store, settings):
    writer.writer_stop()
    settings.OPENJEV = replace(settings.OPENJEV, spool_max_bytes=1, spool_full="refuse")
    first = await api.post("/v1/systemone", json=README_REQUEST)
    assert first.status_code == 503
    assert first.headers["retry-after"] == "5"
    assert "internal" not in first.text.lower() and "spool" not in first.text
    assert await stored_count() == 0


async def test_a_full_spool_answers_unstored_and_counts_them_when_the_operator_chose_so(api, fake, store, settings):
    writer.writer_stop()
    settings.OPENJEV = replace(settings.OPENJEV, spool_max_bytes=1, spool_full="answer")
    responses = [await api.post("/v1/systemone", json=README_REQUEST) for _ in range(2)]
    assert [r.status_code for r in responses] == [200, 200]
    assert storing.storage_stats()["dropped"] == 2
    await drained()
    assert await stored_count() == 0


def test_storage_errors_never_escape_evaluation_store(monkeypatch, settings):
    settings.OPENJEV = replace(settings.OPENJEV, store_evaluations="full")

    def broken_start():
        raise OSError("disk gone")

    monkeypatch.setattr(storing.pipeline, "started", broken_start)
    future = storing.evaluation_store(
        record=StoredEvaluation(
            request_id="req_x",
            created_at=timezone.now(),
            level="full",
            caller=None,
            received=received_of_body(data={}, api="systemone", state="state", keyed=True),
            served_model="m",
            backend="sglang",
            total_ms=1.0,
        )
    )
    assert future is not None
    with pytest.raises(SpoolFull):
        future.result(timeout=1)


async def test_missing_tables_keep_the_rows_spooled_until_migrated_with_one_hint(api, fake, store, monkeypatch, caplog):
    monkeypatch.setattr(database_outage, "backoff", (0.05,))
    real_insert = storing.rows_insert
    calls = []

    def unmigrated(batch):
        calls.append(len(batch))
        if len(calls) <= 3:
            raise ProgrammingError('relation "evaluations_evaluation" does not exist')
        real_insert(batch)

    monkeypatch.setattr(storing, "rows_insert", unmigrated)
    responses = await asyncio.gather(*(api.post("/v1/systemone", json=README_REQUEST) for _ in range(3)))
    assert [r.status_code for r in responses] == [200, 200, 200]
    await drained()
    assert await stored_count() == 3
    hints = [r.getMessage() for r in caplog.records if "manage.py migrate" in r.getMessage()]
    assert len(hints) == 1, hints


async def test_a_spool_is_written_only_into_the_database_it_was_started_for(api, fake, store, monkeypatch, tmp_path):
    monkeypatch.setattr(database_outage, "backoff", (0.05,))
    ids = []

    async def answered() -> None:
        response = await api.post("/v1/systemone", json=README_REQUEST)
        assert response.status_code == 200
        ids.append(response.headers["x-typesafe-request-id"])

    await answered()
    await drained()
    first_folder = storing.pipeline.directory

    def refuse(self, *args, **kwargs):
        raise OperationalError("connection refused (simulated outage)")

    with monkeypatch.context() as other_database:
        with monkeypatch.context() as outage:
            outage.setattr(BaseDatabaseWrapper, "ensure_connection", refuse)
            await answered()  # spooled for the first database, which is down
            other_database.setattr(storing, "spool_directory", lambda: tmp_path / "another-database")
            await answered()  # the database changed under the spool: a new spool, in the other one's folder
        await drained()
        stored = await db(lambda: set(Evaluation.objects.values_list("request_id", flat=True)))
        assert stored == {ids[0], ids[2]}  # what waited for the first database was not written into this one
    await answered()  # the first database again: its folder's spool, left by the stopped one, is written out
    await drained()
    assert storing.pipeline.directory == first_folder
    assert await db(lambda: set(Evaluation.objects.values_list("request_id", flat=True))) == set(ids)


async def test_a_dead_processs_spool_is_written_out_when_the_service_starts_without_waiting_for_traffic(
    api, fake, store, monkeypatch
):
    monkeypatch.setattr(database_outage, "backoff", (0.05,))

    def refuse(self, *args, **kwargs):
        raise OperationalError("connection refused (simulated outage)")

    with monkeypatch.context() as outage:
        outage.setattr(BaseDatabaseWrapper, "ensure_connection", refuse)
        assert (await api.post("/v1/systemone", json=README_REQUEST)).status_code == 200
        # The process dies with its answer spooled: its threads end, its lock goes, its files stay (an orphan).
        spool, drainer = storing.pipeline.spool, storing.pipeline.drainer
        assert spool is not None and drainer is not None
        await asyncio.to_thread(drainer.stop, timeout=0.2)
        spool.stop(timeout=5)
        spool.close()
        storing.pipeline.spool = storing.pipeline.drainer = None
    assert await stored_count() == 0

    await asyncio.to_thread(storing.storage_start)  # what `serve` does once its evaluator is ready

    async def written() -> bool:
        return await stored_count() == 1

    await eventually(written)
    assert storing.storage_stats()["replayed"] == 1
