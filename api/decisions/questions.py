"""A Decisions API `questions` list as the core's questions, every problem located in the body.

Each Decisions question becomes the core question System One would send for it, so the same question
gets the same prompt, answer and calibration on either route: a `predicate` is a `noul` with the default
sides, a `choice` is a `choice` whose options read as their descriptions (or their values when they have
none), a `score` is a `score` whose levels read as their labels (and descriptions). Choice values keep
their JSON type for the answer: the string `"true"` and the boolean `true` are different choices.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from api.checking.checker import Checker
from api.checking.json_body import JsonKeyed, Loc, json_cache_new, json_cached, json_kind
from api.checking.limits import Limits
from api.decisions.content import image_part, json_part_text
from api.decisions.fields import string_check, unknown_keys_check
from api.decisions.openapi_request import QUESTION, DecisionChoiceOptionSerializer, DecisionLevelSerializer
from api.openapi.fields import serializer_keys
from inference.errors import value_quoted
from inference.images import Image
from inference.lru import SizedLRU
from inference.questions import Question, question_build
from inference.requests import Part

QUESTION_KINDS: tuple[str, ...] = tuple(QUESTION.serializers)
"""The question types, as the documented union (`api.decisions.openapi_request.QUESTION`) tells them apart."""
MAX_LEVELS = 10
"""A score's levels at most (the Decisions API's rule; also at most `max_answers`)."""
_QUESTION_KEYS = {kind: serializer_keys(serializer) for kind, serializer in QUESTION.serializers.items()}
_CHOICE_KEYS = serializer_keys(DecisionChoiceOptionSerializer)
_LEVEL_KEYS = serializer_keys(DecisionLevelSerializer)
_INSTRUCTION_PART_KEYS = {
    "input_text": {"type", "text"},
    "input_json": {"type", "data"},
    "input_image": {"type", "image_url", "detail"},
}
"""What a question's instructions part may hold (the SDK's `DecisionQuestionInputPart`)."""


@dataclass(frozen=True)
class Asked:
    """What the answer to one question needs besides the core's: its name and its options' typed values."""

    name: str | None
    values: tuple[str | bool, ...] = ()
    """A choice's values in order."""
    labels: tuple[str, ...] = ()
    """A score's level labels in order."""


def questions_check(
    check: Checker, data: dict[str, Any], limits: Limits
) -> tuple[tuple[Question, ...], tuple[Asked, ...]]:
    questions = data.get("questions")
    if questions is None:
        check.add(("questions",), "Missing required parameter: 'questions'", "missing_required_parameter")
        return (), ()
    if not isinstance(questions, list):
        check.add(
            ("questions",), f"Invalid type: expected an array of questions, got {json_kind(questions)}", "invalid_type"
        )
        return (), ()
    if not 1 <= len(questions) <= limits.max_questions:
        check.add(
            ("questions",),
            f"Between 1 and {limits.max_questions} questions are allowed on this server, got {len(questions)}",
            "array_below_min_length" if not questions else "array_above_max_length",
        )
        return (), ()
    found = []
    ids: set[str] = set()
    named: dict[str, int] = {}
    for i, question in enumerate(questions):
        name = question.get("name") if isinstance(question, dict) else None
        if isinstance(name, str) and name in named:  # feedback by name would be ambiguous
            check.add(
                ("questions", i, "name"),
                f"Duplicate value for 'name': {value_quoted(name)} already names questions[{named[name]}]; "
                "each question's name must be unique",
                "duplicate_value",
            )
            continue
        if isinstance(name, str):
            named[name] = i
        qid = _question_id(question, position=i, taken=ids)
        build = partial(_question_check, check, question, ("questions", i), limits, qid=qid)
        built = (
            build()  # its images count against this request's limits: read every time
            if _holds_image(question)
            else json_cached(cache=_parsed, key=(qid, limits.max_answers, limits.levels), value=question, build=build)
        )
        if built is not None:
            found.append(built)
        ids.add(qid)
    return tuple(q for q, _ in found), tuple(a for _, a in found)


