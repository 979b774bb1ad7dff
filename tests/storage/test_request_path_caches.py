"""The request path's caches (`serving.refreshed`, read by `serving.refresher`) on a database that fails, freezes
or answers slowly: the last good value serves at any age, a value never read is waited for at most a short bound
(not at all while the database is known down), one query serves every key that missed meanwhile, one attempt is
made per back-off step, an outage is logged once with a count when it ends, and each cache's age is published. No
database: the fetch is a function these tests control."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time

import pytest
from prometheus_client import REGISTRY

from serving import refreshed as refreshing
from serving.outage import Outage
from serving.refreshed import Refreshed, Unavailable
from serving.refresher import Refresher

log = logging.getLogger("tests.caches")


class Database:
    """What the fetch reads: rows by key, and whether the database is up, frozen or down; every query counted."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}
        self.down = False
        self.frozen = threading.Event()
        self.frozen.set()
        self.queries: list[list[str]] = []

    def fetch(self, keys: list[str]) -> dict[str, str | None]:
        self.queries.append(list(keys))
        self.frozen.wait(30)
        if self.down:
            raise ConnectionError("connection refused")
        return {key: self.rows.get(key) for key in keys}


@pytest.fixture
def database() -> Database:
    return Database()


@pytest.fixture
def outage() -> Outage:
    return Outage(what="the test database", log=log, backoff=(0.2,))


def cache_on(database: Database, outage: Outage, *, name: str, every: float = 60.0, idle: float = 60.0) -> Refreshed:
    thread = Refresher(outage=outage, unavailable=lambda exc: isinstance(exc, ConnectionError))
    return Refreshed(name=name, fetch=database.fetch, every=every, idle=idle, max_entries=100, refresher=thread)


def published(name: str) -> float | None:
    return REGISTRY.get_sample_value("openjev_cache_updated_timestamp_seconds", {"cache": name})


async def test_the_last_good_value_serves_while_the_database_is_down_and_its_age_grows(database, outage, caplog):
    database.rows["k"] = "v1"
    cache = cache_on(database, outage, name="t-stale", every=0.1)
    assert await cache.load("k") == "v1"
    read_at = published("t-stale")
    assert read_at is not None and abs(read_at - time.time()) < 2
    database.down = True
    caplog.set_level(logging.WARNING, logger="tests.caches")
    await asyncio.sleep(1.0)  # rounds every 0.1 s fail, one attempt per 0.2 s step
    assert await cache.load("k") == "v1"  # at once, the value last read
    assert published("t-stale") == read_at  # its age (time() - this) grows
    assert 2 <= len(database.queries) - 1 <= 7  # about one attempt per back-off step, not one per round or request
    database.down = False
    database.rows["k"] = "v2"
    await asyncio.sleep(0.5)
    assert await cache.load("k") == "v2"
    lines = [r.getMessage() for r in caplog.records if r.name == "tests.caches"]
    assert len(lines) == 2, lines  # one when it began, one with the count when it ended
    assert f"unavailable to process {os.getpid()} (ConnectionError: connection refused)" in lines[0]
    assert "available again to process" in lines[1] and "failed attempt(s)" in lines[1]


async def test_a_value_never_read_waits_at_most_the_bound_on_a_frozen_database(database, outage, monkeypatch):
    monkeypatch.setattr(refreshing, "REQUEST_WAIT_SECONDS", 0.5)
    cache = cache_on(database, outage, name="t-frozen")
    database.frozen.clear()
    started = time.monotonic()
    with pytest.raises(Unavailable):
        await cache.load("unknown")
    assert time.monotonic() - started < 1.0
    database.frozen.set()


async def test_while_the_database_is_known_down_a_miss_is_refused_at_once_without_a_query(database, outage):
    cache = cache_on(database, outage, name="t-down")
    database.down = True
    with pytest.raises(Unavailable):
        await cache.load("first")  # the attempt that finds it down
    asked = len(database.queries)
    started = time.monotonic()
    for n in range(50):
        with pytest.raises(Unavailable):
            await cache.load(f"key-{n}")
    assert time.monotonic() - started < 0.2  # no wait: the next back-off step is not due
    assert len(database.queries) == asked


