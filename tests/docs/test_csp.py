"""The Content-Security-Policy is on the pages a browser renders (the admin, the docs) and not on the API, whose
handler runs no middleware. Whether the pages work under it is the browser tests' part (test_browser.py,
tests/admin/test_admin_browser.py)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("path", ["/", "/docs", "/admin/login/"])
async def test_the_admin_and_the_docs_pages_carry_the_policy(api, path):
    response = await api.get(path)
    assert response.status_code == 200
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "object-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert "script-src 'self'" in policy and "'unsafe-eval'" not in policy


@pytest.mark.parametrize("path", ["/health/live", "/v1/limits", "/v1/nowhere"])
async def test_the_api_answers_without_a_policy(api, path):
    response = await api.get(path)
    assert "content-security-policy" not in response.headers
