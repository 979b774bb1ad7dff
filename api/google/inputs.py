"""The content of a Google Decisions body: its `input` (text and image blocks, read as one user message) and a
question's `instructions` (text blocks), each block checked against its declared shape (`api.google.contract`)."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from api.checking.checker import Checker
from api.checking.images import image_of_base64
from api.checking.json_body import Loc, json_kind
from api.google.contract import CONTENT_BLOCK, IMAGE_TYPES, TEXT_BLOCK, UNSUPPORTED_BLOCKS
from inference.errors import Problem, value_quoted
from inference.images import Image
from inference.requests import Message, Part, conversation_of_text

IMAGE_URI_REFUSED = (
    "image URIs are not fetched by this server (it makes no request on a client's behalf unless its operator "
    "allows the host); send the image's bytes as base64 `data`"
)


def unknown_keys_check(check: Checker, item: dict[str, Any], allowed: AbstractSet[str], loc: Loc) -> None:
    """Every key of `item` its shape lacks, in Google's wording, pointing a System One `state` at its route."""

    def message(key: str) -> str:
        hint = " (System One's `state`: send that body to POST /v1/systemone)" if loc == () and key == "state" else ""
        return f"Unknown name {value_quoted(key)}: cannot find field{hint}"

    check.unknown_keys(item, allowed, loc, message=message, type_="unknown_field")


def string_check(check: Checker, item: dict[str, Any], key: str, loc: Loc) -> str | None:
    """`item[key]` when it is a string; a problem when it is missing or not a string."""
    value = item.get(key)
    if not isinstance(value, str):
        check.add(
            (*loc, key),
            f"Missing required field: {value_quoted(key)}"
            if value is None
            else f"Invalid type: expected a string, got {json_kind(value)}",
            "missing" if value is None else "invalid_type",
        )
        return None
    return value


def input_check(check: Checker, data: dict[str, Any]) -> tuple[Message, ...]:
    """The input as the conversation the model reads: one user message."""
    loc: Loc = ("input",)
    if "input" not in data:
        check.add(loc, "Missing required field: 'input'", "missing")
        return ()
    value = data["input"]
    if isinstance(value, str):
        if not value.strip():
            check.add(loc, "input must not be empty", "empty_input")
        return conversation_of_text(text=value)
    if isinstance(value, dict):
        blocks = [(value, loc)]
    elif isinstance(value, list) and value:
        blocks = [(block, (*loc, i)) for i, block in enumerate(value)]
    else:
        check.add(
            loc,
            "input must hold at least one content block"
            if isinstance(value, list)
            else f"Invalid type: expected a string, a content block or a list of them, got {json_kind(value)}",
            "empty_input" if isinstance(value, list) else "invalid_type",
        )
        return ()
    before = len(check.problems)
    parts: list[Part] = []
    texts: list[str] = []
    for block, block_loc in blocks:
        kind = _block_kind(check, block, block_loc, kinds=tuple(CONTENT_BLOCK.members))
        if kind == "text":
            texts.append(_text_block(check, block, block_loc))
        elif kind == "image":
            image = _image_block(check, block, block_loc)
            if image is not None:
                parts += ["\n".join(texts), image] if texts else [image]
                texts = []
    if len(check.problems) > before:
        return ()
    text = "\n".join(texts)
    if not any(isinstance(p, Image) for p in parts):
        if not text.strip():
            check.add(loc, "input must not be empty", "empty_input")
        return conversation_of_text(text=text)
    return (Message(role="user", content=tuple(p for p in [*parts, text] if p != "")),)