async def test_keys_that_miss_together_are_read_in_one_query(database, outage):
    database.rows.update({f"k{n}": f"v{n}" for n in range(20)})
    cache = cache_on(database, outage, name="t-batch")
    database.frozen.clear()  # the first query holds the thread; the others' misses gather meanwhile
    first = asyncio.ensure_future(cache.load("k0"))
    await asyncio.sleep(0.05)
    rest = [asyncio.ensure_future(cache.load(f"k{n}")) for n in range(1, 20)]
    await asyncio.sleep(0.05)
    database.frozen.set()
    assert await asyncio.gather(first, *rest) == [f"v{n}" for n in range(20)]
    assert len(database.queries) == 2 and sorted(database.queries[1]) == sorted(f"k{n}" for n in range(1, 20))


async def test_a_forget_during_a_read_keeps_what_that_read_found_out(database, outage):
    database.rows["k"] = "before the save"
    cache = cache_on(database, outage, name="t-forget")
    database.frozen.clear()
    pending = asyncio.ensure_future(cache.load("k"))
    await asyncio.sleep(0.05)  # the read has begun, with the old row
    database.rows["k"] = "after the save"
    cache.forget("k")
    database.frozen.set()
    await asyncio.sleep(0.1)
    assert pending.done()
    assert await cache.load("k") == "after the save"


async def test_an_idle_cache_drops_its_values_and_queries_no_more(database, outage):
    database.rows["k"] = "v"
    cache = cache_on(database, outage, name="t-idle", every=0.05, idle=0.2)
    assert await cache.load("k") == "v"
    await asyncio.sleep(0.6)
    asked = len(database.queries)
    await asyncio.sleep(0.3)
    assert len(database.queries) == asked  # nothing read: nothing refreshed
    assert cache.get("k") is None and published("t-idle") == float("inf")


def test_an_outage_ends_when_a_user_that_failed_in_it_succeeds_so_the_log_does_not_flap(outage, caplog):
    caplog.set_level(logging.WARNING, logger="tests.caches")
    outage.failed(error=ConnectionError("relation does not exist"), consequence="it waits", by="spool")
    outage.failed(error=ConnectionError("connection refused"), consequence="they are given up", by="touches")
    assert outage.attempt_claimed(by="caches")  # a user that has not failed is never held back
    outage.recovered(by="caches")  # it read what it needed: the spool's writes still fail
    assert outage.failing(by="spool") and not outage.attempt_claimed(by="spool")  # the next step is not due
    time.sleep(0.25)
    assert outage.attempt_claimed(by="spool") and not outage.attempt_claimed(by="spool")  # one per step
    outage.recovered(by="spool")  # the touches, rarer, need not succeed first
    assert not outage.failing(by="touches")
    lines = [r.getMessage() for r in caplog.records if r.name == "tests.caches"]
    assert len(lines) == 2 and "available again" in lines[1], lines


async def test_a_flood_of_unknown_keys_does_not_push_out_the_ones_in_use(database, outage):
    database.rows.update({"known-1": "v1", "known-2": "v2"})
    thread = Refresher(outage=outage, unavailable=lambda exc: isinstance(exc, ConnectionError))
    cache = Refreshed(name="t-flood", fetch=database.fetch, every=60, idle=60, max_entries=10, refresher=thread)
    assert [await cache.load("known-1"), await cache.load("known-2")] == ["v1", "v2"]
    for n in range(50):
        assert await cache.load(f"made-up-{n}") is None
    database.down = True
    assert [await cache.load("known-1"), await cache.load("known-2")] == ["v1", "v2"]  # no read needed


async def test_a_request_that_gives_up_on_a_read_leaves_it_to_the_others_waiting_for_the_same_key(
    database, outage, monkeypatch
):
    database.rows["k"] = "v"
    cache = cache_on(database, outage, name="t-shared")
    database.frozen.clear()
    first = asyncio.ensure_future(cache.load("k"))
    await asyncio.sleep(0.05)
    second = asyncio.ensure_future(cache.load("k"))  # the same read
    await asyncio.sleep(0.05)
    first.cancel()  # its client went away
    await asyncio.sleep(0.05)
    database.frozen.set()
    assert await second == "v"
    assert await cache.load("k") == "v" and len(database.queries) == 1
