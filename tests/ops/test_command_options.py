"""A command's own options win over the environment, and a setting the service cannot run with stops any
`manage.py` command with one line naming the variable and a non-zero status, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from serving.options import command_environment
from tests.ops.helpers import ROOT, Serve, serve_env

pytestmark = pytest.mark.servers


def test_serve_connect_completes_an_environment_that_asks_for_a_backend_url(fake, tmp_path):
    env = serve_env(OPENJEV_BACKEND="sglang")
    with Serve(["--connect", fake.url], log=tmp_path / "serve.log", env=env) as serve:
        health = serve.wait_healthy().json()
        assert health["status"] == "ok" and health["backend"] == "sglang"
        assert serve.terminate() == 0, serve.log
    assert "Traceback" not in serve.log


def test_a_bad_setting_stops_a_command_with_one_line_and_no_traceback():
    env = serve_env(OPENJEV_MAX_ANSWERS="1")
    run = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert (run.returncode, run.stderr) == (1, "OPENJEV_MAX_ANSWERS='1' is not valid: an integer from 2 to 702\n")


def test_only_serves_source_options_become_settings_and_a_bad_command_line_is_left_to_its_parser():
    assert command_environment(argv=["serve", "--connect=http://gw:30000/", "--", "--connect", "x"]) == {
        "OPENJEV_BACKEND": "sglang",
        "OPENJEV_BACKEND_URL": "http://gw:30000",
    }
    assert command_environment(argv=["serve", "--sglang-python", "/p", "--sglang-host", "::1", "--profile", "q"]) == {
        "OPENJEV_PROFILE": "q",
        "OPENJEV_BACKEND": "sglang",
        "OPENJEV_SGLANG_PYTHON": "/p",
        "OPENJEV_BACKEND_URL": "http://[::1]:30000",
    }
    assert command_environment(argv=["check", "--connect", "http://gw"]) == {}
    assert command_environment(argv=["serve", "--sglang-port", "not-a-port", "--connect", "http://gw"]) == {}
