"""Debian's real Prometheus (2.42) against `serve --workers 2` on the SGLang stand-in: what it scraped adds up to
the requests sent, by API and status, whichever worker answered each scrape; the alert rules load and pass
their promtool unit tests; the scrape config is valid as compose mounts it; every query of the Grafana
dashboard runs on what was scraped."""

from __future__ import annotations

import math
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from fake_sglang import FakeSGLang
from serving.metrics import LIMITS
from testbed.prometheus import JOB, PrometheusServer, dashboard_queries, grafana_expr
from tests.observability.servers import (
    SENT,
    prometheus_require,
    requests_of_known_outcome,
    serve_two_workers,
    workers_answering,
)

pytestmark = pytest.mark.servers

ROOT = Path(__file__).resolve().parents[2]
OBSERVABILITY = ROOT / "deploy" / "observability"
RULES = OBSERVABILITY / "alerts.yml"
TOKEN = "scrape-token-for-the-prometheus-test"


def promtool(*args: str, cwd: Path = OBSERVABILITY) -> subprocess.CompletedProcess[str]:
    tool = prometheus_require()[1]
    return subprocess.run([tool, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def alert_names() -> list[str]:
    return [rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def test_promtool_accepts_the_alert_rules():
    checked = promtool("check", "rules", "alerts.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(alert_names())} rules found" in checked.stdout


def test_every_alert_passes_its_promtool_unit_tests_and_each_has_one_that_fires_it():
    tested = promtool("test", "rules", "alerts.test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    cases = yaml.safe_load((OBSERVABILITY / "alerts.test.yml").read_text())["tests"]
    fired = {check["alertname"] for case in cases for check in case["alert_rule_test"] if check.get("exp_alerts")}
    assert fired == set(alert_names())


def test_promtool_accepts_the_scrape_config_as_compose_mounts_it(tmp_path):
    """prometheus.yml, alerts.yml and the token file laid out where compose's `prometheus` service puts them."""
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    service = compose["services"]["prometheus"]
    for volume in service["volumes"]:
        source, target = volume.split(":")[:2]
        if source.startswith("."):
            placed = tmp_path / target.lstrip("/")
            placed.parent.mkdir(parents=True, exist_ok=True)
            placed.write_bytes((ROOT / "deploy" / source).read_bytes())
    for config in service["configs"]:
        placed = tmp_path / config["target"].lstrip("/")
        placed.write_text("a-scrape-token\n")
    checked = promtool("check", "config", str(tmp_path / "etc" / "prometheus" / "prometheus.yml"), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout and "1 rule files found" in checked.stdout


@dataclass
class Scraped:
    prometheus: PrometheusServer
    sent: dict[tuple[str, str], int]
    started: float
    """When the load began (epoch seconds)."""


@pytest.fixture(scope="module")
def scraped(fake_server: FakeSGLang, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    """`serve --workers 2` with a scrape token, Prometheus scraping it every second (the alert rules loaded),
    the requests of `SENT` answered and scraped after."""
    prometheus_require()
    fake_server.reset()
    directory = tmp_path_factory.mktemp("prometheus")
    serve = serve_two_workers(fake_url=fake_server.url, log=directory / "serve.log", OPENJEV_METRICS_TOKEN=TOKEN)
    with serve:
        workers_answering(serve.url, want=2)
        target = serve.url.removeprefix("http://")
        with PrometheusServer(directory=directory, targets=[target], rule_files=[RULES], token=TOKEN) as prometheus:
            prometheus.wait_scraped(after=time.time())
            started = time.time()
            got = requests_of_known_outcome(serve.url)
            assert dict(got) == SENT, (got, serve.log)
            prometheus.wait_scraped(after=time.time())
            yield Scraped(prometheus=prometheus, sent=SENT, started=started)
        assert serve.terminate() == 0, serve.log


def test_what_prometheus_scraped_sums_to_the_requests_sent_by_api_and_status(scraped):
    prometheus = scraped.prometheus
    total = sum(scraped.sent.values())
    assert prometheus.value(f'sum(openjev_requests_total{{job="{JOB}"}})') == total == 45
    assert prometheus.by("sum by (api, status) (openjev_requests_total)", "api", "status") == scraped.sent
    assert prometheus.value("sum(openjev_request_duration_seconds_count)") == total
    unused = {("classify",): 0, ("google",): 0, ("stream",): 0}  # each API's series exists from the start, at zero
    durations = prometheus.by("sum by (api) (openjev_request_duration_seconds_count)", "api")
    assert durations == {("systemone",): 23, ("decisions",): 22, **unused}
    answered = prometheus.by("sum by (api) (openjev_label_mass_count)", "api")
    assert answered == {("systemone",): 20, ("decisions",): 20, **unused}


def test_the_scrape_shows_one_target_with_both_workers_up_the_backend_and_the_build(scraped):
    prometheus = scraped.prometheus
    (target,) = prometheus.targets()  # one replica, one target, whatever its workers
    assert target["health"] == "up" and target["labels"]["job"] == JOB
    assert prometheus.value("openjev_workers_up") == 2 and prometheus.value("openjev_workers_configured") == 2
    assert prometheus.value("openjev_workers_replaced_total") == 0
    assert prometheus.value("openjev_backend_up") == 1
    assert prometheus.value("openjev_evaluations_in_flight") == 0
    # Counters of refusals and losses exist at 0 before any (so their first increase shows), summed over workers.
    assert prometheus.by("openjev_rate_limited_total", "limit") == {(limit,): 0 for limit in LIMITS}
    assert prometheus.value('sum(openjev_storage_writes_total{outcome=~"dropped|failed"})') == 0
    # Evaluations are not stored here, but each answered one's key usage is (every storage level counts it), tallied
    # in memory and written by the drainer within a second: wait for a scrape to show the last one.
    usage = 'openjev_storage_writes_total{sink="key_usage", outcome="written"}'
    deadline = time.monotonic() + 15
    while prometheus.value(usage) != 40:
        assert time.monotonic() < deadline, prometheus.value(usage)
        time.sleep(0.5)
    (build,) = prometheus.query("openjev_build_info")
    assert build["metric"]["backend"] == "sglang" and build["metric"]["model"] == "Qwen/Qwen3.6-35B-A3B"


def test_the_alert_rules_load_and_evaluate_on_what_was_scraped(scraped):
    rules = scraped.prometheus.rules()
    assert sorted(rule["name"] for rule in rules) == sorted(alert_names())
    deadline = time.monotonic() + 10
    while any(rule["health"] != "ok" for rule in rules):  # each is evaluated once a second
        unknown = [(rule["name"], rule["health"], rule.get("lastError")) for rule in rules if rule["health"] != "ok"]
        assert time.monotonic() < deadline, unknown
        time.sleep(0.5)
        rules = scraped.prometheus.rules()
    firing = {rule["name"] for rule in rules if rule["state"] == "firing"}
    # The stand-in's answers have low label mass (under 0.5), but the rule waits 15 minutes; nothing else fits.
    assert not firing & {"OpenJevReplicaDown", "OpenJevBackendDown", "OpenJevHighErrorRate", "OpenJevStorageRowsLost"}


NO_DATA_HERE = {"5xx share by API"}
"""Panels whose metrics the requests sent here leave without a series: no 5xx was answered (the counters of
429s, 529s, refusals and lost records exist at 0; bench/dashboard_picture.py drives them all)."""


def _finite(result: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(r["value"][1])) for r in result)


def test_every_query_of_the_grafana_dashboard_runs_on_what_was_scraped(scraped):
    prometheus = scraped.prometheus
    window = f"{max(10, math.ceil(time.time() - scraped.started) + 5)}s"  # rates over the whole load
    with_data: dict[str, bool] = {}
    for query in dashboard_queries():
        expr = grafana_expr(query.expr, rate_interval=window, range_=window)
        result = prometheus.query(expr)  # raises unless Prometheus accepts it
        with_data[query.panel] = with_data.get(query.panel, False) or _finite(result)
    empty = {panel for panel, found in with_data.items() if not found}
    assert empty == NO_DATA_HERE
