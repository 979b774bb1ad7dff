"""The settings Django's own parts are configured from (admin sign-in throttling, WebSocket limits) are
validated at startup like every `OPENJEV_*` variable: a bad value stops the process with a message naming it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.ops.helpers import ROOT, serve_env

SETTINGS_LOAD = "import django; django.setup(); from django.conf import settings; print(settings.AXES_FAILURE_LIMIT)"


def settings_load(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SETTINGS_LOAD],
        cwd=ROOT,
        env=serve_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("name", "value", "rule"),
    [
        ("OPENJEV_ADMIN_LOGIN_FAILURES", "0", "a positive integer"),
        ("OPENJEV_ADMIN_LOCKOUT_SECONDS", "soon", "a positive number of seconds"),
        ("OPENJEV_STREAM_AUTH_TIMEOUT", "-1", "a positive number of seconds"),
        ("OPENJEV_MAX_WEBSOCKETS", "1.5", "a positive integer"),
    ],
)
def test_an_invalid_value_stops_the_process_naming_the_variable(name, value, rule):
    loaded = settings_load(**{name: value})
    assert loaded.returncode != 0
    assert f"{name}={value!r} is not valid: {rule}" in loaded.stderr


def test_valid_values_are_taken():
    loaded = settings_load(OPENJEV_ADMIN_LOGIN_FAILURES="3")
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip().splitlines()[-1] == "3"
