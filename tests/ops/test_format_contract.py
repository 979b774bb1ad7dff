"""Every installed wire format is in `lint-imports`' independence contract (pyproject.toml's "The wire formats do
not import each other"): the contract lists its modules by name, so a format added to `settings.API_WIRE_FORMATS`
and not to the list would import another format unchecked, and `lint-imports` would still pass."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings

from tests.ops.packages import pyproject

CONTRACT = "The wire formats do not import each other"


def contract_modules(*, contracts: Sequence[dict[str, Any]]) -> list[str]:
    """The modules the wire formats' independence contract names (it must exist, and be an independence one)."""
    found = [c for c in contracts if c.get("name") == CONTRACT]
    assert len(found) == 1, f"pyproject.toml needs one [[tool.importlinter.contracts]] named {CONTRACT!r}"
    assert found[0]["type"] == "independence", f"{CONTRACT!r} must be an independence contract"
    modules: list[str] = found[0]["modules"]
    return modules


def formats_unchecked(*, formats: Sequence[str], modules: Sequence[str]) -> list[str]:
    """The formats that neither are a module of the contract nor sit inside one."""
    return [f for f in formats if not any(f == m or f.startswith(m + ".") for m in modules)]


def _contracts() -> list[dict[str, Any]]:
    contracts: list[dict[str, Any]] = pyproject()["tool"]["importlinter"]["contracts"]
    return contracts


def test_every_installed_wire_format_is_in_the_independence_contract() -> None:
    unchecked = formats_unchecked(formats=settings.API_WIRE_FORMATS, modules=contract_modules(contracts=_contracts()))
    assert not unchecked, (
        f"settings.API_WIRE_FORMATS has {unchecked}, which pyproject.toml's contract {CONTRACT!r} does not list: add "
        "them to its `modules` (docs/architecture.md, Adding a wire format), or lint-imports never checks them"
    )


def test_a_format_missing_from_the_contract_is_named() -> None:
    modules = contract_modules(contracts=_contracts())
    assert formats_unchecked(formats=[*modules, "api.batches"], modules=modules) == ["api.batches"]
    assert formats_unchecked(formats=["api.google.v2"], modules=["api.google"]) == []
    assert formats_unchecked(formats=["api.googler"], modules=["api.google"]) == ["api.googler"]
