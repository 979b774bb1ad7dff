"""The admin pages as HTML: evaluation audit (read-only, search, filters, per-question table),
the dashboard, and the API key issue/revoke flow. Runs on SQLite and, with `-m postgres`, PostgreSQL."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from audit.keys import apikey_hash, apikey_issue
from audit.models import ApiKey, Evaluation
from tests.factories import LABEL_MASS, evaluation_make, outcome_make
from tests.html import matched

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CHANGELIST = "/admin/evaluations/evaluation/"


def rows_in(html: str) -> set[str]:
    return set(re.findall(r"req_test\w+", html))


def test_evaluation_pages_need_a_staff_login(client):
    for url in (CHANGELIST, CHANGELIST + "dashboard/", "/admin/evaluations/apikey/add/"):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_changelist_lists_searches_and_filters(admin_client):
    key = apikey_issue(name="support bot", owner="team-a")
    ok = evaluation_make(key_label=key.label)
    overloaded = evaluation_make(status=529)
    invalid = evaluation_make(status=422, data={"model": "x", "state": "s", "questions": {"q": {"type": "score"}}})
    old = evaluation_make(created_at=timezone.now() - timedelta(days=400))

    page = admin_client.get(CHANGELIST)
    assert page.status_code == 200
    html = page.content.decode()
    assert rows_in(html) == {ok, overloaded, invalid, old}
    assert "support bot (oj_" in html and "Dashboard" in html
    assert 'href="/admin/evaluations/evaluation/add/"' not in html  # read-only: no add button

    def listed(query: str) -> set[str]:
        response = admin_client.get(CHANGELIST + query)
        assert response.status_code == 200, query
        return rows_in(response.content.decode())

    assert listed(f"?q={ok}") == {ok}
    assert listed(f"?q={ok[:12]}") >= {ok}
    assert listed(f"?q={key.label}") == {ok}
    assert listed("?q=support+bot") == {ok}
    assert listed("?status_code__exact=529") == {overloaded}
    assert listed("?question_type=score") == {ok, overloaded, old, invalid}
    assert listed("?question_type=choice") == {ok, overloaded, old}
    assert listed(f"?api_key_label={key.label}") == {ok}
    assert listed("?served_model=Qwen%2FQwen3.6-35B-A3B") == {ok, overloaded, invalid, old}
    assert listed("?backend=sglang&store_level=full") == {ok, overloaded, invalid, old}
    assert listed(f"?created_at__year={old_year(old)}") >= {old}
    week_ago = (timezone.now() - timedelta(days=7)).isoformat().replace("+", "%2B")
    assert listed(f"?created_at__gte={week_ago}") == {ok, overloaded, invalid}


def old_year(request_id: str) -> int:
    return Evaluation.objects.get(request_id=request_id).created_at.year


def test_detail_page_is_read_only_with_pretty_json_and_a_per_question_table(admin_client):
    outcome = outcome_make(team={"Billing": 0.25, "Technical": 0.6, "Sales": 0.15})
    request_id = evaluation_make(outcome=outcome)
    evaluation = Evaluation.objects.get(request_id=request_id)
    page = admin_client.get(reverse("admin:evaluations_evaluation_change", args=[evaluation.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert request_id in html and 'name="_save"' not in html  # view only, nothing to submit
    assert 'class="oj-json"' in html and "&quot;Billing&quot;: &quot;Payments, invoices, refunds&quot;" in html
    assert 'class="oj-answers"' in html
    table = html[html.index('class="oj-answers"') :]
    for text in (
        "refund",
        "team",
        "anger",
        "Technical",
        "0.6000",
        "Payments, invoices, refunds",
        "Very angry",
        "P(true) = 0.8000",
        f"{outcome.answers[1].confidence:.3f}",
        f"{LABEL_MASS:.3f}",
    ):
        assert text in table, text
    assert re.search(r'<tr class="oj-chosen">\s*<td class="oj-key" title="Technical">', table)
    for url in (
        reverse("admin:evaluations_evaluation_add"),
        reverse("admin:evaluations_evaluation_delete", args=[evaluation.pk]),
    ):
        assert admin_client.get(url).status_code == 403
    assert (
        admin_client.post(
            reverse("admin:evaluations_evaluation_change", args=[evaluation.pk]), {"status_code": 200}
        ).status_code
        == 403
    )


def test_a_failed_evaluation_shows_its_error(admin_client):
    request_id = evaluation_make(status=502, error_message="the backend answered 500")
    page = admin_client.get(
        reverse("admin:evaluations_evaluation_change", args=[Evaluation.objects.get(request_id=request_id).pk])
    )
    html = page.content.decode()
    assert "the backend answered 500" in html and "no answers (the evaluation failed)" in html


def test_dashboard_shows_counts_error_rate_and_latency_percentiles(admin_client):
    for ms in (10.0, 20.0, 30.0, 40.0):
        evaluation_make(total_ms=ms)
    evaluation_make(status=529)
    evaluation_make(created_at=timezone.now() - timedelta(days=3), total_ms=1000.0)
    page = admin_client.get(CHANGELIST + "dashboard/")
    assert page.status_code == 200
    html = page.content.decode()
    day = html[html.index("Last 24 hours") : html.index("Last 7 days")]
    week = html[html.index("Last 7 days") :]
    assert re.search(r'evaluations</div><div class="oj-value">5<', day)
    assert re.search(r'error rate</div><div class="oj-value">20.0%<', day)
    assert re.search(r'latency p50</div><div class="oj-value">20.0 ms<', day)
    assert re.search(r'latency p99</div><div class="oj-value">40.0 ms<', day)
    assert re.search(r'evaluations</div><div class="oj-value">6<', week)
    assert re.search(r'latency p99</div><div class="oj-value">1000.0 ms<', week)


def test_issuing_a_key_in_the_admin_shows_the_secret_once_and_stores_only_its_hash(admin_client):
    response = admin_client.post(
        "/admin/evaluations/apikey/add/",
        {"name": "billing service", "owner": "payments team", "expires_at_0": "", "expires_at_1": ""},
    )
    assert response.status_code == 200, response.content.decode()[:2000]
    assert "no-store" in response["Cache-Control"]
    html = response.content.decode()
    secret = matched(r'id="oj-secret">(oj_[a-z0-9]{8}_[A-Za-z0-9]{40})<', html)
    key = ApiKey.objects.get()
    assert (key.name, key.owner, key.label) == ("billing service", "payments team", secret[:11])
    assert key.secret_hash == apikey_hash(secret=secret)
    for field in ApiKey._meta.concrete_fields:
        assert secret not in str(getattr(key, field.attname))
    for url in ("/admin/evaluations/apikey/", reverse("admin:evaluations_apikey_change", args=[key.pk])):
        page = admin_client.get(url).content.decode()
        assert secret not in page and secret[:11] in page  # only the prefix is ever shown again


def test_revoking_keys_with_the_admin_action(admin_client):
    keep = apikey_issue(name="keep")
    drop = apikey_issue(name="drop")
    response = admin_client.post(
        "/admin/evaluations/apikey/", {"action": "revoke_selected", "_selected_action": [drop.id]}, follow=True
    )
    assert response.status_code == 200 and "Revoked 1 API key" in response.content.decode()
    assert ApiKey.objects.get(pk=drop.id).revoked_at is not None
    assert ApiKey.objects.get(pk=keep.id).revoked_at is None
    listed = admin_client.get("/admin/evaluations/apikey/?status=revoked").content.decode()
    assert "drop" in listed and ">keep<" not in listed
    change = admin_client.get(reverse("admin:evaluations_apikey_change", args=[drop.id])).content.decode()
    assert "revoked" in change and 'name="name"' not in change  # a revoked key is no longer editable


def test_label_mass_is_listed_per_evaluation_and_on_the_dashboard(admin_client):
    evaluation_make()
    listing = admin_client.get(reverse("admin:evaluations_evaluation_changelist")).content.decode()
    assert "Label mass" in listing and f"{LABEL_MASS:.3f}" in listing
    dashboard = admin_client.get(reverse("admin:evaluations_evaluation_dashboard")).content.decode()
    assert "label mass p50" in dashboard and f"{LABEL_MASS:.3f}" in dashboard
    assert "answers with label mass &lt; 0.5" in dashboard and "0.0 %" in dashboard
