"""Every Prometheus metric the service exports, in one place: names, help, labels and buckets.

`GET /metrics` (`api/metrics.py`) shows them in Prometheus' text format, summed over every worker of
`serve --workers N`: the kernel hands each scrape to any worker (SO_REUSEPORT), so each worker writes its values
to files in the directory `PROMETHEUS_MULTIPROC_DIR` names (prometheus_client's multiprocess mode; the pool makes
the directory and names it to its workers) and any worker reads all of them; a dead worker's live gauges are
dropped from those files when the pool reaps it (`metrics_process_dead`). A process outside a pool (a plain
`serve`, `runserver`, the tests) keeps its values in memory.

What a scrape reads that no request writes (the build, the pool's workers) is collected when the scrape asks
(`ScrapeCollector`). Label values are bounded sets chosen by the code (routes, statuses, phases, kinds), never a
client's value; a key's public label (`oj_<prefix>`) appears only in the per-key series an operator turns on
(`OPENJEV_METRICS_PER_KEY`), and never a secret. No Django here.

Names follow Prometheus' rules: the `openjev_` prefix, base units (seconds), `_total` for counters.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import REGISTRY, Collector

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's own variable: set by `serve --workers N` for its workers (not an operator setting)."""

LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
"""Seconds: from a cached answer on a fast backend to the request timeout (120 s)."""
QUESTION_BUCKETS = (1, 2, 3, 5, 8, 16, 32, 64, 128, 256, 400)
MASS_BUCKETS = (0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)
"""Label mass near 1 is a healthy prompt; the alert watches the share under 0.5."""
BATCH_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)

PHASES = ("admission", "parse", "validate", "prepare", "prefill", "branches", "render", "store")

