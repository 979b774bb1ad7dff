"""What storage keeps of images: metadata at every level, never the bytes. Runs on SQLite and, with
`-m postgres`, PostgreSQL."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import replace

import pytest

from audit.models import Evaluation
from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from testbed.images import png_bytes
from tests.database import db
from tests.stored import drained

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
PNG = png_bytes(width=8, height=8)
B64 = base64.b64encode(PNG).decode()


@pytest.mark.parametrize("level", ["full", "metadata"])
async def test_image_metadata_is_stored_at_every_level_and_the_bytes_never(
    api, fake, store, settings, level, admin_client
):
    store(level)
    settings.OPENJEV = replace(settings.OPENJEV, max_images=2)
    evaluator_install(fake_evaluator(fake, max_images=2))
    state = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/x.jpg"}},
            ],
        }
    ]
    response = await api.post(
        "/v1/systemone", json={"model": "jev-latest", "state": state, "questions": {"q": {"type": "noul"}}}
    )
    assert response.status_code == 200, response.text
    await drained()
    row = await db(lambda: Evaluation.objects.get(request_id=response.headers["x-typesafe-request-id"]))
    assert row.image_count == 2
    assert row.images == [
        {"source": "data", "format": "png", "size": len(PNG), "sha256": hashlib.sha256(PNG).hexdigest()},
        {"source": "url", "format": None, "size": None, "sha256": None},
    ]
    stored = await db(lambda: Evaluation.objects.filter(pk=row.pk).values_list("state", flat=True).get())
    assert B64[:40] not in str(stored)
    if level == "full":
        assert row.state is not None
        url = row.state[0]["content"][0]["image_url"]["url"]
        assert url == f"data:image/png;base64,[{len(B64)} characters not stored]"
    page = await db(lambda: admin_client.get(f"/admin/evaluations/evaluation/{row.pk}/change/"))
    assert hashlib.sha256(PNG).hexdigest() in page.content.decode() and B64[:40] not in page.content.decode()
