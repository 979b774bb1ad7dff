"""Usage per API key per day: counted by the storage writer at every storage level, only for answered
evaluations, added up across batches; exported by `manage.py usage`; one key's page in the admin."""

from __future__ import annotations

import io
import json
import uuid
from dataclasses import replace
from datetime import UTC, date, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from api.decisions.openapi_examples import DECISIONS_REQUEST
from audit.keys import apikey_issue
from audit.models import KeyUsage
from tests.conftest import README_REQUEST
from tests.database import db
from tests.stored import drained

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def today() -> date:
    return timezone.now().astimezone(UTC).date()


async def test_answered_evaluations_are_counted_per_key_and_day_at_every_storage_level(api, fake, store, settings):
    settings.OPENJEV = replace(settings.OPENJEV, require_api_key=True)
    issued = await db(lambda: apikey_issue(name=f"usage-{uuid.uuid4().hex[:8]}"))
    headers = {"Authorization": f"Bearer {issued.secret}"}
    answered = [
        await api.post("/v1/systemone", json=README_REQUEST, headers=headers),
        await api.post("/v1/decisions", json=DECISIONS_REQUEST, headers=headers),
    ]
    refused = await api.post("/v1/systemone", json={**README_REQUEST, "questions": {}}, headers=headers)
    store("off")
    answered.append(await api.post("/v1/systemone", json=README_REQUEST, headers=headers))
    await drained()
    assert [r.status_code for r in answered] == [200, 200, 200] and refused.status_code == 422

    row = await db(lambda: KeyUsage.objects.get(key_label=issued.label, day=today()))
    assert (row.evaluations, row.questions) == (3, 9)
    assert row.input_tokens == sum(r.json()["usage"]["input_tokens"] for r in answered)
    assert row.cached_tokens == sum(int(r.headers["x-openjev-cached-tokens"]) for r in answered)


async def test_usage_is_exported_as_json_by_the_command(api, fake, store):
    await api.post("/v1/systemone", json=README_REQUEST)
    await drained()

    def exported(*args: str) -> list[dict]:
        out = io.StringIO()
        call_command("usage", *args, stdout=out)
        return list(json.loads(out.getvalue()))

    rows = await db(lambda: exported("--since", (today() - timedelta(days=1)).isoformat(), "--json", "--key", ""))
    assert [(r["key"], r["day"], r["evaluations"], r["questions"]) for r in rows] == [("", today().isoformat(), 1, 3)]
    assert await db(lambda: exported("--since", (today() + timedelta(days=1)).isoformat(), "--json")) == []
    with pytest.raises(CommandError, match="not a date"):
        await db(lambda: exported("--since", "last week"))


async def test_a_keys_usage_page_shows_the_last_30_days(api, fake, store, settings, admin_client):
    settings.OPENJEV = replace(settings.OPENJEV, require_api_key=True)
    issued = await db(lambda: apikey_issue(name=f"page-{uuid.uuid4().hex[:8]}"))
    await api.post("/v1/systemone", json=README_REQUEST, headers={"Authorization": f"Bearer {issued.secret}"})
    await drained()
    page = await db(lambda: admin_client.get(f"/admin/evaluations/apikey/{issued.id}/usage/"))
    assert page.status_code == 200
    text = page.content.decode()
    chart = json.loads(text.split('id="oj-usage-data" type="application/json">')[1].split("</script>")[0])
    assert len(chart["days"]) == 30 and chart["days"][-1] == today().isoformat()
    assert chart["evaluations"][-1] == 1 and sum(chart["evaluations"]) == 1 and chart["input_tokens"][-1] > 0
    assert "openjev/usage.js" in text
    listing = await db(lambda: admin_client.get("/admin/evaluations/keyusage/"))
    assert listing.status_code == 200 and issued.label in listing.content.decode()