def _block_kind(check: Checker, block: Any, loc: Loc, *, kinds: tuple[str, ...]) -> str | None:
    """A content block's `type` when it is one of `kinds`; else a problem (a clear one for media not served)."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind in kinds:
        return str(kind)
    if kind in UNSUPPORTED_BLOCKS and "image" in kinds:
        check.add(
            (*loc, "type"),
            f"{kind} input is not supported by this server: the model reads text and images",
            "unsupported_content",
        )
    elif kind in (*UNSUPPORTED_BLOCKS, "image"):
        check.add((*loc, "type"), "instructions are text only: put images in the input", "unsupported_content")
    elif isinstance(block, dict):
        check.add(
            (*loc, "type"),
            f"Invalid content block type {value_quoted(kind)}; expected one of {', '.join(kinds)}"
            if "type" in block
            else "Missing required field: 'type'",
            "invalid_value" if "type" in block else "missing",
        )
    else:
        check.add(loc, f"Invalid type: expected a content block object, got {json_kind(block)}", "invalid_type")
    return None


def _text_block(check: Checker, block: dict[str, Any], loc: Loc) -> str:
    """A text block's text; its `annotations` (citations of generated text) are accepted and not read."""
    unknown_keys_check(check, block, TEXT_BLOCK.keys, loc)
    return string_check(check, block, "text", loc) or ""


def _image_block(check: Checker, block: dict[str, Any], loc: Loc) -> Image | None:
    """An image block with base64 `data` as an image, or with a `uri`: an https URL of a host the operator allows
    (`OPENJEV_IMAGE_URL_HOSTS`), fetched by the service before the evaluation, refused where none is allowed;
    `resolution` is accepted and not read (the backend sees the image as it is)."""
    unknown_keys_check(check, block, CONTENT_BLOCK.members["image"].keys, loc)
    uri = block.get("uri")
    if uri is not None and not check.image_limits.url_hosts:
        check.add((*loc, "uri"), IMAGE_URI_REFUSED, "image_uri_not_supported")
        return None
    if uri is not None and block.get("data") is not None:
        check.add(loc, "an image block holds `data` or `uri`, not both", "invalid_value")
        return None
    mime_type = block.get("mime_type")
    if mime_type is not None and mime_type not in IMAGE_TYPES:
        check.add(
            (*loc, "mime_type"),
            f"image type {value_quoted(mime_type)} is not supported; send {', '.join(IMAGE_TYPES)}",
            "image_format",
        )
        return None
    if uri is not None:
        return _uri_image(check, uri, (*loc, "uri"))
    data = string_check(check, block, "data", loc)
    if data is None or not check.image_admit(loc):
        return None
    image = image_of_base64(text=data, loc=(*loc, "data"), limits=check.image_limits)
    if isinstance(image, Problem):
        check.problems.append(image)
        return None
    check.images.append((image, loc))
    return image


def _uri_image(check: Checker, uri: Any, loc: Loc) -> Image | None:
    """An image `uri`, where hosts are allowed: an https URL of one of them, to be fetched (counted as an image)."""
    if not isinstance(uri, str):
        check.add(loc, f"Invalid type: expected a string, got {json_kind(uri)}", "invalid_type")
        return None
    if not uri[:8].lower().startswith(("http://", "https://")):
        check.add(loc, "an image uri must be an https URL; send the image's bytes as base64 `data`", "image_url")
        return None
    return check.image_read(uri, loc)


def instructions_check(check: Checker, value: Any, loc: Loc) -> str:
    """Text: a string, one text block, or a list of text blocks joined with newlines; required, and an empty one is
    the question type's own instructions, as System One reads it."""
    if value is None:
        check.add(loc, "Missing required field: 'instructions'", "missing")
        return ""
    if isinstance(value, str):
        text = value
    elif isinstance(value, dict | list):
        blocks = [(value, loc)] if isinstance(value, dict) else [(b, (*loc, i)) for i, b in enumerate(value)]
        before = len(check.problems)
        texts = []
        for block, block_loc in blocks:
            if _block_kind(check, block, block_loc, kinds=(TEXT_BLOCK.fields["type"]["const"],)) == "text":
                texts.append(_text_block(check, block, block_loc))
        if len(check.problems) > before:
            return ""
        text = "\n".join(texts)
    else:
        check.add(
            loc,
            f"Invalid type: expected a string, a text block or a list of them, got {json_kind(value)}",
            "invalid_type",
        )
        return ""
    return text
