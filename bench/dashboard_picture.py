"""The picture of the Grafana dashboard in docs/observability.md, drawn from a real run.

It runs `manage.py serve --workers 2` on the SGLang stand-in (storage on, in a fresh SQLite file) with limits
small enough to be reached, Debian's Prometheus scraping it every second with the alert rules loaded, and drives
a few hundred requests of every kind through it: System One and Decisions requests on varied texts, a few on
the WebSocket stream, invalid ones (a body that is not JSON, a model not served, a classifier that does not
exist), a burst past the per-key in-flight limit and the process's admission limit (429s and 529s), a worker
killed (replaced), and the backend stopped for a while (503s; the backend down). Then it asks Prometheus, over
its HTTP API, for every query of every panel of deploy/observability/grafana-dashboard.json over the run (with
Grafana's variables filled in: every replica, rates over 15 s), draws the panels where the dashboard places
them with the vendored uPlot (static/vendor/uplot) in Debian's headless Chromium, and writes the PNG.

    .venv/bin/python bench/dashboard_picture.py                       # docs/observability-dashboard.png
    .venv/bin/python bench/dashboard_picture.py --out /tmp/d.png --seconds 60

Needs `prometheus` (apt-get install --no-install-recommends prometheus) and `/usr/bin/chromium`
(scripts/test.sh installs both).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

import django  # noqa: E402

django.setup()

from bench.workloads import WORKLOADS, decisions_body_of  # noqa: E402
from fake_sglang import FakeSGLang  # noqa: E402
from testbed.ports import free_port  # noqa: E402
from testbed.prometheus import DASHBOARD, PrometheusServer, dashboard_queries, grafana_expr  # noqa: E402
from testbed.qwen3 import qwen3_dir  # noqa: E402

OUT = ROOT / "docs" / "observability-dashboard.png"
UPLOT = ROOT / "static" / "vendor" / "uplot" / "1.6.32"
CHROMIUM = "/usr/bin/chromium"
RULES = ROOT / "deploy" / "observability" / "alerts.yml"
README_REQUEST = WORKLOADS["R3"]
DECISIONS_REQUEST = decisions_body_of(README_REQUEST)
RATE_WINDOW = "15s"
STEP = 2.0
JSON = {"Content-Type": "application/json"}

TEXTS = [
    "Hi, I was charged twice for order #4412 and still have no refund. Please fix this today.",
    "The parcel arrived a week late and the box was crushed; the blender inside works fine though.",
    "Can I change the delivery address of my order? I moved last week.",
    "Your app logs me out every five minutes since the last update. Very annoying.",
    "Thanks for the quick help yesterday, the replacement headphones work perfectly.",
    "I want to cancel my subscription and get the remaining months refunded.",
    "The invoice shows VAT twice. Our accounting team needs a corrected one by Friday.",
    "Is the blue version of the jacket coming back in stock in size M?",
]


def serve_start(*, port: int, fake_url: str, directory: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENJEV_")}
    env |= {
        "PYTHONPATH": str(ROOT),
        "OPENJEV_TOKENIZER": str(qwen3_dir()),
        "OPENJEV_SECRET_KEY": "dashboard-picture-" + "x" * 40,
        "OPENJEV_DATABASE_URL": f"sqlite:///{directory / 'db.sqlite3'}",
        "OPENJEV_STORE_EVALUATIONS": "metadata",
        "OPENJEV_REFUSAL_LABEL_MASS": "0.1",  # the stand-in's labels are thin: some answers become refusals
        # Clients told apart by address (no keys), which the load names in X-Forwarded-For as a balancer would.
        "OPENJEV_TRUSTED_PROXIES": "127.0.0.1",
        "OPENJEV_KEY_CONCURRENCY": "3",  # per client, per process: one noisy client passes it (429)
        "OPENJEV_MAX_CONCURRENT_REQUESTS": "4",  # per process: a crowd of clients fills it (529)
    }
    command = [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--connect", fake_url, "--workers", "2", "--migrate"]
    log = (directory / "serve.log").open("wb")
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def both_workers_ready(url: str, timeout: float = 180) -> list[int]:
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < 2:
        if time.monotonic() > deadline:
            raise RuntimeError(f"serve's two workers did not answer within {timeout} s")
        try:
            response = httpx.get(url + "/health", timeout=5)
            if response.status_code == 200:
                seen.add(response.json()["worker_pid"])
                continue
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return sorted(seen)


def systemone_body(rng: random.Random) -> dict[str, Any]:
    return {**README_REQUEST, "state": rng.choice(TEXTS) + f" (ticket {rng.randrange(10**6)})"}


def decisions_body(rng: random.Random) -> dict[str, Any]:
    return {**DECISIONS_REQUEST, "input": rng.choice(TEXTS) + f" (ticket {rng.randrange(10**6)})"}


async def one_request(client: httpx.AsyncClient, rng: random.Random, tally: dict[str, int], *, client_ip: str) -> None:
    """One request of the mix from `client_ip`: mostly System One and Decisions, one in ten invalid."""
    roll = rng.random()
    sent = {"X-Forwarded-For": client_ip}
    try:
        if roll < 0.55:
            response = await client.post("/v1/systemone", json=systemone_body(rng), headers=sent)
        elif roll < 0.90:
            response = await client.post("/v1/decisions", json=decisions_body(rng), headers=sent)
        elif roll < 0.94:
            response = await client.post("/v1/systemone", content=b'{"model": ', headers=JSON | sent)
        elif roll < 0.97:
            body = {**DECISIONS_REQUEST, "model": "not-served"}
            response = await client.post("/v1/decisions", json=body, headers=sent)
        else:
            body = {"model": "no-such-classifier", "input": "hello"}
            response = await client.post("/v1/classify", json=body, headers=sent)
        key = str(response.status_code)
    except httpx.HTTPError as exc:
        key = type(exc).__name__
    tally[key] = tally.get(key, 0) + 1


async def stream_some(url: str, count: int, rng: random.Random, tally: dict[str, int]) -> None:
    from websockets.asyncio.client import connect

    async with connect(url.replace("http://", "ws://") + "/v1/systemone/stream") as socket:
        for first in range(0, count, 3):  # 3 in flight: the per-client limit
            batch = range(first, min(first + 3, count))
            for i in batch:
                await socket.send(json.dumps({"id": i, **systemone_body(rng)}))
            ended = 0
            while ended < len(batch):
                message = json.loads(await socket.recv())
                if message["type"] in ("done", "error"):
                    ended += 1
                    tally[f"stream {message['type']}"] = tally.get(f"stream {message['type']}", 0) + 1


async def load(*, url: str, seconds: float, fake: FakeSGLang, serve: subprocess.Popen[bytes]) -> dict[str, int]:
    """The run: steady traffic at 3 in flight, with events at fixed shares of it (see the module)."""
    rng = random.Random(33)
    tally: dict[str, int] = {}
    start = time.monotonic()
    events = {
        "stream": 0.10,
        "noisy client": 0.22,
        "crowd": 0.34,
        "kill": 0.48,
        "backend down": 0.62,
        "backend up": 0.72,
        "stream again": 0.80,
    }
    done: set[str] = set()
    limits = httpx.Limits(max_connections=40, max_keepalive_connections=8)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def steady(client_ip: str) -> None:
            while time.monotonic() - start < seconds:
                await one_request(client, rng, tally, client_ip=client_ip)
                await asyncio.sleep(rng.uniform(0.05, 0.25))

        async def scheduled() -> None:
            while time.monotonic() - start < seconds:
                share = (time.monotonic() - start) / seconds
                fake.delay = 0.004 + 0.02 * rng.random() if share < 0.85 else 0.06  # slower near the end
                for name, at in events.items():
                    if name in done or share < at:
                        continue
                    done.add(name)
                    if name.startswith("stream"):
                        await stream_some(url, 12, rng, tally)
                    elif name == "noisy client":  # one client, 40 at once: its in-flight limit refuses most
                        fake.delay = 0.08
                        await asyncio.gather(
                            *(one_request(client, rng, tally, client_ip="10.0.1.1") for _ in range(40))
                        )
                    elif name == "crowd":  # 40 clients at once: each within its limits, the processes full
                        fake.delay = 0.08
                        crowd = (one_request(client, rng, tally, client_ip=f"10.0.2.{i}") for i in range(40))
                        await asyncio.gather(*crowd)
                    elif name == "kill":
                        workers = [int(p) for p in subprocess.check_output(["pgrep", "-P", str(serve.pid)]).split()]
                        os.kill(min(workers), signal.SIGKILL)  # as the OOM killer would
                    elif name == "backend down":
                        fake.stop()
                    elif name == "backend up":
                        fake.revive()
                await asyncio.sleep(0.5)

        await asyncio.gather(*(steady(f"10.0.0.{i}") for i in range(1, 4)), scheduled())
    return tally


def panel_data(prometheus: PrometheusServer, *, start: float, end: float) -> list[dict[str, Any]]:
    """Every panel with what its queries return over [start, end]: series of (time, value) or, for instant
    panels, one value per series."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = {(q.panel, q.expr): q for q in dashboard_queries()}
    duration = f"{int(end - start)}s"
    panels = []
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            panels.append({"type": "row", "title": panel["title"], "grid": panel["gridPos"]})
            continue
        series = []
        for target in panel["targets"]:
            query = queries[(panel["title"], target["expr"])]
            expr = grafana_expr(query.expr, rate_interval=RATE_WINDOW, range_=duration)
            if query.instant:
                for found in prometheus.query(expr, at=end):
                    series.append({"metric": found["metric"], "legend": query.legend, "value": found["value"][1]})
            else:
                for found in prometheus.query_range(expr, start=start, end=end, step=STEP):
                    series.append({"metric": found["metric"], "legend": query.legend, "values": found["values"]})
        panels.append(
            {
                "type": panel["type"],
                "title": panel["title"],
                "grid": panel["gridPos"],
                "unit": panel["fieldConfig"]["defaults"].get("unit", "short"),
                "series": series,
            }
        )
    return panels


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><style>__CSS__
body { margin: 0; background: #111217; color: #ccccdc; font: 12px/1.3 Inter, "DejaVu Sans", sans-serif; }
#head { padding: 10px 14px 4px; font-size: 15px; } #head small { color: #8e8e9e; font-size: 11px; }
#board { position: relative; margin: 0 6px; }
.panel { position: absolute; box-sizing: border-box; background: #181b1f; border: 1px solid #2a2d33;
  border-radius: 3px; padding: 4px 6px; overflow: hidden; }
.panel h3 { margin: 0 0 2px; font-size: 12px; font-weight: 500; color: #d8d9da; white-space: nowrap; }
.row { position: absolute; font-size: 13px; font-weight: 600; color: #d8d9da; padding-top: 6px; }
.nodata { color: #6e6e7e; position: absolute; top: 45%; width: 100%; text-align: center; }
.legend { font-size: 10px; line-height: 13px; color: #b4b4c4; padding: 2px 0 0 58px; }
.legend span { margin-right: 10px; white-space: nowrap; display: inline-block; }
.legend i { display: inline-block; width: 10px; height: 3px; margin: 0 4px 2px 0; vertical-align: middle; }
table.build { border-collapse: collapse; width: 100%; margin-top: 6px; font-size: 11px; }
table.build th, table.build td { border-bottom: 1px solid #2a2d33; text-align: left; padding: 3px 4px; }
</style><script>__UPLOT__</script></head>
<body><div id="head">__TITLE__<br><small>__SUBTITLE__</small></div><div id="board"></div>
<script>
const PANELS = __PANELS__;
const WIDTH = __WIDTH__, UNIT_H = 32, COL = WIDTH / 24;
const COLORS = ["#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9", "#fade2a",
  "#37872d", "#c4162a", "#1f60c4", "#8f3bb8", "#e0b400", "#fa6400", "#96d98d", "#ffb357"];
const board = document.getElementById("board");
function legendOf(s) { return (s.legend || "").replace(/\\{\\{(\\w+)\\}\\}/g, (_, k) => s.metric[k] || ""); }
function fmt(unit, v) {
  if (v == null || !isFinite(v)) return "";
  if (unit === "percentunit") return (v * 100).toFixed(v < 0.1 ? 1 : 0) + "%";
  if (unit === "s") return v < 1 ? (v * 1000).toFixed(v < 0.01 ? 1 : 0) + " ms" : v.toFixed(1) + " s";
  if (unit === "reqps") return (v < 10 ? v.toFixed(1) : v.toFixed(0)) + "/s";
  return Math.abs(v) >= 1000 ? (v / 1000).toFixed(1) + "k" : (Number.isInteger(v) ? v : v.toFixed(2)) + "";
}
let maxBottom = 0;
for (const p of PANELS) {
  const g = p.grid, left = g.x * COL, top = g.y * UNIT_H, width = g.w * COL, height = g.h * UNIT_H;
  maxBottom = Math.max(maxBottom, top + height);
  if (p.type === "row") {
    const r = document.createElement("div"); r.className = "row"; r.textContent = p.title;
    Object.assign(r.style, {left: left + 4 + "px", top: top + "px"}); board.appendChild(r); continue;
  }
  const el = document.createElement("div"); el.className = "panel";
  Object.assign(el.style, {left: left + 3 + "px", top: top + 3 + "px", width: width - 6 + "px",
    height: height - 6 + "px"});
  el.innerHTML = "<h3></h3>"; el.querySelector("h3").textContent = p.title; board.appendChild(el);
  const inner = {w: width - 20, h: height - 30};
  const live = p.series.filter(s => (s.values || []).some(([, v]) => isFinite(parseFloat(v))) ||
    (s.value != null && isFinite(parseFloat(s.value))));
  if (!live.length) {
    const n = document.createElement("div"); n.className = "nodata"; n.textContent = "No data"; el.appendChild(n);
    continue;
  }
  if (p.type === "table") {
    const keys = Object.keys(live[0].metric).filter(k => !["__name__", "job"].includes(k)).sort();
    const t = document.createElement("table"); t.className = "build";
    t.innerHTML = "<tr>" + keys.map(k => "<th>" + k + "</th>").join("") + "</tr>" + live.map(s => "<tr>" +
      keys.map(k => "<td>" + (s.metric[k] || "") + "</td>").join("") + "</tr>").join("");
    el.appendChild(t); continue;
  }
  if (p.type === "bargauge") {  // cumulative buckets -> counts per bucket
    const rows = live.map(s => [s.metric.le === "+Inf" ? Infinity : parseFloat(s.metric.le), parseFloat(s.value)])
      .sort((a, b) => a[0] - b[0]);
    const counts = rows.map(([, v], i) => v - (i ? rows[i - 1][1] : 0));
    const xs = rows.map((_, i) => i), labels = rows.map(([le]) => le === Infinity ? "+Inf" : "≤" + le);
    new uPlot({width: inner.w, height: inner.h, legend: {show: false}, cursor: {show: false},
      scales: {x: {time: false, range: [-0.6, rows.length - 0.4]}, y: {range: (u, lo, hi) => [0, hi * 1.1]}},
      axes: [{stroke: "#8e8e9e", grid: {show: false}, values: (u, vals) => vals.map(v => labels[v] || ""),
              splits: () => xs, size: 24},
             {stroke: "#8e8e9e", grid: {stroke: "#2a2d33"}, size: 50, values: (u, vals) => vals.map(v => fmt("", v))}],
      series: [{}, {label: "requests", fill: "#5794f2aa", stroke: "#5794f2",
        paths: uPlot.paths.bars({size: [0.7, 60]}), points: {show: false}}]},
      [xs, counts.map(Math.round)], el);
    continue;
  }
  const times = [...new Set(live.flatMap(s => s.values.map(([t]) => t)))].sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  const data = [times];
  for (const s of live) {
    const ys = new Array(times.length).fill(null);
    for (const [t, v] of s.values) { const f = parseFloat(v); ys[index.get(t)] = isFinite(f) ? f : null; }
    data.push(ys);
  }
  const legend = document.createElement("div"); legend.className = "legend";
  legend.innerHTML = live.map((s, i) => '<span><i style="background:' + COLORS[i % COLORS.length] + '"></i>' +
    legendOf(s) + "</span>").join("");
  el.appendChild(legend);
  const chart = document.createElement("div"); el.insertBefore(chart, legend);
  new uPlot({width: inner.w, height: inner.h - legend.offsetHeight, legend: {show: false},
    cursor: {show: false}, scales: {y: {range: (u, lo, hi) => [0, hi > 0 ? hi * 1.08 : 1]}},
    axes: [{stroke: "#8e8e9e", grid: {stroke: "#2a2d33"}, size: 28, space: 80,
            values: (u, vals) => vals.map(v => new Date(v * 1000).toISOString().slice(11, 19))},
           {stroke: "#8e8e9e", grid: {stroke: "#2a2d33"}, size: 58,
            values: (u, vals) => vals.map(v => fmt(p.unit, v))}],
    series: [{}, ...live.map((s, i) => ({label: legendOf(s), stroke: COLORS[i % COLORS.length], width: 1.2,
      points: {show: false}, spanGaps: false}))]}, data, chart);
}
board.style.height = maxBottom + 8 + "px";
window.drawn = true;
</script></body></html>
"""


def page_html(*, panels: list[dict[str, Any]], title: str, subtitle: str, width: int) -> str:
    return (
        PAGE.replace("__CSS__", (UPLOT / "uPlot.min.css").read_text())
        .replace("__UPLOT__", (UPLOT / "uPlot.iife.min.js").read_text())
        .replace("__TITLE__", title)
        .replace("__SUBTITLE__", subtitle)
        .replace("__WIDTH__", str(width))
        .replace("__PANELS__", json.dumps(panels))
    )


def draw(*, html: str, out: Path, width: int) -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="openjev-picture-") as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            user_data_dir=profile,
            executable_path=CHROMIUM,
            headless=True,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
            viewport={"width": width + 12, "height": 800},
        )
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.set_content(html)
        page.wait_for_function("window.drawn === true", timeout=30_000)
        if errors:
            raise RuntimeError(f"the page failed: {errors}")
        page.screenshot(path=str(out), full_page=True)
        context.close()


def commit() -> str:
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT, help=f"the PNG to write (default {OUT.relative_to(ROOT)})")
    parser.add_argument("--seconds", type=float, default=150, help="how long the load runs (default 150)")
    parser.add_argument("--width", type=int, default=1400, help="the picture's width in pixels (default 1400)")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install chromium (scripts/test.sh's browser_ensure does)")

    with tempfile.TemporaryDirectory(prefix="openjev-dashboard-") as scratch:
        directory = Path(scratch)
        with FakeSGLang(served_model_name="Qwen/Qwen3.6-35B-A3B", keep_records=False) as fake:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            serve = serve_start(port=port, fake_url=fake.url, directory=directory)
            try:
                print(f"serve --workers 2: workers {both_workers_ready(url)} on {url}", flush=True)
                with PrometheusServer(
                    directory=directory / "prometheus", targets=[f"127.0.0.1:{port}"], rule_files=[RULES]
                ) as prometheus:
                    prometheus.wait_scraped(after=time.time())
                    time.sleep(5)
                    start = time.time()
                    tally = asyncio.run(load(url=url, seconds=args.seconds, fake=fake, serve=serve))
                    time.sleep(5)
                    end = time.time()
                    prometheus.wait_scraped(after=end)
                    print("answers:", json.dumps(dict(sorted(tally.items()))), flush=True)
                    scraped = prometheus.by("sum by (status) (openjev_requests_total)", "status")
                    print("Prometheus counted:", {k[0]: v for k, v in sorted(scraped.items())}, flush=True)
                    panels = panel_data(prometheus, start=start - 10, end=end)
            finally:
                serve.send_signal(signal.SIGTERM)
                try:
                    serve.wait(60)
                except subprocess.TimeoutExpired:
                    serve.kill()
    drawn = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    title = "OpenJev — deploy/observability/grafana-dashboard.json, every panel's PromQL"
    subtitle = (
        f"Drawn {drawn} at commit {commit()} by bench/dashboard_picture.py: serve --workers 2 on the SGLang "
        f"stand-in, {args.seconds:.0f} s of load (bursts past the limits, a worker killed, the backend stopped), "
        f"scraped every second by Prometheus, rates over {RATE_WINDOW}"
    )
    html = page_html(panels=panels, title=title, subtitle=subtitle, width=args.width)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    draw(html=html, out=args.out, width=args.width)
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
