"""docs/observability.md holds to the code and to deploy/observability: its metrics table is the registry's, every
metric it, the alert rules or the dashboard name is one `/metrics` shows, each alert has its section (where its
runbook annotation points), each dashboard panel is described, and the picture is there, small, and dated."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from tests.observability.metrics_doc import DOC, doc_table_current, metrics_documented, metrics_table

ROOT = Path(__file__).resolve().parents[2]
OBSERVABILITY = ROOT / "deploy" / "observability"
PICTURE = ROOT / "docs" / "observability-dashboard.png"


def exported_series() -> set[str]:
    """Every metric's name, and a histogram's series' names."""
    names = set()
    for metric in metrics_documented():
        suffixes = ("", "_bucket", "_sum", "_count") if metric.kind == "histogram" else ("",)
        names |= {metric.name + suffix for suffix in suffixes}
    return names


def alerts() -> list[dict]:
    return [
        rule
        for group in yaml.safe_load((OBSERVABILITY / "alerts.yml").read_text())["groups"]
        for rule in group["rules"]
    ]


def dashboard() -> dict:
    return json.loads((OBSERVABILITY / "grafana-dashboard.json").read_text())


def test_the_docs_metrics_table_is_the_registrys():
    assert doc_table_current(DOC.read_text()) == metrics_table(), (
        "docs/observability.md's metrics table differs from serving/metrics.py: "
        "run .venv/bin/python -m tests.observability.metrics_doc"
    )


def test_every_metric_the_doc_the_rules_and_the_dashboard_name_is_one_the_service_exports():
    exported = exported_series()
    for path in (
        DOC,
        OBSERVABILITY / "alerts.yml",
        OBSERVABILITY / "alerts.test.yml",
        OBSERVABILITY / "grafana-dashboard.json",
    ):
        named = set(re.findall(r"\bopenjev_[a-z_]+[a-z]", path.read_text()))
        assert named, path
        assert named <= exported, f"{path.name} names metrics /metrics does not show: {sorted(named - exported)}"
    documented = set(re.findall(r"^\| `(openjev_[a-z_]+)`", DOC.read_text(), flags=re.MULTILINE))
    assert documented == {metric.name for metric in metrics_documented()}


def test_each_alert_has_its_section_where_its_runbook_points_and_a_row_in_the_table():
    text = DOC.read_text()
    for rule in alerts():
        name = rule["alert"]
        assert f"\n### {name}\n" in text, f"docs/observability.md has no section for {name}"
        assert rule["annotations"]["runbook"] == f"docs/observability.md#{name.lower()}"
        assert re.search(rf"^\| `{name}` \| {rule['labels']['severity']} \|", text, flags=re.MULTILINE), name
    sections = re.findall(r"^### (OpenJev\w+)$", text, flags=re.MULTILINE)
    assert sections == [rule["alert"] for rule in alerts()]  # in the rules' order, none left over


def test_the_dashboard_is_importable_and_each_panel_is_described():
    board = dashboard()
    assert board["schemaVersion"] >= 36 and board["id"] is None and board["uid"]
    (source,) = [v for v in board["templating"]["list"] if v["type"] == "datasource"]
    assert source["name"] == "datasource" and source["query"] == "prometheus"
    text = DOC.read_text()
    taken: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {
            (x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells
        if panel["type"] == "row":
            continue
        assert f"| {panel['title']} |" in text, f"docs/observability.md does not describe the panel {panel['title']!r}"
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"] and all(t["datasource"] == panel["datasource"] for t in panel["targets"])


def test_the_picture_is_there_small_and_says_when_and_at_which_commit_it_was_drawn():
    data = PICTURE.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) < 300 * 1024
    text = DOC.read_text()
    assert "![The dashboard's panels drawn from a real run](observability-dashboard.png)" in text
    assert re.search(r"drawn \d{4}-\d{2}-\d{2} at commit `[0-9a-f]{7,40}`", text)
    assert "bench/dashboard_picture.py" in text and (ROOT / "bench" / "dashboard_picture.py").is_file()


def test_the_readme_and_the_operations_guide_link_the_doc():
    assert "(docs/observability.md)" in (ROOT / "README.md").read_text()
    assert "(observability.md)" in (ROOT / "docs" / "operations.md").read_text()
