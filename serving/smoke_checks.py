"""What the smoke test asks a deployed endpoint and what a correct answer looks like: the chat-transcript state,
its questions, and the checks of each exchange's shapes, headers, usage and semantics (`serving.smoke` runs them).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
class Checks:
    """The checks made so far, each printed as it is made: the report lists them, the exit status counts the
    failed ones."""

    checks: list[Check] = field(default_factory=list)
    say: Callable[[str], None] = print

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.checks.append(Check(name, bool(ok), detail))
        self.say(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
        return bool(ok)


def choice_criteria(*, count: int) -> dict[str, str]:
    """`count` options, keys `opt-000`..., short distinct descriptions (the prompt grows ~6 tokens each)."""
    return {f"opt-{i:03d}": f"Department {i}" for i in range(count)}


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


def _headers_check(checks: Checks, name: str, exchange: Exchange) -> None:
    timing = exchange.server_timing or ""
    checks.check(
        f"{name}: headers",
        bool(exchange.request_id)
        and all(p in timing for p in ("prepare", "prefill", "branches"))
        and isinstance(exchange.prefix_tokens, int)
        and exchange.prefix_tokens > 0,
        f"request id {exchange.request_id}, prefix tokens {exchange.prefix_tokens}, cached tokens "
        f"{exchange.cached_tokens}, Server-Timing {timing!r}",
    )


def types_exchange_check(*, checks: Checks, exchange: Exchange) -> None:
    body = exchange.response
    if not checks.check(
        "types: HTTP 200",
        exchange.status == 200,
        f"{exchange.status} in {exchange.latency_ms} ms" if exchange.status else str(exchange.error),
    ):
        checks.check("types: answers", False, f"no answers: {str(body)[:300]}")
        return
    answers = body.get("answers", {}) if isinstance(body, dict) else {}
    checks.check("types: answer ids", list(answers) == list(TYPES_QUESTIONS), f"{list(answers)}")
    refund, team, anger = (answers.get(k, {}) for k in TYPES_QUESTIONS)
    checks.check("types: noul", refund.get("type") == "noul" and _unit(refund.get("noul")), f"{refund}")
    team_keys = list(TEAMS)
    checks.check(
        "types: choice",
        team.get("type") == "choice"
        and team.get("choice") in TEAMS
        and _distribution_ok(team.get("probabilities"), team_keys)
        and _unit(team.get("confidence")),
        f"{team}",
    )
    levels = TYPES_QUESTIONS["anger"]["criteria"]
    score = anger.get("score")
    checks.check(
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
    checks.check(
        "types: usage",
        isinstance(usage.get("input_tokens"), int)
        and usage["input_tokens"] > 0
        and usage.get("output_tokens") == len(TYPES_QUESTIONS) + 1,
        f"{usage}",
    )
    _headers_check(checks, "types", exchange)
    noul = refund.get("noul")
    checks.check(
        "semantic: a refund request is a refund",
        isinstance(noul, int | float) and noul > 0.5,
        f"P(refund) = {_p(noul)}",
    )
    probabilities = team.get("probabilities") or {}
    billing, technical = probabilities.get("Billing"), probabilities.get("Technical")
    checks.check(
        "semantic: billing beats technical",
        isinstance(billing, int | float) and isinstance(technical, int | float) and billing > technical,
        f"P(Billing) = {_p(billing)}, P(Technical) = {_p(technical)}",
    )


def _p(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, int | float) else repr(value)


def max_choice_exchange_check(*, checks: Checks, exchange: Exchange, count: int) -> None:
    name = f"choice with {count} options (the maximum)"
    if not checks.check(
        f"{name}: HTTP 200",
        exchange.status == 200,
        f"{exchange.status} in {exchange.latency_ms} ms" if exchange.status else str(exchange.error),
    ):
        return
    body = exchange.response
    answer = (body.get("answers") or {}).get("department", {}) if isinstance(body, dict) else {}
    keys = list(choice_criteria(count=count))
    checks.check(
        f"{name}: answer",
        answer.get("type") == "choice"
        and answer.get("choice") in keys
        and _distribution_ok(answer.get("probabilities"), keys)
        and _unit(answer.get("confidence")),
        f"choice {answer.get('choice')!r}, confidence {answer.get('confidence')}",
    )
    _headers_check(checks, "maximum choice", exchange)
