"""`make test-fast` runs what needs neither the embedded model nor a browser, and says so when an unmarked
test needs one of them; outside it, a browser test without Chromium fails unless it is deselected."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_fast_tier_fails_an_unmarked_test_that_loads_the_embedded_model(tmp_path):
    (tmp_path / "test_unmarked.py").write_text(
        "from inference.backends.llamacpp import LlamaCppBackend\n\n\n"
        "def test_loads_a_model(tmp_path):\n"
        "    LlamaCppBackend(model_path=tmp_path / 'model.gguf')\n"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.tiers",
            "-q",
            "--rootdir",
            str(ROOT),
            "-c",
            str(ROOT / "pyproject.toml"),
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "loads the embedded model but is not marked @pytest.mark.embedded" in run.stdout


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Bare pytest, as a developer runs it: no test script, no environment that changes the rules."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENJEV_")}
    config = ["--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml")]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *config, *args, str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.servers  # two pytest runs in processes of their own
def test_a_browser_test_without_chromium_fails_under_bare_pytest_unless_deselected(tmp_path):
    (tmp_path / "test_page.py").write_text(
        "import pytest\n\nfrom tests import browser\n\npytestmark = pytest.mark.browser\n\n\n"
        "def test_a_page(tmp_path, monkeypatch):\n"
        "    monkeypatch.setattr(browser, 'CHROMIUM', str(tmp_path / 'no-chromium'))\n"
        "    with browser.chromium_page(tmp_path / 'profile'):\n"
        "        pass\n"
    )
    run = _pytest(tmp_path)
    assert run.returncode == 1 and "1 failed" in run.stdout, run.stdout + run.stderr
    assert "no-chromium is missing" in run.stdout and "-m 'not browser'" in run.stdout
    deselected = _pytest(tmp_path, "-m", "not browser")
    assert "1 deselected" in deselected.stdout and "failed" not in deselected.stdout, deselected.stdout