requests_total = Counter(
    "openjev_requests_total",
    "Evaluating requests answered, by API (each wire format's name, and stream) and HTTP status.",
    ["api", "status"],
)
request_duration = Histogram(
    "openjev_request_duration_seconds",
    "Seconds from an evaluating request's arrival to its answer, by API.",
    ["api"],
    buckets=LATENCY_BUCKETS,
)
phase_duration = Histogram(
    "openjev_phase_duration_seconds",
    "Seconds one phase of an evaluating request took: admission (the per-key limits), parse (the JSON), validate "
    "(the wire format), prepare (prompt and tokens), prefill (the shared prefix), branches (every question), "
    "render (the answer's JSON), store (the wait for the spool's sync to disk; none at storage off).",
    ["api", "phase"],
    buckets=LATENCY_BUCKETS,
)
evaluations_in_flight = Gauge(
    "openjev_evaluations_in_flight",
    "Evaluations being parsed, run or stored right now.",
    multiprocess_mode="livesum",
)
questions_per_request = Histogram(
    "openjev_questions_per_request",
    "Questions in each evaluated request, by API.",
    ["api"],
    buckets=QUESTION_BUCKETS,
)
answers_total = Counter("openjev_answers_total", "Answers served, by API and question type.", ["api", "type"])
refusals_total = Counter(
    "openjev_refusals_total", "Answers served as refusals (label mass under OPENJEV_REFUSAL_LABEL_MASS).", ["api"]
)
label_mass = Histogram(
    "openjev_label_mass",
    "The lowest label mass of each answered request's answers (near 1: the model answers with a label).",
    ["api"],
    buckets=MASS_BUCKETS,
)
input_tokens_total = Counter(
    "openjev_input_tokens_total", "Prompt tokens the backend read for answered requests, by API.", ["api"]
)
cached_tokens_total = Counter(
    "openjev_cached_tokens_total", "Of those, tokens the backend's prefix cache served, by API.", ["api"]
)
backend_generations_total = Counter(
    "openjev_backend_generations_total", "Backend generations run: warm-ups, branches and content-free priors."
)
backend_errors_total = Counter(
    "openjev_backend_errors_total",
    "Evaluations the backend failed, by kind: unavailable (503), failed (502), timeout (504).",
    ["kind"],
)
backend_up = Gauge(
    "openjev_backend_up",
    "1 when the backend answered its last health check (each scrape's, and each `GET /health`'s), 0 when it did not.",
    multiprocess_mode="livemostrecent",
)
rate_limited_total = Counter(
    "openjev_rate_limited_total",
    "429s by the limit that refused: requests, tokens, inflight, paused, too_large, wrong_keys, store_down.",
    ["limit"],
)
overloaded_total = Counter(
    "openjev_overloaded_total",
    "Requests refused because this process was full (529, or 4529 on a WebSocket), by what was full: "
    "evaluations (OPENJEV_MAX_CONCURRENT_REQUESTS), body_lane (large bodies waiting to be read), websockets.",
    ["reason"],
)
body_lane_wait = Histogram(
    "openjev_body_lane_wait_seconds",
    "Seconds a large body waited for its turn in the body lane, from its arrival to the start of its reading "
    "(decoded and parsed by its format in that one turn); each turn of the lane counts once.",
    buckets=LATENCY_BUCKETS,
)
ratelimit_store_failures_total = Counter(
    "openjev_ratelimit_store_failures_total",
    "Times the per-key limits' store (Redis) failed or timed out, by the failure policy applied (open, closed).",
    ["policy"],
)
storage_queue_depth = Gauge(
    "openjev_storage_queue_depth",
    "Jobs waiting for the storage writer when it last took a batch.",
    multiprocess_mode="livesum",
)
storage_writes_total = Counter(
    "openjev_storage_writes_total",
    "Records handed to storage, by sink (evaluations: each one's row and its key's usage, from the spool; "
    "key_usage: at storage level off, the evaluations whose key usage was tallied in memory; api_keys: keys' last "
    "use, from the writer) and outcome: written; failed (the database refused them); dropped (the "
    "writer's queue was full); unstored (answered while the spool could not take it, "
    "OPENJEV_SPOOL_FULL=answer). Failed, dropped and unstored records are lost.",
    ["sink", "outcome"],
)
spool_evaluations = Gauge(
    "openjev_spool_evaluations",
    "Answered evaluations durable in the local spool on disk and not yet in the database (each worker's own spool).",
    multiprocess_mode="livesum",
)
spool_bytes = Gauge(
    "openjev_spool_bytes",
    "Bytes those evaluations take in the spool (OPENJEV_SPOOL_MAX_BYTES is each worker's limit).",
    multiprocess_mode="livesum",
)
spool_oldest_timestamp = Gauge(
    "openjev_spool_oldest_timestamp_seconds",
    "Unix time at which the oldest evaluation still waiting in a spool was answered (+Inf when none waits); "
    "its age is time() minus this.",
    multiprocess_mode="livemin",
)
cache_updated_timestamp = Gauge(
    "openjev_cache_updated_timestamp_seconds",
    "Unix time at which the oldest value a request-path cache serves was read from the database (+Inf while it "
    "holds none), by cache (api_keys, calibrations, classifiers, batches); its age is time() minus this.",
    ["cache"],
    multiprocess_mode="livemin",
)
storage_batch_duration = Histogram(
    "openjev_storage_batch_duration_seconds",
    "Seconds storage took to write one batch (of spooled evaluations, of tallied key usage, of keys' last use).",
    buckets=BATCH_BUCKETS,
)
key_requests_total = Counter(
    "openjev_key_requests_total",
    "Evaluating requests by API key label (oj_<prefix>, env, or empty without a key), API and status; only with "
    "OPENJEV_METRICS_PER_KEY=on.",
    ["key", "api", "status"],
)
key_input_tokens_total = Counter(
    "openjev_key_input_tokens_total",
    "Prompt tokens read by API key label; only with OPENJEV_METRICS_PER_KEY=on.",
    ["key"],
)

