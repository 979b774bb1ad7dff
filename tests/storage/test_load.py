"""Short form of the storage load check (`testbed/storage_load.py`, run at length by `bench/load_storage.py`):
concurrency above the admission limit, storage on, the real app under uvicorn. Every response is 200 or 529
and the stored rows match the responses one for one."""

from __future__ import annotations

import pytest

from testbed.storage_load import storage_load_check

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_every_evaluation_under_load_is_stored_exactly_once(asgi_server, fake, store, settings):
    limit = settings.OPENJEV.max_concurrent_requests
    report = storage_load_check(
        url=asgi_server.url, fake=fake, evaluations=80, concurrency=limit + 8, serial=20, delay=0.02
    )  # evaluations last >= 40 ms, so more than `limit` overlap
    for line in report.lines():
        print(line)
    load = report.load
    assert load.problems() == [] and report.serial_full.problems() == [] and report.load_off.problems() == []
    assert load.responses[200] > 0 and load.responses[529] > 0, load.responses  # the gate really refused some
    assert sum(load.stored.values()) == load.evaluations
    assert sum(report.serial_off.stored.values()) == 0
