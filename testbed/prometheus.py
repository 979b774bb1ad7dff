"""A real Prometheus server (Debian's `prometheus` package) scraping services on loopback, and its HTTP API.

The tests and the dashboard's picture start one of their own: a config written to a directory of theirs, the
TSDB in it, a free port, scrapes every second. `scripts/test.sh` installs the package (`prometheus_ensure`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Self

import httpx
import yaml

from testbed.ports import free_port

JOB = "openjev-api"
"""The scrape job's name, as deploy/observability/prometheus.yml names it (its alert rules select it)."""


def prometheus_binaries() -> tuple[str, str] | None:
    """The paths of `prometheus` and `promtool`, or None when either is missing."""
    server, tool = shutil.which("prometheus"), shutil.which("promtool")
    return (server, tool) if server and tool else None


class PrometheusServer:
    """`prometheus` scraping `targets` (host:port) every `interval`, with `rule_files` loaded, in `directory`."""

    def __init__(
        self,
        *,
        directory: Path,
        targets: Sequence[str],
        interval: str = "1s",
        rule_files: Sequence[Path] = (),
        token: str | None = None,
    ) -> None:
        found = prometheus_binaries()
        if found is None:
            raise RuntimeError("prometheus is not installed: apt-get install prometheus (scripts/test.sh does)")
        self.binary = found[0]
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        job: dict[str, Any] = {
            "job_name": JOB,
            "metrics_path": "/metrics",
            "static_configs": [{"targets": list(targets)}],
        }
        if token is not None:
            (directory / "metrics-token").write_text(token + "\n")
            job["authorization"] = {"type": "Bearer", "credentials_file": str(directory / "metrics-token")}
        config = {
            "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
            "rule_files": [str(path) for path in rule_files],
            "scrape_configs": [job],
        }
        self.config_path = directory / "prometheus.yml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.log_path = directory / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def __enter__(self) -> Self:
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={self.config_path}",
                    f"--storage.tsdb.path={self.directory / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1d",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.process.returncode}:\n{self.log}")
            try:
                if httpx.get(self.url + "/-/ready", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"prometheus was not ready within 60 s:\n{self.log}")
            time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def _get(self, path: str, **params: Any) -> Any:
        response = httpx.get(self.url + path, params=params, timeout=30)
        body = response.json()
        if response.status_code != 200 or body.get("status") != "success":
            raise AssertionError(f"{path} {params}: {response.status_code} {body}")
        return body["data"]

    def query(self, expr: str, *, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's result (a vector: each with `metric` and `value` [time, "text"])."""
        data = self._get("/api/v1/query", query=expr, **({} if at is None else {"time": at}))
        result = data["result"]
        return result if data["resultType"] == "vector" else [{"metric": {}, "value": result}]

    def query_range(self, expr: str, *, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """A range query's result (a matrix: each with `metric` and `values` [[time, "text"], ...])."""
        return list(self._get("/api/v1/query_range", query=expr, start=start, end=end, step=step)["result"])

    def value(self, expr: str) -> float:
        """The one value an instant query gives (a scalar, or a vector of one); NaN for an empty vector."""
        result = self.query(expr)
        if not result:
            return float("nan")
        assert len(result) == 1, (expr, result)
        return float(result[0]["value"][1])

    def by(self, expr: str, *labels: str) -> dict[tuple[str, ...], float]:
        """An instant query's values by the values of `labels`."""
        return {tuple(r["metric"].get(k, "") for k in labels): float(r["value"][1]) for r in self.query(expr)}

    def targets(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/targets")["activeTargets"])

    def rules(self) -> list[dict[str, Any]]:
        return [rule for group in self._get("/api/v1/rules")["groups"] for rule in group["rules"]]

    def wait_scraped(self, *, after: float, timeout: float = 30.0) -> None:
        """Wait until every target was scraped successfully by a scrape that began after `after` (epoch
        seconds): what it read then holds every request answered before `after`."""
        deadline = time.monotonic() + timeout
        while True:
            targets = self.targets()
            if targets and all(
                t["health"] == "up" and datetime.fromisoformat(t["lastScrape"]).timestamp() > after for t in targets
            ):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"no fresh successful scrape of every target within {timeout} s: {targets}")
            time.sleep(0.2)


DASHBOARD = Path(__file__).resolve().parents[1] / "deploy" / "observability" / "grafana-dashboard.json"


@dataclass(frozen=True)
class PanelQuery:
    """One query of one panel of the Grafana dashboard."""

    panel: str
    """The panel's title."""
    kind: str
    """The panel's type: timeseries, bargauge, table."""
    expr: str
    """PromQL with Grafana's variables in it (`$instance`, `$__rate_interval`, `$__range`)."""
    legend: str
    instant: bool


def dashboard_queries(path: Path = DASHBOARD) -> list[PanelQuery]:
    """Every query of every panel (rows aside), in the dashboard's order."""
    dashboard = json.loads(path.read_text())
    return [
        PanelQuery(
            panel=panel["title"],
            kind=panel["type"],
            expr=target["expr"],
            legend=target.get("legendFormat", ""),
            instant=bool(target.get("instant")),
        )
        for panel in dashboard["panels"]
        if panel["type"] != "row"
        for target in panel["targets"]
    ]


def grafana_expr(expr: str, *, rate_interval: str, range_: str, instance: str = ".*") -> str:
    """`expr` as Grafana sends it: its variables replaced (every replica unless `instance` says otherwise)."""
    return expr.replace("$__rate_interval", rate_interval).replace("$__range", range_).replace("$instance", instance)