_parsed: SizedLRU[JsonKeyed, tuple[Question, Asked]] = json_cache_new()
"""Valid questions by id and JSON, as System One keeps them (`api.systemone.parsing`), so a question sent again
is the same object and the prompt compiler's caches find it."""


def _holds_image(question: Any) -> bool:
    """Whether a question's instructions are parts one of which is an image."""
    instructions = question.get("instructions") if isinstance(question, dict) else None
    return isinstance(instructions, list) and any(
        isinstance(part, dict) and part.get("type") == "input_image" for part in instructions
    )


def _question_id(question: Any, *, position: int, taken: set[str]) -> str:
    """What storage and feedback know a question by: its name, or its position when it has none or an earlier
    question has the same id (`#position` if a name took that)."""
    name = question.get("name") if isinstance(question, dict) else None
    qid = name if isinstance(name, str) and name not in taken else str(position)
    return qid if qid not in taken else f"#{position}"


def _question_check(
    check: Checker, question: Any, loc: Loc, limits: Limits, *, qid: str
) -> tuple[Question, Asked] | None:
    """The core's question under `qid`, and what its answer needs."""
    if not isinstance(question, dict):
        check.add(loc, f"Invalid type: expected a question object, got {json_kind(question)}", "invalid_type")
        return None
    kind = question.get("type")
    if not isinstance(kind, str) or kind not in QUESTION_KINDS:
        check.add(
            (*loc, "type"),
            f"Invalid question type {value_quoted(kind)}; expected one of {', '.join(QUESTION_KINDS)}",
            "invalid_value" if "type" in question else "missing_required_parameter",
        )
        return None
    before = len(check.problems)
    unknown_keys_check(check, question, _QUESTION_KEYS[kind], loc)
    name = string_check(check, question, "name", loc, required=False)
    instructions, parts = _instructions_check(check, question.get("instructions"), (*loc, "instructions"))
    if kind == "predicate":
        built = (
            question_build(id=qid, type="noul", instructions=instructions, criteria=None, parts=parts),
            Asked(name=name),
        )
    elif kind == "choice":
        values, criteria = _choices_check(check, question.get("choices"), (*loc, "choices"), limits.max_answers)
        built = (
            question_build(id=qid, type="choice", instructions=instructions, criteria=criteria, parts=parts),
            Asked(name=name, values=values),
        )
    else:
        labels, levels = _levels_check(check, question.get("levels"), (*loc, "levels"), limits.levels)
        built = (
            question_build(id=qid, type="score", instructions=instructions, criteria=levels, parts=parts),
            Asked(name=name, labels=labels),
        )
    return None if len(check.problems) > before else built


def _instructions_check(check: Checker, value: Any, loc: Loc) -> tuple[str, tuple[Part, ...]]:
    """A string, or text, JSON and image parts: (the texts joined with newlines, every part in order). An image is
    checked as the input's are (a `data:` URL, or an allowed host's https URL) and counted against the same limits;
    it goes in this question's branch only, where the model reads it where it stands (`Question.parts`). An empty
    string is the question type's own instructions, as System One reads it (pydantic-ai sends `""`)."""
    if isinstance(value, str):
        return value, ()
    if value is None:
        check.add(loc, "Missing required parameter: 'instructions'", "missing_required_parameter")
        return "", ()
    if not isinstance(value, list) or not value:
        check.add(
            loc,
            "Invalid type: expected a string or a non-empty array of text, image and JSON parts, "
            f"got {json_kind(value)}",
            "invalid_type",
        )
        return "", ()
    texts: list[str] = []
    parts: list[Part] = []
    for i, part in enumerate(value):
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(part, dict) or not isinstance(kind, str) or kind not in _INSTRUCTION_PART_KEYS:
            check.add(
                (*loc, i), "Invalid instructions part; expected input_text, input_image or input_json", "invalid_value"
            )
            continue
        unknown_keys_check(check, part, _INSTRUCTION_PART_KEYS[kind], (*loc, i))
        if kind == "input_image":
            image = image_part(check, part, (*loc, i))
            if image is not None:
                parts.append(image)
            continue
        if kind == "input_text":
            text = string_check(check, part, "text", (*loc, i)) or ""
        else:
            text = json_part_text(check, part.get("data"), (*loc, i))
        texts.append(text)
        parts.append(text)
    return "\n".join(texts), tuple(parts) if any(isinstance(p, Image) for p in parts) else ()


