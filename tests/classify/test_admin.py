"""Classifiers in the admin (add, change, delete, validation with the API's limits, "try it"), and
classifications stored like evaluations: linked to their classifier, in the audit, on the dashboard.
Runs on SQLite and, with `-m postgres`, PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet

import pytest
from django.urls import reverse

from audit.models import Classifier, ClassifierLabel, Evaluation, EvaluationAnswer
from tests.classify.conftest import SENTIMENT_LABELS
from tests.conftest import README_REQUEST
from tests.database import db
from tests.html import matched

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ADD = "/admin/evaluations/classifier/add/"
CHANGELIST = "/admin/evaluations/classifier/"


def form_data(
    *,
    name: str = "sentiment",
    type: str = "choice",
    labels: list[tuple[str, str]] | None = None,
    instructions: str = "What is the sentiment of this text?",
    existing: Sequence[ClassifierLabel] = (),
    positions: dict[str, int] | None = None,
    delete: AbstractSet[str] = frozenset(),
) -> dict[str, str]:
    """The admin's add/change form with its label inline (`existing` rows first, as the page renders them)."""
    labels = list(SENTIMENT_LABELS) if labels is None else labels
    positions = positions or {}
    data = {
        "name": name,
        "type": type,
        "description": "Review sentiment",
        "instructions": instructions,
        "labels-TOTAL_FORMS": str(len(existing) + len(labels)),
        "labels-INITIAL_FORMS": str(len(existing)),
        "labels-MIN_NUM_FORMS": "0",
        "labels-MAX_NUM_FORMS": "255",
    }
    rows = [(row.pk, row.name, row.description) for row in existing] + [(None, n, d) for n, d in labels]
    for i, (pk, label, description) in enumerate(rows):
        data[f"labels-{i}-name"] = label
        data[f"labels-{i}-description"] = description
        data[f"labels-{i}-position"] = str(positions.get(label, ""))
        if pk is not None:
            data[f"labels-{i}-id"] = str(pk)
            if label in delete:
                data[f"labels-{i}-DELETE"] = "on"
    return data


def errors_of(response) -> str:
    assert response.status_code == 200, "the form was accepted"
    html = response.content.decode()
    return " ".join(
        re.sub(r"<[^>]+>", " ", m) for m in re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', html, re.S)
    )


def labels_of(name: str) -> list[tuple[int | None, str, str]]:
    return [(row.position, row.name, row.description) for row in ClassifierLabel.objects.filter(classifier__name=name)]


def test_add_change_and_delete_a_classifier_in_the_admin(admin_client):
    page = admin_client.get(ADD)
    assert page.status_code == 200 and 'name="labels-TOTAL_FORMS"' in page.content.decode()

    response = admin_client.post(ADD, form_data())
    assert response.status_code == 302, errors_of(response)
    classifier = Classifier.objects.get(name="sentiment")
    assert (classifier.type, classifier.instructions) == ("choice", "What is the sentiment of this text?")
    assert labels_of("sentiment") == [(i + 1, n, d) for i, (n, d) in enumerate(SENTIMENT_LABELS)]

    listed = admin_client.get(CHANGELIST).content.decode()
    assert "sentiment" in listed and "positive, negative, neutral" in listed

    change = reverse("admin:evaluations_classifier_change", args=[classifier.pk])
    page = admin_client.get(change).content.decode()
    assert 'id="oj-try"' in page and reverse("admin:evaluations_classifier_try", args=[classifier.pk]) in page
    # Move "neutral" first, drop "negative", append "mixed" (no position: it goes last).
    existing = list(classifier.labels.all())
    response = admin_client.post(
        change,
        form_data(
            labels=[("mixed", "")], existing=existing, positions={"neutral": 0, "positive": 1}, delete={"negative"}
        ),
    )
    assert response.status_code == 302, errors_of(response)
    assert [(p, n) for p, n, _ in labels_of("sentiment")] == [(1, "neutral"), (2, "positive"), (3, "mixed")]

    delete = reverse("admin:evaluations_classifier_delete", args=[classifier.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    assert not Classifier.objects.exists() and not ClassifierLabel.objects.exists()


def test_the_label_limits_are_the_apis(admin_client, settings):
    assert settings.OPENJEV.max_answers == 255
    one = admin_client.post(ADD, form_data(labels=[("yes", "")]))
    assert "needs 2 to 255 labels, got 1" in errors_of(one)
    too_many = admin_client.post(ADD, form_data(labels=[(f"L{i}", "") for i in range(256)]))
    assert "needs 2 to 255 labels, got 256" in errors_of(too_many)
    assert not Classifier.objects.exists()
    most = admin_client.post(ADD, form_data(labels=[(f"L{i}", "") for i in range(255)]))
    assert most.status_code == 302, errors_of(most)
    assert ClassifierLabel.objects.count() == 255
    two = admin_client.post(ADD, form_data(name="pair", type="score", labels=[("low", ""), ("high", "")]))
    assert two.status_code == 302, errors_of(two)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"labels": [("positive", ""), ("positive", "again")]}, "Label names must be unique; repeated: positive"),
        ({"type": "noul", "labels": [("true", "Spam"), ("maybe", "")]}, "not allowed: maybe"),
        ({"name": "jev-latest"}, "belongs to the language model"),
        ({"name": "my classifier"}, "Letters, digits"),
    ],
)
def test_invalid_definitions_are_refused_with_a_message(admin_client, changes, message):
    response = admin_client.post(ADD, form_data(**changes))
    assert message in errors_of(response)
    assert not Classifier.objects.exists()


