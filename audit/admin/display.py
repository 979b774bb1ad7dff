"""HTML pieces the admin pages share: status badges, JSON blocks, durations and probability bars."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.utils.html import format_html
from django.utils.safestring import SafeString

from inference.scoring import label_argmax

STATUS_COLOURS = {2: "#2e7d32", 4: "#b26a00", 5: "#c62828"}
STATE_COLOURS = {"active": "#2e7d32", "expired": "#b26a00", "revoked": "#c62828"}


def badge_html(*, text: str | int, colour: str) -> SafeString:
    return format_html('<span class="oj-status" style="background:{}">{}</span>', colour, text)


def status_badge_html(*, status: int) -> SafeString:
    """An HTTP status, coloured by its class."""
    return badge_html(text=status, colour=STATUS_COLOURS.get(status // 100, "#555"))


def json_pretty(*, value: Any) -> SafeString:
    """Indented JSON in a scrollable block; escaped, so a state cannot inject markup."""
    if value is None:
        return format_html('<span class="oj-muted">{}</span>', "not stored")
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return format_html('<pre class="oj-json">{}</pre>', text)


def ms_text(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} ms"


def text_shown(value: Any) -> str:
    """A text field as a person reads it: strings verbatim, structured values as JSON, nothing as ""."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def probability_bars(
    *, keys: Sequence[str], texts: Sequence[str], probabilities: Sequence[float], chosen: int | None = None
) -> list[dict[str, Any]]:
    """One row per option for the bar templates: key, text, probability, bar width and whether it was
    chosen (`chosen`, or the most probable option, ties to the first, as the API answers)."""
    best = label_argmax(probabilities) if chosen is None else chosen
    return [
        {"key": key, "text": text, "p": p, "width": f"{max(0.0, min(1.0, p)) * 100:.1f}", "chosen": i == best}
        for i, (key, text, p) in enumerate(zip(keys, texts, probabilities, strict=True))
    ]
