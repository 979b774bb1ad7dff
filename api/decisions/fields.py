"""How the Decisions API words a field's problems, as OpenAI's API does (`Unknown parameter`, `Missing required
parameter`, `Invalid type`): the body's top level, its input and its questions are checked alike.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from api.checking.checker import Checker
from api.checking.json_body import Loc, json_kind
from inference.errors import value_quoted


def unknown_keys_check(check: Checker, item: dict[str, Any], allowed: AbstractSet[str], loc: Loc) -> None:
    check.unknown_keys(
        item, allowed, loc, message=lambda key: f"Unknown parameter: {value_quoted(key)}", type_="unknown_parameter"
    )


def string_check(check: Checker, item: dict[str, Any], key: str, loc: Loc, *, required: bool = True) -> str | None:
    """`item[key]` when it is a string; a problem when it is missing (if required) or not a string."""
    value = item.get(key)
    if value is None:
        if required:
            check.add((*loc, key), f"Missing required parameter: {value_quoted(key)}", "missing_required_parameter")
        return None
    if not isinstance(value, str):
        check.add((*loc, key), f"Invalid type: expected a string, got {json_kind(value)}", "invalid_type")
        return None
    return value
