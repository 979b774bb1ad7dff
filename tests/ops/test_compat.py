"""The framework internals the project relies on are read against the installed releases: an upgrade of
Django, DRF or adrf fails here until `serving/compat.py` has been re-read against it."""

from __future__ import annotations

import importlib.metadata

import pytest

from serving.compat import WRITTEN_FOR
from serving.config import BASE_DIR


def _release(*, package: str, parts: int) -> str:
    return ".".join(importlib.metadata.version(package).split(".")[:parts])


@pytest.mark.parametrize("package", sorted(WRITTEN_FOR))
def test_the_installed_release_is_the_one_the_compat_module_was_read_against(package):
    pinned = WRITTEN_FOR[package]
    installed = _release(package=package, parts=len(pinned.split(".")))
    assert installed == pinned, (
        f"{package} {importlib.metadata.version(package)} is installed but serving/compat.py was read against "
        f"{pinned}: re-read each piece there against the new release's source, then update WRITTEN_FOR"
    )


def test_nothing_outside_the_compat_module_touches_the_internals_it_wraps():
    internals = ("_has_been_logged", "_middleware_chain", "site._registry", "def async_dispatch")
    found = [
        f"{path.relative_to(BASE_DIR)}: {name}"
        for package in ("api", "audit", "calibration", "serving", "openjev_site")
        for path in (BASE_DIR / package).rglob("*.py")
        if path.name != "compat.py"
        for name in internals
        if name in path.read_text()
    ]
    assert found == []
