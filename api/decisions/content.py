"""A Decisions API content part as what the model reads, wherever it stands (a message, a tool output, a question's
instructions): text as it is, `input_json` as compact JSON with its key order (the same text System One writes for
structured values), images as `data:` URLs, or as https URLs of the hosts an operator allows
(`OPENJEV_IMAGE_URL_HOSTS`), which the service fetches itself (`api.checking.image_fetch`); without that setting a
hosted URL is refused.
"""

from __future__ import annotations

from typing import Any

from api.checking.checker import Checker
from api.checking.json_body import Loc, json_kind
from api.decisions.fields import string_check, unknown_keys_check
from inference.errors import value_quoted
from inference.images import Image
from inference.questions import text_render
from inference.requests import Part

JSON_MAX_DEPTH = 32
JSON_MAX_VALUES = 10_000
JSON_MAX_BYTES = 256 << 10
"""The SDK's documented limits of one `input_json` part (container levels, values, compact UTF-8 bytes)."""

_PART_KEYS = {
    "input_text": {"type", "text", "prompt_cache_breakpoint"},
    "input_image": {"type", "image_url", "detail", "prompt_cache_breakpoint"},
    "input_json": {"type", "data"},
    "output_text": {"type", "text"},
    "refusal": {"type", "refusal"},
}
IMAGE_URL_FETCHED = (
    "image URLs are not fetched by this server (it makes no request on a client's behalf); "
    "send the image as a base64 data: URL"
)


def json_part_text(check: Checker, data: Any, loc: Loc) -> str:
    """An `input_json` part's data as compact JSON, within the SDK's limits."""
    if not (isinstance(data, dict) or (isinstance(data, list) and all(isinstance(x, dict) for x in data))):
        check.add(
            (*loc, "data"),
            f"Invalid type: expected an object or an array of objects, got {json_kind(data)}",
            "invalid_type",
        )
        return ""
    depth, values = _json_size(data)
    if depth > JSON_MAX_DEPTH or values > JSON_MAX_VALUES:
        check.add(
            (*loc, "data"),
            f"JSON data is limited to {JSON_MAX_DEPTH} levels and {JSON_MAX_VALUES} values "
            f"(got {depth} levels, {values} values)",
            "json_too_large",
        )
        return ""
    text = text_render(data)
    if len(text.encode("utf-8", "surrogatepass")) > JSON_MAX_BYTES:
        check.add((*loc, "data"), f"JSON data is limited to {JSON_MAX_BYTES} bytes of compact JSON", "json_too_large")
        return ""
    return text


def _json_size(value: Any) -> tuple[int, int]:
    """(container levels, values) of a JSON value, without recursion (the depth is the client's)."""
    depth, values, stack = 0, 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        values += 1
        if isinstance(node, dict | list):
            depth = max(depth, level)
            stack += [(child, level + 1) for child in (node.values() if isinstance(node, dict) else node)]
    return depth, values


def image_part(check: Checker, part: dict[str, Any], loc: Loc) -> Image | None:
    """An `input_image` part's image, counted against the request's limits: a `data:` URL, or where the operator
    allows hosts, an https URL of one of them (fetched before the evaluation); a hosted URL is refused otherwise."""
    url = string_check(check, part, "image_url", loc)
    if url is None:
        return None
    if url[:8].lower().startswith(("http://", "https://")) and not check.image_limits.url_hosts:
        check.add((*loc, "image_url"), IMAGE_URL_FETCHED, "image_url_not_supported")
        return None
    return check.image_read(url, (*loc, "image_url"))


def parts_check(check: Checker, content: Any, loc: Loc, *, kinds: tuple[str, ...]) -> list[Part] | None:
    """A string or a list of parts as text and images in order, consecutive texts joined with newlines
    (as System One joins a transcript's text parts); None when the content is not valid."""
    if isinstance(content, str):
        return [content] if content else []
    if not isinstance(content, list):
        check.add(
            loc,
            f"Invalid type: expected a string or an array of content parts, got {json_kind(content)}",
            "invalid_type",
        )
        return None
    before = len(check.problems)
    parts: list[Part] = []
    texts: list[str] = []
    for i, part in enumerate(content):
        part_loc = (*loc, i)
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(part, dict) or kind not in kinds:
            found = value_quoted(kind) if isinstance(kind, str) else json_kind(part)
            check.add(
                (*part_loc, "type") if isinstance(part, dict) else part_loc,
                f"Invalid content part {found}; expected one of {', '.join(kinds)}",
                "invalid_value",
            )
            continue
        unknown_keys_check(check, part, _PART_KEYS[kind], part_loc)
        if kind == "input_image":
            image = image_part(check, part, part_loc)
            if image is not None:
                parts += ["\n".join(texts), image] if texts else [image]
                texts = []
        elif kind == "input_json":
            texts.append(json_part_text(check, part.get("data"), part_loc))
        else:
            text = string_check(check, part, "refusal" if kind == "refusal" else "text", part_loc)
            texts.append(text or "")
    if len(check.problems) > before:
        return None
    return [p for p in ([*parts, "\n".join(texts)] if texts else parts) if p != ""]