def test_duplicate_names_are_refused(admin_client):
    assert admin_client.post(ADD, form_data()).status_code == 302
    assert "Classifier with this Name already exists" in errors_of(admin_client.post(ADD, form_data()))
    assert Classifier.objects.count() == 1


def test_a_noul_classifier_needs_no_label_rows(admin_client):
    response = admin_client.post(ADD, form_data(name="spam", type="noul", labels=[]))
    assert response.status_code == 302, errors_of(response)
    assert "true, false" in admin_client.get(CHANGELIST).content.decode()


def test_try_it_on_the_detail_page_shows_the_distribution_and_is_stored(admin_client, evaluator, fake, store):
    assert admin_client.post(ADD, form_data()).status_code == 302
    classifier = Classifier.objects.get()
    url = reverse("admin:evaluations_classifier_try", args=[classifier.pk])
    page = admin_client.post(url, {"text": "Loved the new café—coffee was great."})
    assert page.status_code == 200
    html = page.content.decode()
    label = matched(r'id="oj-try-label">(\w+)<', html)
    assert label in ("positive", "negative", "neutral")
    table = html[html.index('id="oj-try-result"') :]
    assert all(name in table for name in ("positive", "negative", "neutral", "The text expresses a positive"))
    assert re.search(rf'<tr class="oj-chosen">\s*<td class="oj-key" title="{label}">', table)
    request_id = matched(r"(classify-[0-9a-f]{32})", table)
    from audit.storage.writer import writer_drain

    assert writer_drain(timeout=30)
    row = Evaluation.objects.get(request_id=request_id)
    assert (row.classifier_id, row.api_key_label, row.status_code) == (classifier.pk, "admin", 200)
    assert admin_client.post(url, {"text": ""}).status_code == 200  # an empty form is redisplayed, not run


