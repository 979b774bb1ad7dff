"""The smoke test of a deployed endpoint: does a fresh server answer real questions correctly?

Used by `manage.py smoke URL` and by the Modal app's `modal run` entry (which imports this module
without Django: it needs httpx only). It waits for the server to come up (502/503/504 and connection
errors are "still starting" until `timeout`), then checks, on a chat-transcript state:

- all three answer types, with their documented shapes, headers and usage;
- the semantics a working model cannot miss: a refund request is a refund, billing beats technical;
- a choice with the server's maximum number of options (`/v1/limits`), the heaviest single branch;
- that one option more is refused with 422 before any work.

It prints one line per check and writes `smoke-result.json` (startup wait, the container's own
startup seconds from `/health`, latency, `Server-Timing`, prefix and cached tokens, the responses),
passing or not, so a failed deployment leaves its evidence behind.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

RETRY_STATUSES = frozenset({502, 503, 504})
KEY_HINT = " (the server wants an API key: set OPENJEV_API_KEY or --api-key)"
STATE = [
    {"role": "system", "content": "You are the support assistant of an online shop."},
    {"role": "user", "content": "Hi, I was charged twice for my March invoice (order #4471)."},
    {"role": "assistant", "content": "Sorry about that! What would you like us to do?"},
    {
        "role": "user",
        "content": "Refund the duplicate charge to my card. I want my money back today, "
        "this is the second time it happens.",
    },
]
# Billing is not first on purpose: the bundled 0.5B model under-weights the label A, and the check is
# about reading the conversation, not about the first option's position.
TEAMS = {
    "Technical": "Bugs, errors, outages, login problems",
    "Billing": "Payments, invoices, charges and refunds",
    "Sales": "Pricing, plans and upgrades",
}
TYPES_QUESTIONS: dict[str, Any] = {
    "refund": {"type": "noul", "instructions": "Is the customer asking for a refund (their money back)?"},
    "team": {"type": "choice", "instructions": "Which team should handle this conversation?", "criteria": TEAMS},
    "anger": {
        "type": "score",
        "instructions": "How frustrated is the customer?",
        "criteria": ["Calm", "Annoyed", "Furious"],
    },
}


class SmokeFailed(Exception):
    """At least one check failed; `report` is what was written to the result file."""

    def __init__(self, message: str, *, report: dict[str, Any]) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class Exchange:
    """One request as the report shows it."""

    status: int | None
    latency_ms: float | None
    server_timing: str | None = None
    prefix_tokens: int | None = None
    cached_tokens: int | None = None
    """None when the server does not report it (the header is absent): never a guessed 0."""
    request_id: str | None = None
    response: Any = None
    error: str | None = None


@dataclass
class _Run:
    checks: list[Check] = field(default_factory=list)
    say: Callable[[str], None] = print

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.checks.append(Check(name, bool(ok), detail))
        self.say(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
        return bool(ok)


def choice_criteria(*, count: int) -> dict[str, str]:
    """`count` options, keys `opt-000`..., short distinct descriptions (the prompt grows ~6 tokens each)."""
    return {f"opt-{i:03d}": f"Department {i}" for i in range(count)}


def _int_header(headers: httpx.Headers, name: str) -> int | None:
    value = headers.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def startup_wait(
    *, client: httpx.Client, timeout: float, say: Callable[[str], None] = print, interval: float = 2.0
) -> tuple[float, dict[str, Any]]:
    """Poll `/health` until 200: seconds waited and its body. 502/503/504 and connection errors mean
    "still starting" (a load balancer or Modal in front, or the model loading); anything else is a
    wrong URL or a broken server and fails at once."""
    started = time.monotonic()
    deadline = started + timeout
    last = ""
    while True:
        remaining = deadline - time.monotonic()
        try:
            response = client.get("/health", timeout=max(1.0, min(remaining, 300.0)))
            if response.status_code == 200:
                return time.monotonic() - started, _json(response)
            if response.status_code not in RETRY_STATUSES:
                raise SmokeFailed(
                    f"GET /health answered {response.status_code}: {response.text[:300]}", report={"ok": False}
                )
            note = f"HTTP {response.status_code}"
        except httpx.TransportError as exc:
            note = type(exc).__name__
        if note != last:
            say(f"waiting for {client.base_url}: {note}")
            last = note
        if time.monotonic() + interval > deadline:
            raise SmokeFailed(
                f"{client.base_url} did not become healthy within {timeout:.0f} s (last: {note})", report={"ok": False}
            )
        time.sleep(interval)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:2000]


def _post(client: httpx.Client, body: dict[str, Any], timeout: float) -> Exchange:
    start = time.perf_counter()
    try:
        response = client.post("/v1/systemone", json=body, timeout=timeout)
    except httpx.HTTPError as exc:
        return Exchange(status=None, latency_ms=None, error=f"{type(exc).__name__}: {exc}")
    latency = (time.perf_counter() - start) * 1000.0
    headers = response.headers
    return Exchange(
        status=response.status_code,
        latency_ms=round(latency, 2),
        server_timing=headers.get("server-timing"),
        prefix_tokens=_int_header(headers, "x-openjev-prefix-tokens"),
        cached_tokens=_int_header(headers, "x-openjev-cached-tokens"),
        request_id=headers.get("x-typesafe-request-id"),
        response=_json(response),
    )


def _distribution_ok(probabilities: Any, keys: list[str]) -> bool:
    if not isinstance(probabilities, dict) or list(probabilities) != keys:
        return False
    values = list(probabilities.values())
    return (
        all(isinstance(v, int | float) and math.isfinite(v) and 0 <= v <= 1 for v in values)
        and abs(sum(values) - 1.0) < 1e-3
    )


def _unit(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 1


def _headers_check(run: _Run, name: str, exchange: Exchange) -> None:
    timing = exchange.server_timing or ""
    run.check(
        f"{name}: headers",
        bool(exchange.request_id)
        and all(p in timing for p in ("prepare", "prefill", "branches"))
        and isinstance(exchange.prefix_tokens, int)
        and exchange.prefix_tokens > 0,
        f"request id {exchange.request_id}, prefix tokens {exchange.prefix_tokens}, cached tokens "
        f"{exchange.cached_tokens}, Server-Timing {timing!r}",
    )


def _types_checks(run: _Run, exchange: Exchange) -> None:
    body = exchange.response
    if not run.check(
        "types: HTTP 200",
        exchange.status == 200,
        f"{exchange.status} in {exchange.latency_ms} ms" if exchange.status else str(exchange.error),
    ):
        run.check("types: answers", False, f"no answers: {str(body)[:300]}")
        return
    answers = body.get("answers", {}) if isinstance(body, dict) else {}
    run.check("types: answer ids", list(answers) == list(TYPES_QUESTIONS), f"{list(answers)}")
    refund, team, anger = (answers.get(k, {}) for k in TYPES_QUESTIONS)
    run.check("types: noul", refund.get("type") == "noul" and _unit(refund.get("noul")), f"{refund}")
    team_keys = list(TEAMS)
    run.check(
        "types: choice",
        team.get("type") == "choice"
        and team.get("choice") in TEAMS
        and _distribution_ok(team.get("probabilities"), team_keys)
        and _unit(team.get("confidence")),
        f"{team}",
    )
    levels = TYPES_QUESTIONS["anger"]["criteria"]
    score = anger.get("score")
    run.check(
        "types: score",
        anger.get("type") == "score"
        and isinstance(score, int | float)
        and 0 <= score <= len(levels) - 1
        and anger.get("legend") == {str(i): level for i, level in enumerate(levels)}
        and _distribution_ok(anger.get("probabilities"), [str(i) for i in range(len(levels))])
        and _unit(anger.get("confidence")),
        f"{anger}",
    )
    usage = body.get("usage", {}) if isinstance(body, dict) else {}
    run.check(
        "types: usage",
        isinstance(usage.get("input_tokens"), int)
        and usage["input_tokens"] > 0
        and usage.get("output_tokens") == len(TYPES_QUESTIONS) + 1,
        f"{usage}",
    )
    _headers_check(run, "types", exchange)
    noul = refund.get("noul")
    run.check(
        "semantic: a refund request is a refund",
        isinstance(noul, int | float) and noul > 0.5,
        f"P(refund) = {_p(noul)}",
    )
    probabilities = team.get("probabilities") or {}
    billing, technical = probabilities.get("Billing"), probabilities.get("Technical")
    run.check(
        "semantic: billing beats technical",
        isinstance(billing, int | float) and isinstance(technical, int | float) and billing > technical,
        f"P(Billing) = {_p(billing)}, P(Technical) = {_p(technical)}",
    )


def _p(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, int | float) else repr(value)


def _max_choice_checks(run: _Run, exchange: Exchange, count: int) -> None:
    name = f"choice with {count} options (the maximum)"
    if not run.check(
        f"{name}: HTTP 200",
        exchange.status == 200,
        f"{exchange.status} in {exchange.latency_ms} ms" if exchange.status else str(exchange.error),
    ):
        return
    body = exchange.response
    answer = (body.get("answers") or {}).get("department", {}) if isinstance(body, dict) else {}
    keys = list(choice_criteria(count=count))
    run.check(
        f"{name}: answer",
        answer.get("type") == "choice"
        and answer.get("choice") in keys
        and _distribution_ok(answer.get("probabilities"), keys)
        and _unit(answer.get("confidence")),
        f"choice {answer.get('choice')!r}, confidence {answer.get('confidence')}",
    )
    _headers_check(run, "maximum choice", exchange)


def smoke_run(
    *,
    url: str,
    api_key: str | None = None,
    timeout: float = 900.0,
    request_timeout: float = 600.0,
    max_answers: int | None = None,
    output: Path | None = Path("smoke-result.json"),
    say: Callable[[str], None] = print,
    transport: httpx.BaseTransport | None = None,
) -> dict[str, Any]:
    """Run every check against `url`; returns the report, or raises SmokeFailed (report written either way).

    `max_answers` defaults to the server's own `/v1/limits` value; `timeout` bounds the startup wait,
    `request_timeout` each evaluation (a maximum-size choice on a CPU takes a while).
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    run = _Run(say=say)
    report: dict[str, Any] = {"ok": False, "url": url}
    with httpx.Client(
        base_url=url.rstrip("/"),
        headers=headers,
        transport=transport,
        timeout=httpx.Timeout(request_timeout, connect=10.0),
        follow_redirects=False,
    ) as client:
        try:
            waited, health = startup_wait(client=client, timeout=timeout, say=say)
        except SmokeFailed as exc:
            report["error"] = str(exc)
            _report_write(report, output)
            raise SmokeFailed(str(exc), report=report) from None
        report |= {
            "startup_wait_seconds": round(waited, 3),
            "container_startup_seconds": health.get("startup_seconds") if isinstance(health, dict) else None,
            "health": health,
        }
        say(f"healthy after {waited:.1f} s (server startup {report['container_startup_seconds']} s)")
        limits = client.get("/v1/limits")
        models = client.get("/v1/models")
        if limits.status_code != 200 or models.status_code != 200:  # both need the key when auth is on
            hint = KEY_HINT if 401 in (limits.status_code, models.status_code) else ""
            report["error"] = (
                f"/v1/limits answered {limits.status_code}, /v1/models {models.status_code}{hint}: {limits.text[:200]}"
            )
            _report_write(report, output)
            raise SmokeFailed(report["error"], report=report)
        count = max_answers or int(limits.json()["max_answers_per_question"])
        model = models.json()["models"][0]["name"]
        report |= {"model": model, "max_answers": count, "limits": limits.json()}

        types = _post(client, {"model": model, "state": STATE, "questions": TYPES_QUESTIONS}, request_timeout)
        _types_checks(run, types)
        biggest = _post(
            client,
            {
                "model": model,
                "state": STATE,
                "questions": {
                    "department": {
                        "type": "choice",
                        "instructions": "Which department should read this conversation?",
                        "criteria": choice_criteria(count=count),
                    }
                },
            },
            request_timeout,
        )
        _max_choice_checks(run, biggest, count)
        too_many = _post(
            client,
            {
                "model": model,
                "state": STATE,
                "questions": {
                    "department": {
                        "type": "choice",
                        "instructions": "Which department?",
                        "criteria": choice_criteria(count=count + 1),
                    }
                },
            },
            request_timeout,
        )
        detail = too_many.response.get("detail") if isinstance(too_many.response, dict) else None
        run.check(
            f"choice with {count + 1} options is refused with 422",
            too_many.status == 422 and isinstance(detail, list) and bool(detail),
            f"HTTP {too_many.status}: {str(too_many.response)[:200]}",
        )
    report["requests"] = {"types": asdict(types), "max_choice": asdict(biggest), "too_many": asdict(too_many)}
    report["latency_ms"] = types.latency_ms
    report["server_timing"] = types.server_timing
    report["prefix_tokens"] = types.prefix_tokens
    report["cached_tokens"] = types.cached_tokens
    report["checks"] = [asdict(c) for c in run.checks]
    failed = [c for c in run.checks if not c.ok]
    report["failures"] = [c.name for c in failed]
    report["ok"] = not failed
    _report_write(report, output)
    if failed:
        hint = KEY_HINT if 401 in (types.status, biggest.status, too_many.status) else ""
        details = "; ".join(f"{c.name} ({c.detail[:160]})" if c.detail else c.name for c in failed)
        raise SmokeFailed(f"{len(failed)} smoke check(s) failed{hint}: {details}", report=report)
    say(f"smoke test passed: {len(run.checks)} checks, {types.latency_ms} ms for the three-type request")
    return report


def _report_write(report: dict[str, Any], output: Path | None) -> None:
    if output is not None:
        output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
