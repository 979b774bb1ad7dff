"""Bad input to the admin is the client's mistake, answered with a 4xx: never a 500, which clients retry
and operators are paged for. Every model admin of the site is tried, the installed apps' included."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.test import RequestFactory
from django.urls import reverse

from audit.keys import apikey_issue
from audit.models import ApiKey
from serving.compat import admin_registered

pytestmark = [pytest.mark.django_db(transaction=True)]

MALFORMED_ID = "not-a-number\x00"
"""An id no primary key takes: not a number, and a text with a NUL (which PostgreSQL cannot even compare)."""


def admins_with_actions(admin_user: Any) -> list[tuple[str, str]]:
    """(changelist URL, an action name) for each registered model admin that offers an action."""
    request = RequestFactory().get("/admin/")
    request.user = admin_user
    found = []
    for model, model_admin in admin_registered(site=admin.site):
        actions = model_admin.get_actions(request)
        if actions:
            url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
            found.append((url, next(iter(actions))))
    return found


def test_an_admin_action_on_a_malformed_id_is_a_400_on_every_model_admin(admin_client, admin_user):
    tried = admins_with_actions(admin_user)
    assert {"/admin/auth/user/", "/admin/evaluations/apikey/"} <= {url for url, _ in tried}  # auth's and ours
    for url, action in tried:
        for confirmed in ({}, {"post": "yes"}):
            response = admin_client.post(
                url, {"action": action, ACTION_CHECKBOX_NAME: [MALFORMED_ID], "index": "0", **confirmed}
            )
            assert response.status_code == 400, (url, action, confirmed, response.status_code)


def test_an_action_on_well_formed_ids_still_runs(admin_client):
    key = apikey_issue(name="to revoke", owner="team-a")
    url = reverse("admin:evaluations_apikey_changelist")
    response = admin_client.post(url, {"action": "revoke_selected", ACTION_CHECKBOX_NAME: [str(key.id)], "index": "0"})
    assert response.status_code == 302
    assert ApiKey.objects.get(pk=key.id).revoked_at is not None
