"""Request validation for `POST /v1/systemone`: JSON to typed questions, or a list of problems.

Hand-written rather than DRF serializers because the wire contract needs FastAPI-style `loc` paths
for every problem, byte-exact caller keys and no coercion (a number is not a string), and because
this runs on every request: a 64-question body validates in well under a millisecond.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from typing import Any

from inference.errors import Problem, RequestInvalid
from inference.questions import QUESTION_TYPES, Question, question_build

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Limits:
    max_questions: int
    max_answers: int


@dataclass(frozen=True)
class EvaluationRequest:
    model: str
    state: Any
    questions: tuple[Question, ...]


class _ConstantRejected(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _ConstantRejected(f"{name} is not valid JSON")


def body_parse(raw: bytes) -> Any:
    """Strict JSON: UTF-8 only, no NaN/Infinity. Raises ValueError with a readable message.

    What JSON's grammar allows but no text or number can hold (a lone surrogate escape, a number
    beyond a double) parses here and is refused, located, by `document_problems`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"the body is not UTF-8: {exc}") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("the body is nested too deeply") from None
    except (json.JSONDecodeError, _ConstantRejected) as exc:
        raise ValueError(f"the body is not JSON: {exc}") from None
    except ValueError:  # Python refuses to convert longer integers (a denial-of-service guard)
        raise ValueError(f"the body has an integer of more than {sys.get_int_max_str_digits()} digits") from None


NESTING_MAX = 128
"""Levels of arrays and objects a body may nest: far beyond any real state, far below the depth at
which rendering, the chat template or storage would run out of stack."""
DOCUMENT_PROBLEMS_MAX = 20
_SURROGATE = re.compile("[\ud800-\udfff]")


def _text_invalid(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def _value_invalid(value: Any) -> bool:
    if isinstance(value, str):
        return _text_invalid(value)
    return isinstance(value, float) and not math.isfinite(value)


def _document_clean(data: Any) -> bool:
    """The fast pass, level by level without building locations: most bodies are clean."""
    level, depth = [data], 0
    while level:
        below: list[Any] = []
        for value in level:
            if isinstance(value, dict):
                if depth >= NESTING_MAX or any(_text_invalid(key) for key in value):
                    return False
                below.extend(value.values())
            elif isinstance(value, list):
                if depth >= NESTING_MAX:
                    return False
                below.extend(value)
            elif _value_invalid(value):
                return False
        level, depth = below, depth + 1
    return True


def text_printable(text: str) -> str:
    """`text` with lone surrogates as U+FFFD, so it can be echoed in a UTF-8 answer (a location)."""
    return _SURROGATE.sub("\ufffd", text)


def _surrogate_problem(loc: Loc, text: str, what: str) -> Problem:
    found = _SURROGATE.search(text)
    code = f"\\u{ord(found.group()):04x}" if found else ""
    return Problem(loc, f"{what} is not valid Unicode text: it holds a lone UTF-16 surrogate ({code})",
                   "string_unicode")


def document_problems(*, data: Any) -> list[Problem]:
    """What JSON can carry but no prompt, answer or database can, anywhere in the body, keys included:
    lone UTF-16 surrogates (`"\\ud800"` is valid JSON, yet UTF-8 cannot encode it), numbers beyond a
    double (`1e400` parses as infinity, which JSON cannot say back) and nesting deeper than
    `NESTING_MAX`. Checked before anything else reads the body; at most `DOCUMENT_PROBLEMS_MAX` reported."""
    if _document_clean(data):
        return []
    problems: list[Problem] = []
    stack: list[tuple[Any, Loc]] = [(data, ("body",))]
    while stack and len(problems) < DOCUMENT_PROBLEMS_MAX:
        value, loc = stack.pop()
        if isinstance(value, dict | list) and len(loc) > NESTING_MAX:
            problems.append(Problem(loc, f"Arrays and objects may nest at most {NESTING_MAX} levels deep",
                                    "nesting_too_deep"))
        elif isinstance(value, dict):
            children = []
            for key, item in value.items():
                if _text_invalid(key):
                    problems.append(_surrogate_problem((*loc, text_printable(key)), key, "This key"))
                else:
                    children.append((item, (*loc, key)))
            stack.extend(reversed(children))  # popped in document order
        elif isinstance(value, list):
            stack.extend(reversed([(item, (*loc, i)) for i, item in enumerate(value)]))
        elif isinstance(value, str) and _text_invalid(value):
            problems.append(_surrogate_problem(loc, value, "Input"))
        elif _value_invalid(value):
            problems.append(Problem(loc, "Input should be a finite number; this one overflows a 64-bit float",
                                    "finite_number"))
    return problems


def _kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _is_text(value: Any) -> bool:
    """A text field may be a string, an object or an array (structured text the model reads as JSON)."""
    return isinstance(value, str | dict | list)


class _Checker:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, loc: Loc, msg: str, type_: str) -> None:
        self.problems.append(Problem(loc, msg, type_))

    def text(self, value: Any, loc: Loc, *, nullable: bool) -> None:
        if value is None and nullable:
            return
        if not _is_text(value):
            expected = "a string, object or array" + (" or null" if nullable else "")
            self.add(loc, f"Input should be {expected}, got {_kind(value)}", "text_type")


