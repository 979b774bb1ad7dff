"""A Google Decisions body (`google-genai`'s `client.decisions.create`), validated once into the core's typed
request, or every problem found.

Each question becomes the core question System One builds for its twin, so the same question gets the same
prompt, probabilities and calibration on either route:

- `noul` with `criteria: {true_description, false_description}` is System One's `noul` with
  `criteria: {true, false}`: a side missing, null or `""` reads as the default side, as it does there;
- `choice` with `criteria: {option id: description}` is System One's `choice`; a description of `""` (Google's
  "no description") or null (pydantic-ai sends it) is System One's null: the option reads as its id;
- `score` with `criteria: [level, ...]` is System One's `score`, each level a non-empty string, lowest first;
- `instructions` (a string, one text block or a list of text blocks, joined with newlines) is System One's
  string `instructions`;
- `input` (a string, one content block or a list of them) is one user message, as a System One string state is:
  text blocks joined with newlines, each image where it stands.

`google-genai` checks almost nothing before it sends (`questions: {}`, `input: ""`, a one-option choice and a
score with `criteria: []` all reach the server), so everything is checked here, every problem located in the body,
and unknown fields are refused as Google's API refuses them: a misspelt field is a 400, not a silently different
question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from api.checking.checker import Checker
from api.checking.images import hosted_located, images_total_check
from api.checking.json_body import JsonKeyed, Loc, document_problems, json_cache_new, json_cached, json_kind
from api.checking.limits import Limits, ModelUnknown
from api.google.contract import MODEL_PREFIX, NOUL_CRITERIA, QUESTION, REQUEST
from api.google.inputs import input_check, instructions_check, unknown_keys_check
from inference.errors import Problem, RequestInvalid, value_quoted
from inference.images import Image
from inference.lru import SizedLRU
from inference.questions import Question, QuestionType, question_build
from inference.requests import EvaluationRequest
from serving.config import language_model_named

_ID_INVALID = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class GoogleRequest:
    """A valid Google Decisions request: what the core evaluates, and the JSON as sent for the audit."""

    model: str
    """As sent (`models/jev-latest` or `jev-latest`)."""
    evaluation: EvaluationRequest
    input: Any
    """The input exactly as sent, stored at level `full`."""
    questions: Any
    """The questions object exactly as sent."""
    hosted: tuple[tuple[Image, Loc], ...] = ()
    """Hosted image URLs (`uri`s) the service fetches before the evaluation, each with where it stands in the body."""


def google_claims(data: Any) -> bool:
    """Whether a body on the shared path is Google's: its `questions` is a map of ids to questions (OpenAI's is a
    list)."""
    return isinstance(data, dict) and isinstance(data.get("questions"), dict)


def model_served(*, model: str, names: frozenset[str]) -> bool:
    """Whether `model`, with or without Google's `models/` prefix, names the served language model."""
    return language_model_named(name=model.removeprefix(MODEL_PREFIX), names=names)


def google_request_parse(*, data: Any, limits: Limits, models: frozenset[str]) -> GoogleRequest:
    """Validate everything before any work; ModelUnknown for a model not served, else RequestInvalid with every
    problem found, located in the body."""
    invalid = document_problems(data=data)
    if invalid:  # first: the other checks quote keys and values
        raise RequestInvalid(invalid)
    if not isinstance(data, dict):
        raise RequestInvalid(
            [Problem((), f"Invalid type: the body must be a JSON object, got {json_kind(data)}", "invalid_type")]
        )
    check = Checker(limits=limits.images)
    unknown_keys_check(check, data, REQUEST.keys, ())
    model = data.get("model")
    if "model" not in data:
        check.add(("model",), "Missing required field: 'model'", "missing")
    elif not isinstance(model, str):
        check.add(("model",), f"Invalid type: expected a string, got {json_kind(model)}", "invalid_type")
    elif model.removeprefix(MODEL_PREFIX) == "":
        check.add(("model",), "model must name a model, e.g. models/jev-latest", "empty_model")
    elif not model_served(model=model, names=models):
        raise ModelUnknown(model)
    conversation = input_check(check, data)
    check.problems += [
        Problem(("input", *p.loc[1:]) if p.loc[:1] == ("state",) else p.loc, p.msg, p.type)
        for p in images_total_check(images=check.images, limits=limits.images)
    ]
    questions = _questions_check(check, data, limits)
    if check.problems:
        raise RequestInvalid(check.problems)
    return GoogleRequest(
        model=str(model),
        evaluation=EvaluationRequest(conversation=conversation, questions=questions),
        input=data["input"],
        questions=data["questions"],
        hosted=hosted_located(images=check.images, limits=limits.images),
    )


# -- The questions -----------------------------------------------------------------------------------------------


def _questions_check(check: Checker, data: dict[str, Any], limits: Limits) -> tuple[Question, ...]:
    loc: Loc = ("questions",)
    if "questions" not in data:
        check.add(loc, "Missing required field: 'questions'", "missing")
        return ()
    questions = data["questions"]
    if not isinstance(questions, dict):
        check.add(
            loc,
            f"Invalid type: expected an object of question id to question, got {json_kind(questions)}",
            "invalid_type",
        )
        return ()
    if not 1 <= len(questions) <= limits.max_questions:
        check.add(
            loc,
            f"Between 1 and {limits.max_questions} questions are allowed on this server, got {len(questions)}",
            "too_short" if not questions else "too_long",
        )
        return ()
    built = []
    for qid, question in questions.items():
        if not _id_valid(qid):
            check.add(
                (*loc, qid),
                "A question id must be non-empty, without control characters or leading or trailing whitespace",
                "invalid_id",
            )
            continue
        found = json_cached(
            cache=_parsed,
            key=(qid, limits.max_answers, limits.levels),
            value=question,
            build=partial(_question_check, check, qid, question, (*loc, qid), limits),
        )
        if found is not None:
            built.append(found)
    return tuple(built)


