"""Behind TLS (`OPENJEV_HTTPS=true`, with the proxy settings docs/security.md documents): `manage.py check --deploy`
is clean, the admin's cookies are `Secure`, http is redirected to https and https answers carry HSTS; the probes
reach a replica by address over http and are never redirected. Each in a process of its own, as the settings are
read once at startup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from serving.config_reading import config_from_env
from serving.setting_rules import ConfigError

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTED = {
    "OPENJEV_SECRET_KEY": "tls-test-" + "s3cr3t-" * 10,
    "OPENJEV_ALLOWED_HOSTS": "api.example.com,testserver",
    "OPENJEV_TRUSTED_PROXIES": "10.0.1.10",
    "OPENJEV_HTTPS": "true",
}
"""What docs/security.md's "Behind nginx or a load balancer" sets, with a real secret."""

CLIENT = """
import json, django
django.setup()
from django.test import Client
plain = Client()
login = plain.get("/admin/login/", secure=True)  # https, as a trusted proxy's X-Forwarded-Proto makes it
print(json.dumps({
    "cookies": {name: bool(morsel["secure"]) for name, morsel in login.cookies.items()},
    "hsts": login.headers.get("Strict-Transport-Security"),
    "redirect": [plain.get("/admin/login/").status_code, plain.get("/admin/login/").headers.get("Location")],
    "health": plain.get("/health/live").status_code,
}))
"""


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "openjev_site.settings", **env}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_is_clean_with_the_documented_proxy_settings():
    checked = run("manage.py", "check", "--deploy", "--fail-level", "WARNING", env=DOCUMENTED)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "no issues" in checked.stdout


def test_behind_tls_the_admins_cookies_are_secure_http_is_redirected_and_https_carries_hsts():
    ran = run("-c", CLIENT, env=DOCUMENTED)
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout.strip().splitlines()[-1])
    assert seen["cookies"] and all(seen["cookies"].values()), seen["cookies"]
    assert seen["hsts"] == "max-age=31536000; includeSubDomains"
    assert seen["redirect"] == [301, "https://testserver/admin/login/"]
    assert seen["health"] == 200


def test_without_tls_nothing_changes_for_plain_http():
    ran = run("-c", CLIENT, env={**DOCUMENTED, "OPENJEV_HTTPS": "false"})
    seen = json.loads(ran.stdout.strip().splitlines()[-1])
    assert not any(seen["cookies"].values()) and seen["hsts"] is None and seen["redirect"][0] == 200


def test_https_without_a_trusted_proxy_stops_the_start():
    with pytest.raises(ConfigError, match="needs OPENJEV_TRUSTED_PROXIES"):
        config_from_env({"OPENJEV_HTTPS": "true"})