def request_parse(*, data: Any, limits: Limits, models: frozenset[str]) -> EvaluationRequest:
    """Validate everything before any work; raises RequestInvalid with every problem found."""
    invalid = document_problems(data=data)
    if invalid:  # first: the other checks quote keys and values
        raise RequestInvalid(invalid)
    check = _Checker()
    if not isinstance(data, dict):
        raise RequestInvalid([Problem(("body",), f"Input should be a JSON object, got {_kind(data)}", "dict_type")])
    model = data.get("model")
    if "model" not in data:
        check.add(("body", "model"), "Field required", "missing")
    elif not isinstance(model, str):
        check.add(("body", "model"), f"Input should be a string, got {_kind(model)}", "string_type")
    elif not model_known(model=model, models=models):
        check.add(
            ("body", "model"),
            f"Unknown model {model!r}; use one of {', '.join(sorted(models))} or any jev-* alias",
            "unknown_model",
        )
    if "state" not in data:
        check.add(("body", "state"), "Field required", "missing")
    elif not _is_text(data["state"]):
        check.add(
            ("body", "state"), f"Input should be a string, object or array, got {_kind(data['state'])}", "state_type"
        )
    questions = _questions_check(check, data, limits)
    if check.problems:
        raise RequestInvalid(check.problems)
    return EvaluationRequest(model=str(model), state=data["state"], questions=questions)


def model_known(*, model: str, models: frozenset[str]) -> bool:
    return model in models or model.startswith("jev-")


def _questions_check(check: _Checker, data: dict[str, Any], limits: Limits) -> tuple[Question, ...]:
    loc: Loc = ("body", "questions")
    if "questions" not in data:
        check.add(loc, "Field required", "missing")
        return ()
    questions = data["questions"]
    if not isinstance(questions, dict):
        check.add(loc, f"Input should be an object of question id to question, got {_kind(questions)}", "dict_type")
        return ()
    if not 1 <= len(questions) <= limits.max_questions:
        check.add(
            loc,
            f"Between 1 and {limits.max_questions} questions are allowed, got {len(questions)}",
            "too_short" if not questions else "too_long",
        )
        return ()
    built = []
    for qid, question in questions.items():
        if qid == "":
            check.add((*loc, qid), "Question ids must be non-empty strings", "string_too_short")
            continue
        result = _question_check(check, qid, question, (*loc, qid), limits)
        if result is not None:
            built.append(result)
    return tuple(built)


def _question_check(check: _Checker, qid: str, question: Any, loc: Loc, limits: Limits) -> Question | None:
    if not isinstance(question, dict):
        check.add(loc, f"Input should be a question object, got {_kind(question)}", "dict_type")
        return None
    qtype = question.get("type")
    if qtype not in QUESTION_TYPES:
        msg = (
            "Field required"
            if "type" not in question
            else f"Input tag {qtype!r} is not one of 'noul', 'choice', 'score'"
        )
        check.add((*loc, "type"), msg, "missing" if "type" not in question else "union_tag_invalid")
        return None
    before = len(check.problems)
    check.text(question.get("instructions"), (*loc, "instructions"), nullable=True)
    criteria = question.get("criteria")
    {"noul": _noul_check, "choice": _choice_check, "score": _score_check}[qtype](
        check, criteria, (*loc, "criteria"), limits
    )
    if len(check.problems) > before:
        return None
    return question_build(id=qid, type=qtype, instructions=question.get("instructions"), criteria=criteria)


def _noul_check(check: _Checker, criteria: Any, loc: Loc, limits: Limits) -> None:
    if criteria is None:
        return
    if not isinstance(criteria, dict):
        check.add(loc, f"Input should be an object with 'true' and/or 'false', got {_kind(criteria)}", "dict_type")
        return
    for key, value in criteria.items():
        if key not in ("true", "false"):
            check.add((*loc, key), "Only 'true' and 'false' are allowed in noul criteria", "extra_forbidden")
        else:
            check.text(value, (*loc, key), nullable=True)


def _choice_check(check: _Checker, criteria: Any, loc: Loc, limits: Limits) -> None:
    if not isinstance(criteria, dict):
        check.add(
            loc,
            f"Input should be an object of option name to description, got {_kind(criteria)}",
            "missing" if criteria is None else "dict_type",
        )
        return
    if not 2 <= len(criteria) <= limits.max_answers:
        check.add(
            loc,
            f"A choice needs 2 to {limits.max_answers} options, got {len(criteria)}",
            "too_short" if len(criteria) < 2 else "too_long",
        )
        return
    for key, value in criteria.items():
        check.text(value, (*loc, key), nullable=True)


def _score_check(check: _Checker, criteria: Any, loc: Loc, limits: Limits) -> None:
    if isinstance(criteria, dict):
        check.add(
            loc, 'Score levels must be an array, lowest first; the object form {"0": ...} is not accepted', "list_type"
        )
        return
    if not isinstance(criteria, list):
        check.add(
            loc,
            f"Input should be an array of levels, got {_kind(criteria)}",
            "missing" if criteria is None else "list_type",
        )
        return
    if not 2 <= len(criteria) <= limits.max_answers:
        check.add(
            loc,
            f"A score needs 2 to {limits.max_answers} levels, got {len(criteria)}",
            "too_short" if len(criteria) < 2 else "too_long",
        )
        return
    for i, level in enumerate(criteria):
        check.text(level, (*loc, i), nullable=False)
