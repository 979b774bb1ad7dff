"""The layout's rules hold on the code's own import graph (docs/architecture.md, "Rooms and what each may
import"). `lint-imports` checks the rooms' order, the core's independence from Django and the wire formats'
independence from each other (pyproject.toml's `[tool.importlinter]`); here, on the same graph, that no module
imports itself through others, which those contracts cannot say module by module, and that the shared edge every
format goes through (`api/plumbing/`, the shared modules at `api/`'s root) names no format."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("inference", "serving", "audit", "calibration", "api", "openjev_site")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    """The service's imports, those under `if TYPE_CHECKING:` included: such an import still ties two modules (it was
    how `inference.questions` and `inference.requests` were tied before images had a module of their own)."""
    return grimp.build_graph(*PACKAGES, cache_dir=None, exclude_type_checking_imports=False)


def _circles(graph: grimp.ImportGraph) -> list[str]:
    """Every import `a -> b` from which a chain of imports leads back to `a`, as that whole circle."""
    found = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                found.append(" -> ".join((importer, *back)))
    return found


def test_no_module_of_the_service_imports_itself_through_other_modules(graph):
    assert len(graph.modules) > 150, "the graph holds the service's modules"
    assert _circles(graph) == []


def test_the_circle_check_finds_a_circle_of_two_modules():
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    graph.add_import(importer="inference.images", imported="inference.questions")
    assert "inference.images -> inference.questions -> inference.images" in _circles(graph)


def _shared_edge(graph: grimp.ImportGraph, *, formats: set[str]) -> list[str]:
    """The API's shared edge: every module of `api.plumbing`, and every module at `api`'s root that other code
    imports (Django loads the app's own hooks, `apps` and `admin`, by name: they wire the formats in)."""
    return sorted(
        module
        for module in graph.modules
        if module.startswith("api.plumbing.")
        or (module.count(".") == 1 and module.startswith("api.") and graph.find_modules_that_directly_import(module))
        if not any(module == f or module.startswith(f + ".") for f in formats)
    )


def _code_strings(*, module: str) -> list[str]:
    """The strings of a module's code: its docstrings, a module's, a class's, a function's or an attribute's (prose,
    which may name a format as an example), left out."""
    tree = ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text())
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_the_shared_edge_names_no_wire_format(graph):
    """The shared edge reads each format's descriptor (`api/plumbing/formats.py`) instead of naming a format: it
    imports no format's package, and none of its strings holds an installed format's name or path, so adding a
    format touches none of it."""
    from django.conf import settings

    from api.plumbing.formats import wire_formats

    packages = set(settings.API_WIRE_FORMATS)
    names = {word for f in wire_formats() for word in (f.name, f.path)}
    assert {"systemone", "decisions", "google", "classify"} <= names
    edge = _shared_edge(graph, formats=packages)
    assert {"api.views", "api.plumbing.formats"} <= set(edge), "the edge holds the shared views and the plumbing"
    imported = {
        (module, imported)
        for module in edge
        for imported in graph.find_modules_directly_imported_by(module)
        if any(imported == p or imported.startswith(p + ".") for p in packages)
    }
    assert imported == set()
    named = {module: [s for s in _code_strings(module=module) if any(n in s.lower() for n in names)] for module in edge}
    assert {module: strings for module, strings in named.items() if strings} == {}
