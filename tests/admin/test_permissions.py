"""The admin pages outside the model admins check the permissions their content needs, as the model admins' lists
do: a key's usage page the view permission on API keys, the dashboard (page and live socket) the view permission
on evaluations, and its volumes by key the view permission on keys too. Staff without them get 403 (4403)."""

from __future__ import annotations

from functools import partial

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from audit.keys import apikey_issue
from tests.database import db
from tests.factories import evaluation_make

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DASHBOARD = "/admin/evaluations/evaluation/dashboard/"
LIVE_PATH = "/admin/evaluations/evaluation/dashboard/live"


def staff_with(*codenames: str) -> Client:
    """A signed-in staff user (not a superuser) holding exactly the `evaluations` view permissions named."""
    user = get_user_model().objects.create_user(f"staff-{'-'.join(codenames) or 'none'}", password="x", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="evaluations", codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def test_staff_without_the_view_permission_on_keys_get_403_for_a_keys_usage():
    key = apikey_issue(name="billing service")
    url = reverse("admin:evaluations_apikey_usage", args=[key.id])
    for client in (staff_with(), staff_with("view_evaluation")):
        response = client.get(url)
        assert response.status_code == 403 and "billing service" not in response.content.decode()
    allowed = staff_with("view_apikey").get(url)
    assert allowed.status_code == 200 and "billing service" in allowed.content.decode()


def test_staff_without_the_view_permission_on_evaluations_get_403_for_the_dashboard():
    for client in (staff_with(), staff_with("view_apikey")):
        assert client.get(DASHBOARD).status_code == 403
    assert staff_with("view_evaluation").get(DASHBOARD).status_code == 200


def test_the_dashboards_volumes_by_key_need_the_view_permission_on_keys_too():
    key = apikey_issue(name="billing service")
    evaluation_make(key_label=key.label)
    without_keys = staff_with("view_evaluation").get(DASHBOARD).content.decode()
    with_keys = staff_with("view_evaluation", "view_apikey").get(DASHBOARD).content.decode()
    assert "By API key" not in without_keys and key.label not in without_keys and "billing service" not in without_keys
    assert "By API key" in with_keys and "billing service" in with_keys


def staff_cookie(codenames: tuple[str, ...]) -> str:
    client = staff_with(*codenames)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


async def test_staff_without_the_view_permission_on_evaluations_get_4403_on_the_dashboard_socket(asgi_server):
    live = asgi_server.url.replace("http://", "ws://") + LIVE_PATH
    cases: tuple[tuple[tuple[str, ...], bool], ...] = (
        ((), False),
        (("view_apikey",), False),
        (("view_evaluation",), True),
    )
    for codenames, opened in cases:
        cookie = await db(partial(staff_cookie, codenames))
        async with connect(live, additional_headers={"Cookie": cookie}, origin=Origin(asgi_server.url)) as ws:
            if opened:
                assert '"snapshot"' in str(await ws.recv())
                continue
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403
