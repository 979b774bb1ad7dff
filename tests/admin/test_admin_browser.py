"""The admin in a real browser: headless Chromium (Debian's package, never a downloaded one) drives the
changelist, an evaluation's detail page, the dashboard, the key issue flow and the sign-in lockout on the
app served by uvicorn, and saves a screenshot of each under `test-artifacts/`."""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest
from django.contrib.auth import get_user_model

from audit.keys import apikey_issue
from audit.models import ApiKey, Evaluation
from audit.storage.writer import writer_drain
from tests.browser import ADMIN_PASSWORD, chromium_page, shot, sign_in_attempt, signed_in
from tests.conftest import README_REQUEST
from tests.database import orm

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_admin_pages_render_in_headless_chromium(asgi_server, fake, store, settings, tmp_path):
    get_user_model().objects.create_superuser("admin", "admin@example.com", ADMIN_PASSWORD)
    key = apikey_issue(name="support bot", owner="team-a")
    settings.OPENJEV = replace(settings.OPENJEV, require_api_key=True)
    with httpx.Client(base_url=asgi_server.url, headers={"Authorization": f"Bearer {key.secret}"}) as client:
        for body in (
            README_REQUEST,
            {**README_REQUEST, "state": "Thanks, all sorted!"},
            {**README_REQUEST, "model": "gpt-4"},
        ):
            client.post("/v1/systemone", json=body)
    assert writer_drain(timeout=30)
    answered = Evaluation.objects.filter(status_code=200).first()
    assert answered is not None and Evaluation.objects.count() == 3

    base = asgi_server.url
    with chromium_page(tmp_path / "chromium-profile") as page:
        signed_in(page, base=base, then="/admin/evaluations/evaluation/")
        # The admin's own CSS is served (unstyled pages would still "render").
        header = page.eval_on_selector("#header", "e => getComputedStyle(e).backgroundColor")
        assert header not in ("", "rgba(0, 0, 0, 0)")
        assert page.locator("#result_list > tbody > tr").count() == 3
        assert page.locator("#changelist-filter").is_visible()
        assert page.get_by_text("support bot (oj_").first.is_visible()
        shot(page, "changelist")

        page.goto(f"{base}/admin/evaluations/evaluation/{answered.pk}/change/")
        assert page.locator("table.oj-answers > tbody > tr").count() == 3
        assert page.locator("pre.oj-json").first.is_visible()
        assert page.locator("tr.oj-chosen").count() == 3
        shot(page, "detail")

        dashboard = page.goto(f"{base}/admin/evaluations/evaluation/dashboard/")
        assert "script-src 'self' 'nonce-" in dashboard.headers["content-security-policy"]
        assert page.get_by_text("Last 24 hours").is_visible() and page.get_by_text("latency p50").first.is_visible()
        shot(page, "dashboard")

        page.goto(f"{base}/admin/evaluations/apikey/add/")
        page.fill("#id_name", "billing service")
        page.fill("#id_owner", "payments team")
        shot(page, "key-add")
        page.click("input[name=_save]")
        secret = page.locator("#oj-secret").inner_text().strip()
        assert secret.startswith("oj_") and len(secret) == 52
        page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        page.click("#oj-copy")  # its handler is a nonce'd script: the page's CSP lets it run
        page.get_by_role("button", name="Copied").wait_for()
        assert page.evaluate("navigator.clipboard.readText()") == secret
        shot(page, "key-issued")
        issued = orm(lambda: ApiKey.objects.get(name="billing service"))
        assert issued.label == secret[:11]

        page.goto(f"{base}/admin/evaluations/apikey/")
        assert secret not in page.content() and page.locator("#result_list > tbody > tr").count() == 2
        shot(page, "keys")
        assert page.errors == []


def test_a_locked_out_admin_sees_the_lockout_page_until_another_admin_clears_it(asgi_server, settings, tmp_path):
    for username in ("admin", "guard"):
        get_user_model().objects.create_superuser(username, f"{username}@example.com", ADMIN_PASSWORD)
    base, then = asgi_server.url, "/admin/"
    with chromium_page(tmp_path / "chromium-profile") as page:
        statuses = [
            sign_in_attempt(page, base=base, then=then, username="admin", password=f"guess {n}")
            for n in range(settings.AXES_FAILURE_LIMIT)
        ]
        assert statuses == [200] * (settings.AXES_FAILURE_LIMIT - 1) + [429]  # the login form, then the lockout
        assert page.get_by_text("Sign-in locked").is_visible() and page.get_by_text("from this address").is_visible()
        shot(page, "lockout")
        # Locked out, the right password is refused too.
        assert sign_in_attempt(page, base=base, then=then, username="admin", password=ADMIN_PASSWORD) == 429

        # Another administrator (not locked: the lockout is per username and address) sees and clears it.
        signed_in(page, base=base, then="/admin/axes/accessattempt/", username="guard")
        attempt = page.locator("#result_list > tbody > tr", has_text="admin")
        assert attempt.count() == 1 and "127.0.0.1" in attempt.inner_text()
        shot(page, "lockout-attempts")
        attempt.locator("input.action-select").check()
        page.select_option("select[name=action]", "delete_selected")
        page.get_by_role("button", name="Run").click()
        page.click("input[type=submit][value^='Yes']")
        page.wait_for_url("**/admin/axes/accessattempt/")
        assert page.locator("#result_list > tbody > tr").count() == 0
        page.get_by_role("button", name="Log out").click()
        page.wait_for_url("**/admin/logout/")

        signed_in(page, base=base, then=then)
        assert page.get_by_role("button", name="Log out").is_visible()
        assert [e for e in page.errors if "status of 429" not in e] == []  # the lockout page's own status
