"""What a `uv sync` installs, read from pyproject.toml and uv.lock: the image definitions are checked
against the lock itself, so a model package reached through any path (a main dependency, an extra, a
group, a transitive requirement) fails the tests, not just one spelled out in a Dockerfile."""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from inference.gguf import BUNDLED

ROOT = Path(__file__).resolve().parents[2]
ROOT_PACKAGE = "openjev"
ENGINE_PACKAGE = "llama-cpp-python"


def embedded_only_packages() -> frozenset[str]:
    """The packages only the embedded engine needs: llama.cpp and every part of every bundled model."""
    parts = {model.part_package(n) for model in BUNDLED.values() for n in range(1, model.parts + 1)}
    return frozenset({ENGINE_PACKAGE, *parts})


@cache
def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


@cache
def _locked() -> dict[str, list[dict[str, Any]]]:
    """uv.lock's packages by name (a name may be locked at several versions for conflicting extras)."""
    packages: dict[str, list[dict[str, Any]]] = {}
    for package in tomllib.loads((ROOT / "uv.lock").read_text())["package"]:
        packages.setdefault(package["name"], []).append(package)
    return packages


def sync_packages(*, args: Iterable[str]) -> frozenset[str]:
    """Every package `uv sync ARGS` may install: the closure of the root's requirements, its chosen extras
    and groups over uv.lock, markers ignored (an over-estimate, which is what a leak check wants)."""
    args = list(args)
    extras, groups = _flag_values(args=args, flag="--extra"), _flag_values(args=args, flag="--group")
    (root,) = _locked()[ROOT_PACKAGE]
    if "--all-extras" in args:
        extras |= set(root.get("optional-dependencies", {}))
    if "--all-groups" in args:
        groups |= set(root.get("dev-dependencies", {}))
    elif "--no-dev" not in args and "--no-default-groups" not in args:
        groups |= set(pyproject()["tool"]["uv"].get("default-groups", ["dev"]))
    wanted = [
        *root.get("dependencies", []),
        *(r for extra in extras for r in root.get("optional-dependencies", {})[extra]),
        *(r for group in groups for r in root.get("dev-dependencies", {})[group]),
    ]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    while wanted:
        requirement = wanted.pop()
        key = (requirement["name"], tuple(requirement.get("extra", [])))
        if key in seen:
            continue
        seen.add(key)
        for package in _locked()[requirement["name"]]:
            wanted += [
                *package.get("dependencies", []),
                *(r for e in key[1] for r in package.get("optional-dependencies", {}).get(e, [])),
            ]
    return frozenset(name for name, _ in seen)


def _flag_values(*, args: list[str], flag: str) -> set[str]:
    """The values of a repeatable option, given as `FLAG VALUE` or `FLAG=VALUE`."""
    return {value for option, value in itertools.pairwise(args) if option == flag} | {
        arg.removeprefix(f"{flag}=") for arg in args if arg.startswith(f"{flag}=")
    }