LIMITS = ("requests", "tokens", "inflight", "paused", "too_large", "wrong_keys", "store_down")
OVERLOAD_REASONS = ("evaluations", "body_lane", "websockets")
STORE_POLICIES = ("open", "closed")
BACKEND_ERROR_KINDS = ("unavailable", "failed", "timeout")
STORAGE_SINKS = ("evaluations", "key_usage", "api_keys")
STORAGE_OUTCOMES = ("written", "failed", "dropped", "unstored")


def _series_at_zero() -> None:
    """The series of every label value the code gives the counters that refusals, failures and losses are read
    from, at 0 from the start: Prometheus takes a series' first sample as its baseline, so a counter that first
    appeared at 5 would show no increase, and the first drops, store failures or 429s would fire no alert."""
    for limit in LIMITS:
        rate_limited_total.labels(limit)
    for reason in OVERLOAD_REASONS:
        overloaded_total.labels(reason)
    for policy in STORE_POLICIES:
        ratelimit_store_failures_total.labels(policy)
    for kind in BACKEND_ERROR_KINDS:
        backend_errors_total.labels(kind)
    for sink in STORAGE_SINKS:
        for outcome in STORAGE_OUTCOMES:
            storage_writes_total.labels(sink, outcome)


_series_at_zero()


class ScrapeCollector(Collector):
    """What a scrape reads from outside the request path: the build and the pool's workers (its state file)."""

    def __init__(
        self,
        *,
        build: dict[str, str],
        workers: Callable[[], tuple[int, int, int] | None],
        batches: Callable[[], tuple[dict[str, int], float] | None] | None = None,
    ) -> None:
        self._build = build
        self._workers = workers
        """(up, configured, replaced) of the pool, or None when its state cannot be read."""
        self._batches = batches
        """(batch lines by state: waiting, completed, failed; seconds the oldest batch with lines waiting has
        waited), read from the database (batch workers run in processes of their own), or None when it cannot say."""

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "openjev_build_info", "The running build: version, backend, served model.", labels=sorted(self._build)
        )
        info.add_metric([self._build[k] for k in sorted(self._build)], 1)
        yield info
        queued = self._batches() if self._batches is not None else None
        if queued is not None:
            lines = GaugeMetricFamily(
                "openjev_batch_lines",
                "Lines of stored batches by state: waiting (of active batches, not answered yet), completed (a 2xx), "
                "failed (any other status); a pruned batch's lines leave the counts.",
                labels=["state"],
            )
            for line_state, count in sorted(queued[0].items()):
                lines.add_metric([line_state], count)
            yield lines
            yield GaugeMetricFamily(
                "openjev_batch_oldest_queued_seconds",
                "Seconds since the oldest active batch with lines still to answer was created (0: none waits).",
                value=queued[1],
            )
        state = self._workers()
        if state is None:
            return
        up, configured, replaced = state
        yield GaugeMetricFamily("openjev_workers_up", "API worker processes running.", value=up)
        yield GaugeMetricFamily(
            "openjev_workers_configured", "API worker processes configured (--workers).", value=configured
        )
        yield CounterMetricFamily(
            "openjev_workers_replaced", "API workers started in place of dead ones since serve started.", value=replaced
        )


def metrics_multiprocess() -> Path | None:
    """The directory the workers' values live in, when this process is a pool's worker."""
    directory = os.environ.get(MULTIPROCESS_ENV)
    return Path(directory) if directory else None


def metrics_exposition(*, scrape: ScrapeCollector) -> bytes:
    """Every metric in Prometheus' text format: summed over the pool's workers when there is a pool."""
    directory = metrics_multiprocess()
    scraped = CollectorRegistry(auto_describe=False)
    scraped.register(scrape)
    if directory is None:
        return generate_latest(REGISTRY) + generate_latest(scraped)
    workers = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(workers, path=str(directory))
    return generate_latest(workers) + generate_latest(scraped)


def metrics_process_dead(*, pid: int, directory: Path) -> None:
    """Drop a dead worker's live gauges (its in-flight count, its queue depth) from the pool's files; its counters
    and histograms stay, so totals never go back."""
    mark_process_dead(pid, str(directory))