async def test_classifications_are_stored_linked_to_their_classifier(api, fake, store, admin_client):
    await db(lambda: admin_client.post(ADD, form_data()))
    classifier = await db(lambda: Classifier.objects.get())
    texts = ["Loved it!", "Hated it."]
    response = await api.post("/v1/classify", json={"model": "sentiment", "input": texts})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (await api.post("/v1/classify", json={"model": "nope", "input": "x"})).status_code == 404
    assert (await api.post("/v1/classify", json={"model": "sentiment"})).status_code == 400
    assert (await api.post("/v1/classify", json={"input": "no model"})).status_code == 400
    systemone = await api.post("/v1/systemone", json=README_REQUEST)
    assert systemone.status_code == 200
    from tests.stored import drained

    await drained()

    rows = await db(lambda: list(Evaluation.objects.exclude(classifier_name="").order_by("id")))
    assert [(r.status_code, r.classifier_name, r.classifier_id) for r in rows] == [
        (200, "sentiment", classifier.pk),
        (404, "nope", None),
        (400, "sentiment", None),
        (400, "(invalid)", None),
    ]
    row = rows[0]
    assert row.request_id == body["id"] == response.headers["x-typesafe-request-id"]
    assert row.requested_model == "sentiment" and row.served_model == response.headers["x-openjev-model"]
    assert row.state == texts and row.question_count == 2 and row.question_types == "choice"
    assert row.questions == {
        "sentiment": {
            "type": "choice",
            "instructions": "What is the sentiment of this text?",
            "criteria": dict(SENTIMENT_LABELS),
        }
    }
    assert row.input_tokens == body["usage"]["prompt_tokens"] and row.output_tokens == 4
    assert rows[1].error_type == "not_found" and rows[2].error_type == "invalid_request"
    assert rows[3].state == "no model" and rows[3].question_count == 1  # still reads as a classification
    answers = await db(lambda: list(EvaluationAnswer.objects.filter(evaluation=row).order_by("position")))
    for answer, item in zip(answers, body["data"], strict=True):
        assert (answer.position, answer.question_id, answer.type) == (item["index"], "sentiment", "choice")
        assert answer.choice == item["label"]
        assert answer.option_keys == ["positive", "negative", "neutral"]
        assert [answer.probabilities[k] for k in answer.option_keys] == item["probs"]

    # The audit shows the classifier and each answer's input; the dashboard counts classifications.
    page = await db(lambda: admin_client.get(reverse("admin:evaluations_evaluation_change", args=[row.pk])))
    html = page.content.decode()
    assert reverse("admin:evaluations_classifier_change", args=[classifier.pk]) in html
    assert "input: “Loved it!”" in html and "input: “Hated it.”" in html
    listed = (await db(lambda: admin_client.get("/admin/evaluations/evaluation/?classifier=sentiment"))).content
    assert body["id"].encode() in listed
    listed = (await db(lambda: admin_client.get("/admin/evaluations/evaluation/?classifier=-"))).content
    assert systemone.headers["x-typesafe-request-id"].encode() in listed and body["id"].encode() not in listed
    dashboard = (await db(lambda: admin_client.get("/admin/evaluations/evaluation/dashboard/"))).content.decode()
    day = dashboard[dashboard.index("Last 24 hours") : dashboard.index("Last 7 days")]
    assert re.search(r'classifications</div><div class="oj-value">4<', day)
    assert re.search(r'evaluations</div><div class="oj-value">5<', day)
    assert re.search(r"\?classifier=sentiment\">sentiment</a></td><td class=\"oj-num\">2<", day)

    # Deleting the classifier keeps its classifications, by name.
    await db(lambda: Classifier.objects.filter(pk=classifier.pk).delete())
    kept = await db(lambda: Evaluation.objects.get(pk=row.pk))
    assert (kept.classifier_id, kept.classifier_name) == (None, "sentiment")


async def test_metadata_level_keeps_no_input_text(api, fake, store, admin_client):
    store("metadata")
    await db(lambda: admin_client.post(ADD, form_data()))
    response = await api.post("/v1/classify", json={"model": "sentiment", "input": "My secret diary entry"})
    assert response.status_code == 200
    from tests.stored import drained

    await drained()
    row = await db(lambda: Evaluation.objects.get())
    assert row.state is None and row.questions is None and row.question_count == 1
    assert await db(lambda: EvaluationAnswer.objects.filter(evaluation=row).count()) == 1


async def test_changes_in_the_admin_are_served_at_once(api, fake, admin_client):
    await db(lambda: admin_client.post(ADD, form_data()))
    first = (await api.post("/v1/classify", json={"model": "sentiment", "input": "ok"})).json()
    assert first["data"][0]["num_classes"] == 3
    classifier = await db(lambda: Classifier.objects.get())
    existing = await db(lambda: list(classifier.labels.all()))
    change = reverse("admin:evaluations_classifier_change", args=[classifier.pk])
    response = await db(lambda: admin_client.post(change, form_data(labels=[("mixed", "Both")], existing=existing)))
    assert response.status_code == 302
    second = (await api.post("/v1/classify", json={"model": "sentiment", "input": "ok"})).json()
    assert second["data"][0]["num_classes"] == 4
    models = (await api.get("/v1/models")).json()
    assert "sentiment" in [d["id"] for d in models["data"]]
    await db(
        lambda: admin_client.post(reverse("admin:evaluations_classifier_delete", args=[classifier.pk]), {"post": "yes"})
    )
    gone = await api.post("/v1/classify", json={"model": "sentiment", "input": "ok"})
    assert gone.status_code == 404
