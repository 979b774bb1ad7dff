"""The response headers every wire format sends with an evaluation's answers."""

from __future__ import annotations

from inference.runner import Outcome
from inference.scoring import Answer


def served_headers_common(*, request_id: str, model: str, outcome: Outcome) -> dict[str, str]:
    """The headers of an evaluation on every wire format: request id, served model, token counts, the
    lowest label mass and `Server-Timing`."""
    t = outcome.timings
    headers = {
        "x-typesafe-request-id": request_id,
        "x-openjev-model": model,
        "x-openjev-prefix-tokens": str(outcome.prefix_tokens),
        "x-openjev-label-mass": label_mass_header(answers=outcome.answers),
        "Server-Timing": f"prepare;dur={t.prepare_ms:.2f}, prefill;dur={t.prefill_ms:.2f}, "
        f"branches;dur={t.branches_ms:.2f}",
    }
    if outcome.cached_tokens is not None:
        headers["x-openjev-cached-tokens"] = str(outcome.cached_tokens)
    return headers


def label_mass_header(*, answers: tuple[Answer, ...]) -> str:
    """`x-openjev-label-mass`: the lowest label mass of the request's answers, the one to worry about."""
    return f"{min(a.label_mass for a in answers):.4f}"