def _items_check(check: Checker, value: Any, loc: Loc, *, limit: int, what: str) -> list[dict[str, Any]]:
    """A list of 2 to `limit` objects (the problems added when not)."""
    if not isinstance(value, list):
        check.add(
            loc,
            f"Invalid type: expected an array of {what}, got {json_kind(value)}",
            "missing_required_parameter" if value is None else "invalid_type",
        )
        return []
    if not 2 <= len(value) <= limit:
        check.add(
            loc,
            f"Between 2 and {limit} {what} are allowed on this server, got {len(value)}",
            "array_below_min_length" if len(value) < 2 else "array_above_max_length",
        )
        return []
    items = []
    for i, item in enumerate(value):
        if isinstance(item, dict):
            items.append(item)
        else:
            check.add((*loc, i), f"Invalid type: expected an object, got {json_kind(item)}", "invalid_type")
    return items if len(items) == len(value) else []


def _description(check: Checker, item: dict[str, Any], loc: Loc) -> str | None:
    text = string_check(check, item, "description", loc, required=False)
    return text or None


def _choices_check(
    check: Checker, value: Any, loc: Loc, limit: int
) -> tuple[tuple[str | bool, ...], dict[str, str | None]]:
    """The typed values in order, and the core's criteria: option key -> what the model reads (None: the
    key itself). A string value is its own key; a boolean's is `true`/`false`, unless a string of that
    text is a choice too, then `true (boolean)` (the model reads the key, so the two stay apart)."""
    values: list[str | bool] = []
    descriptions: list[str | None] = []
    for i, item in enumerate(_items_check(check, value, loc, limit=limit, what="choices")):
        unknown_keys_check(check, item, _CHOICE_KEYS, (*loc, i))
        found = item.get("value")
        if not isinstance(found, str | bool):
            check.add(
                (*loc, i, "value"),
                f"Invalid type: a choice value is a string or a boolean, got {json_kind(found)}",
                "invalid_type" if "value" in item else "missing_required_parameter",
            )
            continue
        if any(type(v) is type(found) and v == found for v in values):
            check.add(
                (*loc, i, "value"),
                f"Each choice must be unique; {value_quoted(found)} is given twice",
                "duplicate_value",
            )
            continue
        values.append(found)
        descriptions.append(_description(check, item, (*loc, i)))
    strings = {v for v in values if isinstance(v, str)}
    criteria: dict[str, str | None] = {}
    for found, description in zip(values, descriptions, strict=True):
        key = found if isinstance(found, str) else ("true" if found else "false")
        while key in criteria or (not isinstance(found, str) and key in strings):
            key = f"{key} (boolean)"
        criteria[key] = description
    return tuple(values), criteria


def _levels_check(check: Checker, value: Any, loc: Loc, limit: int) -> tuple[tuple[str, ...], list[str]]:
    """The level labels in order, and the text the model reads for each: the label, then its description."""
    labels: list[str] = []
    texts: list[str] = []
    for i, item in enumerate(_items_check(check, value, loc, limit=limit, what="levels")):
        unknown_keys_check(check, item, _LEVEL_KEYS, (*loc, i))
        label = string_check(check, item, "label", (*loc, i))
        description = _description(check, item, (*loc, i))
        if label is not None:
            labels.append(label)
            texts.append(label if description is None else f"{label} — {description}")
    return tuple(labels), texts
