"""A `POST /v1/decisions` body, validated once into the core's typed request, or every problem found.

Its `input` reads as `api.decisions.inputs` reads it, its `questions` as `api.decisions.questions` does.

Unknown parameters are refused, as OpenAI's API refuses them, so a misspelt field is a 400, not a
silently different question.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.checking.checker import Checker
from api.checking.images import hosted_located, images_total_check
from api.checking.json_body import Loc, document_problems, json_kind
from api.checking.limits import Limits, ModelUnknown
from api.decisions.fields import string_check, unknown_keys_check
from api.decisions.inputs import conversation_parse
from api.decisions.openapi_request import DecisionCacheOptionsSerializer, DecisionsRequestSerializer
from api.decisions.questions import Asked, questions_check
from api.openapi.fields import serializer_keys
from inference.errors import Problem, RequestInvalid
from inference.images import Image
from inference.requests import EvaluationRequest
from serving.config import language_model_named

SAFETY_IDENTIFIER_MAX = 64
PROMPT_CACHE_KEY_MAX = 256
_TOP_KEYS = serializer_keys(DecisionsRequestSerializer)
_CACHE_OPTION_KEYS = serializer_keys(DecisionCacheOptionsSerializer)


WRONG_ROUTE = (
    "This is a System One request (`state` and a map of `questions`): POST it to /v1/systemone. This route takes "
    "OpenAI's Decisions API: `input` and a list of `questions`"
)


@dataclass(frozen=True)
class DecisionsRequest:
    model: str
    evaluation: EvaluationRequest
    asked: tuple[Asked, ...]
    """One per question, in order."""
    input: Any
    """The input exactly as sent, stored at level `full`."""
    questions: Any
    safety_identifier: str
    prompt_cache_key: str
    hosted: tuple[tuple[Image, Loc], ...] = ()
    """Hosted image URLs the service fetches before the evaluation (where the operator allows hosts), each with
    where it stands in the body (`api.checking.image_fetch`)."""

    def position_of(self, *, question_id: str) -> int:
        """Where the core's question id stands in the request (its problems are located by id)."""
        return next(i for i, q in enumerate(self.evaluation.questions) if q.id == question_id)


def decisions_request_parse(*, data: Any, limits: Limits, models: frozenset[str]) -> DecisionsRequest:
    """Validate everything before any work; ModelUnknown for a model not served, else RequestInvalid with
    every problem found, located in the body."""
    invalid = document_problems(data=data)
    if invalid:
        raise RequestInvalid(invalid)
    if not isinstance(data, dict):
        raise RequestInvalid(
            [Problem((), f"Invalid type: the body must be a JSON object, got {json_kind(data)}", "invalid_type")]
        )
    if "state" in data and "input" not in data:  # before anything else: every other problem would follow from it
        raise RequestInvalid([Problem(("state",), WRONG_ROUTE, "wrong_route")])
    check = Checker(limits=limits.images)
    unknown_keys_check(check, data, _TOP_KEYS, ())
    model = string_check(check, data, "model", ())
    if model is not None and not language_model_named(name=model, names=models):
        raise ModelUnknown(model)
    if "input" not in data:
        check.add(("input",), "Missing required parameter: 'input'", "missing_required_parameter")
    elif isinstance(data["input"], str) and not data["input"].strip():
        check.add(
            ("input",),
            "Invalid 'input': empty string. Expected a string with at least one character that is not a space",
            "empty_string",
        )
    conversation = conversation_parse(check, data.get("input")) if "input" in data else ()
    questions, asked = questions_check(check, data, limits)
    check.problems += [  # the input's images and the questions' together
        Problem(("input", *p.loc[1:]) if p.loc[:1] == ("state",) else p.loc, p.msg, p.type)
        for p in images_total_check(images=check.images, limits=limits.images)
    ]
    safety_identifier = _bounded_string(check, data, "safety_identifier", SAFETY_IDENTIFIER_MAX)
    prompt_cache_key = _bounded_string(check, data, "prompt_cache_key", PROMPT_CACHE_KEY_MAX)
    _cache_options_check(check, data.get("prompt_cache_options"))
    if check.problems:
        raise RequestInvalid(check.problems)
    return DecisionsRequest(
        model=str(model),
        evaluation=EvaluationRequest(conversation=conversation, questions=questions),
        asked=asked,
        input=data["input"],
        questions=data["questions"],
        safety_identifier=safety_identifier,
        prompt_cache_key=prompt_cache_key,
        hosted=hosted_located(images=check.images, limits=limits.images),
    )


def _bounded_string(check: Checker, data: dict[str, Any], key: str, limit: int) -> str:
    value = string_check(check, data, key, (), required=False) or ""
    if len(value) > limit:
        check.add((key,), f"{key} is limited to {limit} characters, got {len(value)}", "string_above_max_length")
        return ""
    return value


def _cache_options_check(check: Checker, options: Any) -> None:
    """Accepted and checked, then left to the backend, whose prefix cache needs no breakpoints."""
    if options is None:
        return
    if not isinstance(options, dict):
        check.add(
            ("prompt_cache_options",), f"Invalid type: expected an object, got {json_kind(options)}", "invalid_type"
        )
        return
    unknown_keys_check(check, options, _CACHE_OPTION_KEYS, ("prompt_cache_options",))
    if options.get("mode") not in (None, "implicit", "explicit"):
        check.add(("prompt_cache_options", "mode"), "mode must be 'implicit' or 'explicit'", "invalid_value")
    if options.get("ttl") not in (None, "30m"):
        check.add(("prompt_cache_options", "ttl"), "ttl must be '30m'", "invalid_value")
