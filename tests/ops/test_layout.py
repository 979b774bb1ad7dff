"""The layout's rules hold on the code's own import graph (docs/architecture.md, "Rooms and what each may
import"). `lint-imports` checks the rooms' order, the core's independence from Django and the wire formats'
independence from each other (pyproject.toml's `[tool.importlinter]`); here, on the same graph, that no module
imports itself through others, which those contracts cannot say module by module, and that the views, errors and
request ids every format shares name no format."""

from __future__ import annotations

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


def test_the_shared_views_errors_and_request_ids_name_no_wire_format():
    """They read each format's descriptor (`api/plumbing/formats.py`) instead: adding a format touches none of them."""
    import ast

    from api.plumbing.formats import wire_formats

    names = {word for f in wire_formats() for word in (f.name, f.path)}
    assert {"systemone", "decisions", "google", "classify"} <= names
    for path in ("api/views.py", "api/errors.py", "api/requestids.py", "api/metrics.py"):
        strings = [
            node.value
            for node in ast.walk(ast.parse((ROOT / path).read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        ]
        assert strings, path
        assert [s for s in strings if any(name in s.lower() for name in names)] == [], path
