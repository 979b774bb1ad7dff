"""docs/security.md names the test that holds each protection: every one it names exists, and each section
others fill in is there to be filled."""

from __future__ import annotations

import ast
import re

from serving.config import BASE_DIR

SECURITY = BASE_DIR / "docs" / "security.md"


def named_tests() -> set[tuple[str, str]]:
    return set(re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", SECURITY.read_text()))


def test_every_test_the_security_page_names_exists():
    named = named_tests()
    assert len(named) >= 30
    for path, name in named:
        tree = ast.parse((BASE_DIR / path).read_text())
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
        assert name in defined, f"{path}::{name}"


def test_the_sections_of_protections_built_elsewhere_are_there():
    headings = re.findall(r"^### (.+)$", SECURITY.read_text(), re.M)
    for section in (
        "Hostile input and the event loop",
        "Per-key limits under concurrency",
        "Bounded error messages",
        "Workers that come back",
    ):
        assert section in headings
