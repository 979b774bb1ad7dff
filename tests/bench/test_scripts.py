"""Every script under bench/ starts: `--help` exits 0 with its usage. A script is run by hand, rarely, so an
import that breaks it (a module that now needs Django's settings, a name moved by a restructure) would
otherwise be found by whoever next needs its figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.servers

BENCH = Path(__file__).resolve().parents[2] / "bench"
LIBRARIES = {
    "__init__.py",
    "batch_server.py",
    "datasets.py",
    "hostile_attacks.py",
    "workloads.py",
    "quality_records.py",
    "quality_scores.py",
    "quality_tuning.py",
}
"""Modules the scripts import, not scripts themselves."""
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if p.name not in LIBRARIES)


def test_every_bench_module_is_a_script_or_a_listed_library() -> None:
    for name in LIBRARIES:
        assert (BENCH / name).exists(), name
        assert "__main__" not in (BENCH / name).read_text(), f"{name} is a script: take it off LIBRARIES"
    for name in SCRIPTS:
        assert "__main__" in (BENCH / name).read_text(), f"{name} is not a script: add it to LIBRARIES"


@pytest.mark.parametrize("script", SCRIPTS)
def test_bench_script_prints_its_usage(script: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
