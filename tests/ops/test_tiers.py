"""`make test-fast` runs what needs neither the embedded model nor a browser, and says so when an unmarked
test needs one of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