_parsed: SizedLRU[JsonKeyed, Question] = json_cache_new()
"""Valid questions by id and JSON, as System One keeps them (`api.systemone.parsing`): callers send the same
questions with ever new inputs, and a question sent again is the same object, which the prompt compiler's caches
find."""


def _id_valid(key: str) -> bool:
    """Google's rule for ids (of questions and of choice options): non-empty, no control characters, no leading or
    trailing whitespace."""
    return key != "" and key == key.strip() and _ID_INVALID.search(key) is None


def _question_check(check: Checker, qid: str, question: Any, loc: Loc, limits: Limits) -> Question | None:
    """The core question System One would build for the same question under `qid`."""
    if not isinstance(question, dict):
        check.add(loc, f"Invalid type: expected a question object, got {json_kind(question)}", "invalid_type")
        return None
    kind = question.get("type")
    if not isinstance(kind, str) or kind not in QUESTION.members:  # a list or an object is no key of a map
        check.add(
            (*loc, "type"),
            f"Invalid question type {value_quoted(kind)}; expected one of {', '.join(QUESTION.members)}"
            if "type" in question
            else "Missing required field: 'type'",
            "invalid_value" if "type" in question else "missing",
        )
        return None
    before = len(check.problems)
    unknown_keys_check(check, question, QUESTION.members[kind].keys, loc)
    instructions = instructions_check(check, question.get("instructions"), (*loc, "instructions"))
    criteria_loc = (*loc, "criteria")
    criteria: Any
    if kind == "noul":
        criteria = _noul_criteria(check, question.get("criteria"), criteria_loc)
    elif kind == "choice":
        criteria = _choice_criteria(check, question.get("criteria"), criteria_loc, limit=limits.max_answers)
    else:
        criteria = _score_criteria(check, question.get("criteria"), criteria_loc, limit=limits.levels)
    if len(check.problems) > before:
        return None
    return question_build(id=qid, type=cast(QuestionType, kind), instructions=instructions, criteria=criteria)


def _noul_criteria(check: Checker, value: Any, loc: Loc) -> dict[str, str | None] | None:
    """System One's noul criteria, `{"true": ..., "false": ...}`, with the sides given (None: the defaults)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        check.add(
            loc,
            f"Invalid type: expected an object with true_description and/or false_description, got {json_kind(value)}",
            "invalid_type",
        )
        return None
    unknown_keys_check(check, value, NOUL_CRITERIA.keys, loc)
    sides: dict[str, str | None] = {}
    for side in ("true", "false"):
        key = f"{side}_description"
        found = value.get(key)
        if found is not None and not isinstance(found, str):
            check.add((*loc, key), f"Invalid type: expected a string, got {json_kind(found)}", "invalid_type")
        elif key in value:
            sides[side] = found
    return sides


def _choice_criteria(check: Checker, value: Any, loc: Loc, *, limit: int) -> dict[str, str | None]:
    """System One's choice criteria: option id -> description, None (the id itself) for `""` or null."""
    if not isinstance(value, dict):
        check.add(
            loc,
            "Missing required field: 'criteria'"
            if value is None
            else f"Invalid type: expected an object of option id to description, got {json_kind(value)}",
            "missing" if value is None else "invalid_type",
        )
        return {}
    if not 2 <= len(value) <= limit:
        check.add(
            loc,
            f"A choice question needs between 2 and {limit} options, got {len(value)}",
            "too_short" if len(value) < 2 else "too_long",
        )
        return {}
    criteria: dict[str, str | None] = {}
    for key, description in value.items():
        if not _id_valid(key):
            check.add(
                (*loc, key),
                "An option id must be non-empty, without control characters or leading or trailing whitespace",
                "invalid_id",
            )
        elif description is not None and not isinstance(description, str):
            check.add((*loc, key), f"Invalid type: expected a string, got {json_kind(description)}", "invalid_type")
        else:
            criteria[key] = description or None
    return criteria


def _score_criteria(check: Checker, value: Any, loc: Loc, *, limit: int) -> list[str]:
    """System One's score criteria: the levels' rubrics, lowest first, each a non-empty string."""
    if not isinstance(value, list):
        check.add(
            loc,
            "Missing required field: 'criteria'"
            if value is None
            else f"Invalid type: expected a list of levels, lowest first, got {json_kind(value)}",
            "missing" if value is None else "invalid_type",
        )
        return []
    if not 2 <= len(value) <= limit:
        check.add(
            loc,
            f"A score question needs between 2 and {limit} levels, got {len(value)}",
            "too_short" if len(value) < 2 else "too_long",
        )
        return []
    levels = []
    for i, level in enumerate(value):
        if not isinstance(level, str):
            check.add((*loc, i), f"Invalid type: a level is a string, got {json_kind(level)}", "invalid_type")
        elif not level.strip():
            check.add((*loc, i), "A level must not be empty", "empty_level")
        else:
            levels.append(level)
    return levels
