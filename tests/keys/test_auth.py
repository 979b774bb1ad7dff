"""Bearer authentication with the env key and issued keys (SPEC section 6), and the key recorded on
each stored evaluation; while the database is down or frozen, a known key is served and an unknown one is a 503
within a short bound. Runs on SQLite and, with `-m postgres`, PostgreSQL."""

from __future__ import annotations

import io
import threading
import time
from dataclasses import replace
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import OperationalError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from audit import keys
from audit.keys import apikey_hash, apikey_issue, apikey_revoke
from audit.models import ApiKey, Evaluation
from serving.refreshed import REQUEST_WAIT_SECONDS
from tests.conftest import README_REQUEST
from tests.database import db
from tests.stored import drained

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def auth(settings):
    """auth(api_key=..., required=...) switches authentication for this test."""

    def switch(*, api_key: str | None = None, required: bool = False) -> None:
        settings.OPENJEV = replace(settings.OPENJEV, api_key=api_key, require_api_key=required)

    return switch


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def assert_401(response) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["detail"]["error_type"] == "authentication_error"


async def stored_labels() -> list[tuple[str, int | None]]:
    return await db(lambda: list(Evaluation.objects.order_by("id").values_list("api_key_label", "api_key_id")))


async def test_auth_off_accepts_any_bearer_and_records_no_key(api, fake, store, auth):
    auth()
    for headers in ({}, bearer("anything-at-all"), bearer("oj_aaaaaaaa_" + "x" * 40), {"Authorization": "Basic xyz"}):
        assert (await api.post("/v1/systemone", json=README_REQUEST, headers=headers)).status_code == 200
    await drained()
    assert await stored_labels() == [("", None)] * 4


async def test_env_key_is_accepted_and_recorded_as_env(api, fake, store, auth):
    auth(api_key="s3cret-env-key")
    assert_401(await api.post("/v1/systemone", json=README_REQUEST))
    assert_401(await api.post("/v1/systemone", json=README_REQUEST, headers=bearer("s3cret-env-kez")))
    response = await api.post("/v1/systemone", json=README_REQUEST, headers=bearer("s3cret-env-key"))
    assert response.status_code == 200
    await drained()
    assert await stored_labels() == [("env", None)]  # 401s never reach the evaluation


async def test_an_issued_key_is_accepted_recorded_and_marked_used(api, fake, store, auth):
    auth(required=True)
    issued = await db(lambda: apikey_issue(name="support bot", owner="team-a"))
    assert issued.secret.startswith(f"{issued.label}_") and len(issued.secret) == 3 + 8 + 1 + 40
    row = await db(lambda: ApiKey.objects.get(pk=issued.id))
    assert row.secret_hash == apikey_hash(secret=issued.secret) and issued.secret not in repr(vars(row))
    assert row.last_used_at is None

    response = await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(issued.secret))
    assert response.status_code == 200
    await drained()
    assert await stored_labels() == [(issued.label, issued.id)]
    used = (await db(lambda: ApiKey.objects.get(pk=issued.id))).last_used_at
    assert used is not None and abs((timezone.now() - used).total_seconds()) < 30

    # last-used is written at most once a minute: a second call within the minute changes nothing.
    assert (await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(issued.secret))).status_code == 200
    await drained()
    assert (await db(lambda: ApiKey.objects.get(pk=issued.id))).last_used_at == used


async def test_issued_keys_work_beside_the_env_key(api, fake, store, auth):
    auth(api_key="env-key")
    issued = await db(lambda: apikey_issue(name="second"))
    assert (await api.post("/v1/systemone", json=README_REQUEST, headers=bearer("env-key"))).status_code == 200
    assert (await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(issued.secret))).status_code == 200
    await drained()
    assert [label for label, _ in await stored_labels()] == ["env", issued.label]


async def test_a_revoked_key_is_refused_at_once(api, fake, store, auth):
    auth(required=True)
    issued = await db(lambda: apikey_issue(name="to revoke"))
    assert (await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(issued.secret))).status_code == 200
    assert await db(lambda: apikey_revoke(ids=[issued.id])) == 1  # the cached row is forgotten too
    assert_401(await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(issued.secret)))


async def test_an_expired_key_is_refused(api, fake, store, auth):
    auth(required=True)
    issued = await db(lambda: apikey_issue(name="old", expires_at=timezone.now() + timedelta(days=1)))
    assert (await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(issued.secret))).status_code == 200
    await db(lambda: ApiKey.objects.filter(pk=issued.id).update(expires_at=timezone.now() - timedelta(seconds=1)))
    keys.apikey_cache_forget()  # update() bypasses save(); other processes would see it within KEY_CACHE_SECONDS
    assert_401(await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(issued.secret)))
    expired = await db(lambda: apikey_issue(name="born expired", expires_at=timezone.now() - timedelta(days=1)))
    assert_401(await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(expired.secret)))


