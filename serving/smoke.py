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
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

from serving.smoke_checks import (
    STATE,
    TYPES_QUESTIONS,
    Checks,
    Exchange,
    choice_criteria,
    max_choice_exchange_check,
    types_exchange_check,
)

RETRY_STATUSES = frozenset({502, 503, 504})
KEY_HINT = " (the server wants an API key: set OPENJEV_API_KEY or --api-key)"


class SmokeFailed(Exception):
    """At least one check failed; `report` is what was written to the result file."""

    def __init__(self, message: str, *, report: dict[str, Any]) -> None:
        super().__init__(message)
        self.report = report


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
    checks = Checks(say=say)
    report: dict[str, Any] = {"ok": False, "url": url}
    with httpx.Client(
        base_url=url.rstrip("/"),
        headers=headers,
        transport=transport,
        timeout=httpx.Timeout(request_timeout, connect=10.0),
        follow_redirects=False,
    ) as client:
        model, count = _server_read(
            client=client, timeout=timeout, max_answers=max_answers, report=report, output=output, say=say
        )
        exchanges = _exchanges_check(
            client=client, checks=checks, model=model, count=count, request_timeout=request_timeout
        )
    _report_finish(report=report, checks=checks, exchanges=exchanges, output=output, say=say)
    return report


def _server_read(
    *,
    client: httpx.Client,
    timeout: float,
    max_answers: int | None,
    report: dict[str, Any],
    output: Path | None,
    say: Callable[[str], None],
) -> tuple[str, int]:
    """The served model's name and the options of the largest choice, once the server is healthy; a server
    that never is, or refuses its limits, fails the run before any evaluation (its report written)."""
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
    return model, count


def _exchanges_check(
    *, client: httpx.Client, checks: Checks, model: str, count: int, request_timeout: float
) -> dict[str, Exchange]:
    """The three requests, each checked as it is answered: every answer type, the largest choice, one option
    too many (keyed as the report's `requests`)."""
    types = _post(client, {"model": model, "state": STATE, "questions": TYPES_QUESTIONS}, request_timeout)
    types_exchange_check(checks=checks, exchange=types)
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
    max_choice_exchange_check(checks=checks, exchange=biggest, count=count)
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
    checks.check(
        f"choice with {count + 1} options is refused with 422",
        too_many.status == 422 and isinstance(detail, list) and bool(detail),
        f"HTTP {too_many.status}: {str(too_many.response)[:200]}",
    )
    return {"types": types, "max_choice": biggest, "too_many": too_many}


def _report_finish(
    *,
    report: dict[str, Any],
    checks: Checks,
    exchanges: dict[str, Exchange],
    output: Path | None,
    say: Callable[[str], None],
) -> None:
    """The report completed with the exchanges and the checks and written, passing or not; a failed check
    raises SmokeFailed naming every failure."""
    types = exchanges["types"]
    report["requests"] = {name: asdict(exchange) for name, exchange in exchanges.items()}
    report["latency_ms"] = types.latency_ms
    report["server_timing"] = types.server_timing
    report["prefix_tokens"] = types.prefix_tokens
    report["cached_tokens"] = types.cached_tokens
    report["checks"] = [asdict(c) for c in checks.checks]
    failed = [c for c in checks.checks if not c.ok]
    report["failures"] = [c.name for c in failed]
    report["ok"] = not failed
    _report_write(report, output)
    if failed:
        hint = KEY_HINT if 401 in (exchange.status for exchange in exchanges.values()) else ""
        details = "; ".join(f"{c.name} ({c.detail[:160]})" if c.detail else c.name for c in failed)
        raise SmokeFailed(f"{len(failed)} smoke check(s) failed{hint}: {details}", report=report)
    say(f"smoke test passed: {len(checks.checks)} checks, {types.latency_ms} ms for the three-type request")


def _report_write(report: dict[str, Any], output: Path | None) -> None:
    if output is not None:
        output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
