"""A classifier defined and tried in a real browser: headless Chromium (Debian's package) on the app under
uvicorn adds a sentiment classifier through the admin form, tries it on its detail page (through the ASGI
server, as in production), and classifies with it over HTTP; screenshots go to `test-artifacts/`."""

from __future__ import annotations

import httpx
import pytest
from django.contrib.auth import get_user_model

from audit.models import Classifier, Evaluation
from audit.storage.writer import writer_drain
from tests.browser import ADMIN_PASSWORD, chromium_page, shot, signed_in
from tests.classify.conftest import SENTIMENT_LABELS
from tests.database import orm

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_define_and_try_a_classifier_in_headless_chromium(asgi_server, fake, store, tmp_path):
    get_user_model().objects.create_superuser("admin", "admin@example.com", ADMIN_PASSWORD)
    base = asgi_server.url
    with chromium_page(tmp_path / "chromium-profile") as page:
        signed_in(page, base=base, then="/admin/evaluations/classifier/add/")
        page.fill("#id_name", "sentiment")
        page.fill("#id_instructions", "What is the sentiment of this text?")
        for i, (name, description) in enumerate(SENTIMENT_LABELS):
            page.fill(f"#id_labels-{i}-name", name)
            page.fill(f"#id_labels-{i}-description", description)
        shot(page, "classifier-add")
        page.click("input[name=_continue]")
        page.wait_for_url("**/change/")
        classifier = orm(lambda: Classifier.objects.get(name="sentiment"))
        assert orm(lambda: list(classifier.labels.values_list("position", "name"))) == [
            (1, "positive"),
            (2, "negative"),
            (3, "neutral"),
        ]

        page.fill("#oj-try textarea", "Loved the new café—coffee was great.")
        page.click("#oj-try input[type=submit]")
        page.wait_for_url("**/try/")
        label = page.locator("#oj-try-label").inner_text()
        assert label in ("positive", "negative", "neutral")
        assert page.locator("#oj-try-result table.oj-probs tr").count() == 3
        assert page.locator("#oj-try-result tr.oj-chosen .oj-key").inner_text() == label
        shot(page, "classifier-try")
        assert page.errors == []

    response = httpx.post(
        f"{base}/v1/classify", json={"model": "sentiment", "input": "Loved the new café—coffee was great."}
    )
    assert response.status_code == 200 and response.json()["data"][0]["label"] == label
    assert writer_drain(timeout=30)
    assert sorted(orm(lambda: list(Evaluation.objects.values_list("api_key_label", "classifier_name")))) == [
        ("", "sentiment"),
        ("admin", "sentiment"),
    ]