async def test_wrong_and_missing_keys_are_refused(api, fake, store, auth):
    auth(required=True)
    issued = await db(lambda: apikey_issue(name="real"))
    wrong_secret = issued.secret[:-1] + ("A" if issued.secret[-1] != "A" else "B")
    unknown_prefix = "oj_zzzzzzzz_" + issued.secret.rsplit("_", 1)[1]
    for headers in (
        {},
        {"Authorization": "Bearer"},
        {"Authorization": f"Basic {issued.secret}"},
        bearer(wrong_secret),
        bearer(unknown_prefix),
        bearer("not-a-key"),
        bearer(issued.label),
    ):
        assert_401(await api.post("/v1/systemone", json=README_REQUEST, headers=headers))
    assert fake.generate_calls == 0
    await drained()
    assert await db(lambda: Evaluation.objects.count()) == 0


async def test_health_endpoints_need_no_key(api, fake, auth):
    auth(api_key="k", required=True)
    assert (await api.get("/health/live")).status_code == 200
    assert (await api.get("/health")).status_code == 200


async def test_key_rows_are_cached_so_the_hot_path_skips_the_database(api, fake, store, auth, monkeypatch):
    auth(required=True)
    issued = await db(lambda: apikey_issue(name="cached"))
    lookups = []
    real_fetch = keys._rows_fetch

    def counting_fetch(prefixes):
        lookups.append(prefixes)
        return real_fetch(prefixes)

    monkeypatch.setattr(keys, "_rows_fetch", counting_fetch)
    for _ in range(3):
        assert (await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(issued.secret))).status_code == 200
    assert lookups == [[issued.label[3:]]]


async def test_a_database_outage_during_key_lookup_is_a_retryable_503_not_a_401(api, fake, auth, monkeypatch):
    auth(required=True)
    issued = await db(lambda: apikey_issue(name="outage"))

    def refuse(self, *args, **kwargs):
        raise OperationalError("connection refused (simulated outage)")

    monkeypatch.setattr(BaseDatabaseWrapper, "ensure_connection", refuse)
    response = await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(issued.secret))
    monkeypatch.undo()
    assert response.status_code == 503 and response.headers["retry-after"]
    assert fake.generate_calls == 0


async def test_the_issue_command_prints_a_working_key_once(api, fake, store, auth):
    auth(required=True)
    out, err = io.StringIO(), io.StringIO()
    await db(
        lambda: call_command(
            "issue_api_key", "ci runner", "--owner", "ops", "--expires-in-days", "30", stdout=out, stderr=err
        )
    )
    secret = out.getvalue().strip()
    assert secret.startswith("oj_") and "\n" not in secret and secret not in err.getvalue()
    key = await db(lambda: ApiKey.objects.get())
    assert (key.name, key.owner) == ("ci runner", "ops") and key.expires_at is not None
    assert key.expires_at > timezone.now() + timedelta(days=29)
    assert (await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(secret))).status_code == 200


def database_down(monkeypatch) -> None:
    """Every new connection is refused (the server is gone); what a thread already holds is closed."""

    def refuse(self, *args, **kwargs):
        raise OperationalError("connection refused (simulated outage)")

    monkeypatch.setattr(BaseDatabaseWrapper, "ensure_connection", refuse)


async def test_while_the_database_is_down_a_known_key_is_served_and_an_unknown_one_is_a_503_at_once(
    api, fake, store, auth, monkeypatch, caplog
):
    auth(required=True)
    known = await db(lambda: apikey_issue(name="known"))
    unknown = await db(lambda: apikey_issue(name="never used here"))
    assert (await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(known.secret))).status_code == 200

    with monkeypatch.context() as outage:
        database_down(outage)
        first = await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(unknown.secret))
        assert first.status_code == 503 and first.headers["retry-after"]  # the read that finds it down
        started = time.monotonic()
        refused = [
            await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(unknown.secret)) for _ in range(5)
        ]
        assert [r.status_code for r in refused] == [503] * 5
        assert time.monotonic() - started < 1.0  # no wait: the next back-off step is not due
        served = [await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(known.secret)) for _ in range(5)]
        assert [r.status_code for r in served] == [200] * 5  # the row read before the outage
        health = (await api.get("/health", headers=bearer(known.secret))).json()
        assert health["caches"]["api_keys"] >= 0
    await drained()
    assert await db(lambda: Evaluation.objects.filter(api_key_id=known.id).count()) == 6  # spooled, then stored
    warnings = [
        r.getMessage() for r in caplog.records if r.name == "audit.database" and "unavailable" in r.getMessage()
    ]
    assert len(warnings) == 1, warnings  # one per outage, whoever found it down first


async def test_an_unknown_key_on_a_frozen_database_is_a_503_within_the_bound(api, fake, auth, monkeypatch):
    auth(required=True)
    issued = await db(lambda: apikey_issue(name="frozen"))
    thaw = threading.Event()
    real_fetch = keys._rows_fetch

    def frozen(prefixes):
        thaw.wait(30)  # a database that accepted the query and never answers
        return real_fetch(prefixes)

    monkeypatch.setattr(keys, "_rows_fetch", frozen)
    started = time.monotonic()
    try:
        response = await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(issued.secret))
    finally:
        thaw.set()
    assert response.status_code == 503 and response.headers["retry-after"]
    assert time.monotonic() - started < REQUEST_WAIT_SECONDS + 1.0
    assert fake.generate_calls == 0
