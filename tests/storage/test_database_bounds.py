"""No wait on the database without a bound (`openjev_site.databases`, `audit.database`): connecting to a PostgreSQL
that accepts and never answers ends after `connect_timeout`; the service's own threads' statements end after
`OPENJEV_DATABASE_TIMEOUT` while the admin's and the commands' do not; a SQLite write waits for the lock at most
the busy timeout. Each test connects to the database it is about (PostgreSQL: `make test`'s server; SQLite: a
file of its own), whichever database the pass runs on."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import psycopg
import pytest
from django.db import OperationalError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.postgresql.base import DatabaseWrapper as PostgresWrapper
from django.db.backends.sqlite3.base import DatabaseWrapper as SqliteWrapper

from audit.database import database_thread_bounded
from openjev_site.databases import connect_timeout_seconds, databases_config

pytestmark = pytest.mark.postgres


def test_postgresql_connects_and_notices_a_silent_peer_within_the_timeout():
    options = databases_config(url="postgresql://u@db:5432/openjev", timeout=5.0)["default"]["OPTIONS"]
    assert options["connect_timeout"] == 2  # a third of 5 s, libpq's least
    assert options["tcp_user_timeout"] == 5000 and options["keepalives"] == 1
    assert "options" not in options  # no statement bound for the admin and migrations (see audit.database)
    assert connect_timeout_seconds(timeout=30.0) == 10
    sqlite = databases_config(url="sqlite:////srv/openjev/db.sqlite3", timeout=5.0)["default"]
    assert sqlite["OPTIONS"]["timeout"] == 5.0  # the busy timeout
    assert sqlite["TEST"]["NAME"] == "/srv/openjev/test-db.sqlite3"


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP server that accepts connections and never says a word (a PostgreSQL frozen by a stopped proxy)."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for held in accepted:
        held.close()
    listener.close()


def test_connecting_to_a_postgresql_that_never_answers_fails_after_the_connect_timeout(silent_server):
    settings_dict = {
        **databases_config(url=f"postgresql://u@127.0.0.1:{silent_server}/openjev", timeout=5.0)["default"],
        "TIME_ZONE": None,
    }
    wrapper = PostgresWrapper(settings_dict, alias="silent")
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError, match="timeout"):
        wrapper.get_new_connection(wrapper.get_connection_params())  # what ensure_connection opens, with these
    assert time.monotonic() - started < 3.5  # connect_timeout 2 s, not libpq's default of forever


POSTGRES_URL = os.environ.get("OPENJEV_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
"""The PostgreSQL `make test` runs its database tests on: the PostgreSQL test below uses it whichever database the
pass runs on, as the SQLite one uses a file of its own, so each runs in both passes and neither is skipped."""


def _wrapper(*, url: str, timeout: float, alias: str) -> BaseDatabaseWrapper:
    """A connection of its own to `url`, configured as the service configures its database."""
    settings_dict = {
        **databases_config(url=url, timeout=timeout)["default"],
        "TIME_ZONE": None,
        "AUTOCOMMIT": True,
        "ATOMIC_REQUESTS": False,
    }
    backend = PostgresWrapper if settings_dict["ENGINE"].endswith("postgresql") else SqliteWrapper
    return backend(settings_dict, alias=alias)


@pytest.mark.django_db  # lets any connection open (pytest-django blocks them all otherwise), not only the default
def test_on_postgresql_the_services_threads_statements_end_after_the_timeout_and_others_do_not(settings):
    settings.OPENJEV = replace(settings.OPENJEV, database_timeout=0.5)
    found: dict[str, object] = {}

    def bounded() -> None:
        database_thread_bounded()
        wrapper = _wrapper(url=POSTGRES_URL, timeout=5.0, alias="bounded")
        try:
            with wrapper.cursor() as cursor:
                started = time.monotonic()
                try:
                    cursor.execute("SELECT pg_sleep(5)")
                except OperationalError as exc:
                    found["error"] = exc
                found["seconds"] = time.monotonic() - started
        finally:
            wrapper.close()

    def unbounded() -> None:
        wrapper = _wrapper(url=POSTGRES_URL, timeout=5.0, alias="admin")
        try:
            with wrapper.cursor() as cursor:
                cursor.execute("SHOW statement_timeout")
                found["admin"] = cursor.fetchone()[0]
        finally:
            wrapper.close()

    for target in (bounded, unbounded):
        thread = threading.Thread(target=target)
        thread.start()
        thread.join(10)
    assert isinstance(found["error"], OperationalError) and float(found["seconds"]) < 2  # type: ignore[arg-type]
    assert found["admin"] == "0"


@pytest.mark.django_db
def test_on_sqlite_a_write_waits_for_the_lock_at_most_the_busy_timeout(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    holding, release = threading.Event(), threading.Event()

    def hold_the_write_lock() -> None:
        holder = _wrapper(url=url, timeout=5.0, alias="holder")
        try:
            with holder.cursor() as cursor:
                cursor.execute("BEGIN IMMEDIATE")
                holding.set()
                release.wait(30)
                cursor.execute("ROLLBACK")
        finally:
            holder.close()

    holder = threading.Thread(target=hold_the_write_lock)
    holder.start()
    assert holding.wait(10)
    writer = _wrapper(url=url, timeout=0.5, alias="busy")
    started = time.monotonic()
    try:
        with pytest.raises(OperationalError, match="locked"), writer.cursor() as cursor:
            cursor.execute("BEGIN IMMEDIATE")
        assert 0.4 < time.monotonic() - started < 3
    finally:
        writer.close()
        release.set()
        holder.join(10)
