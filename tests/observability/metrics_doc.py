"""The metrics table of docs/observability.md, rendered from the code (`serving.metrics`): every metric `GET
/metrics` shows, with its type, labels, buckets and help text, so the doc cannot drift from the registry.
`tests/observability/test_doc.py` fails when the doc's table differs; rewrite it with

    .venv/bin/python -m tests.observability.metrics_doc
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "observability.md"
START = "<!-- metrics table: rendered by tests/observability/metrics_doc.py, do not edit by hand -->"
END = "<!-- end of the metrics table -->"

MODES = {
    "livesum": "summed over the live workers",
    "livemostrecent": "the live worker's that set it last",
    "livemin": "the least over the live workers",
}
"""How `serve --workers N` combines a gauge of its workers (prometheus_client's multiprocess modes)."""


@dataclass(frozen=True)
class MetricDoc:
    name: str
    """As a scrape shows it (a counter with `_total`; a histogram's series add `_bucket`, `_sum`, `_count`)."""
    kind: str
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] = ()
    combined: str = ""
    """For a gauge: how the workers' values make the replica's."""


def _number(value: float) -> str:
    return f"{value:g}"


def metrics_documented() -> list[MetricDoc]:
    """Every metric of `serving.metrics`: the registered ones in the module's order, then what each scrape
    collects (`ScrapeCollector`)."""
    from prometheus_client.metrics import Counter, Gauge, Histogram, MetricWrapperBase

    from serving import metrics

    found = []
    for value in vars(metrics).values():
        if not isinstance(value, MetricWrapperBase):
            continue
        (family,) = value.describe()
        labels = tuple(value._labelnames)
        if isinstance(value, Counter):
            found.append(MetricDoc(f"{family.name}_total", "counter", labels, family.documentation))
        elif isinstance(value, Histogram):
            buckets = tuple(b for b in value._upper_bounds if b != float("inf"))
            found.append(MetricDoc(family.name, "histogram", labels, family.documentation, buckets=buckets))
        elif isinstance(value, Gauge):
            mode = MODES[value._multiprocess_mode]
            found.append(MetricDoc(family.name, "gauge", labels, family.documentation, combined=mode))
    scrape = metrics.ScrapeCollector(
        build={"version": "", "backend": "", "model": ""},
        workers=lambda: (1, 1, 0),
        batches=lambda: ({"waiting": 0, "completed": 0, "failed": 0}, 0.0),
    ).collect()
    for family in scrape:
        labels = tuple(sorted({k for sample in family.samples for k in sample.labels}))
        name = f"{family.name}_total" if family.type == "counter" else family.name
        found.append(MetricDoc(name, family.type, labels, family.documentation, combined="read at each scrape"))
    return found


def _cell(text: str) -> str:
    """Text for a Markdown table cell: a pipe escaped, and `<` too (`oj_<prefix>` would be an HTML tag)."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def metrics_table() -> str:
    """The table as the doc has it, between its markers."""
    rows = [
        "| Metric | Type | Labels | Meaning |",
        "|---|---|---|---|",
    ]
    for metric in metrics_documented():
        kind = metric.kind
        if metric.combined:
            kind += f" ({metric.combined})"
        meaning = metric.help
        if metric.buckets:
            meaning += f" Buckets: {', '.join(_number(b) for b in metric.buckets)}."
        labels = ", ".join(f"`{label}`" for label in metric.labels) or "—"
        rows.append(f"| `{metric.name}` | {kind} | {labels} | {_cell(meaning)} |")
    return "\n".join([START, *rows, END])


def doc_table_current(text: str) -> str:
    """The table the doc holds now, markers included ('' when it has none)."""
    if START not in text or END not in text:
        return ""
    return START + text.split(START, 1)[1].split(END, 1)[0] + END


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")
    sys.path.insert(0, str(ROOT))
    text = DOC.read_text()
    current = doc_table_current(text)
    if not current:
        raise SystemExit(f"{DOC} has no metrics table markers ({START} ... {END})")
    DOC.write_text(text.replace(current, metrics_table()))
    print(f"wrote the metrics table of {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
