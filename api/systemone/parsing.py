"""`POST /v1/systemone`'s body, validated once into a typed request, or every problem found.

Hand-written rather than DRF serializers because the wire contract needs FastAPI-style `loc` paths
for every problem, byte-exact caller keys and no coercion (a number is not a string), and because
this runs on every request: a 64-question body validates in well under a millisecond. Problems are
located relative to the body; the error renderer puts them under `body`.

Images reach the state four ways, all typed `Image` parts of a user message (`api.checking.images`):
`image_url` content parts of a transcript's user messages; an object state whose `images` is a list
of image URLs (one user message: the images, then the rest of the object as compact JSON, as the seed
system sends it); and the official API's `assets`, whose placeholders stand for the image wherever they
appear inside the state's strings, the asset holding `data_base64` or naming a multipart part.

An http(s) URL goes to the backend as sent (SGLang fetches it) while the operator allows no image host; once
`OPENJEV_IMAGE_URL_HOSTS` names hosts, only https URLs of those hosts are taken, and the service fetches them
itself (`api.checking.image_fetch`), so the same rule holds on every route.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from api.checking.checker import Checker, conversation_check, is_text
from api.checking.images import assets_check, hosted_located, images_total_check
from api.checking.json_body import JsonKeyed, Loc, document_problems, json_cache_new, json_cached, json_kind
from api.checking.limits import Limits
from inference.errors import Problem, RequestInvalid, value_quoted
from inference.images import Image
from inference.lru import SizedLRU
from inference.questions import QUESTION_TYPES, Question, question_build
from inference.requests import EvaluationRequest, Message
from serving.config import language_model_named


@dataclass(frozen=True)
class SystemOneRequest:
    """A valid System One request: what the core evaluates, and the JSON as sent for the audit."""

    model: str
    evaluation: EvaluationRequest
    state: Any
    """The state exactly as sent (key order included), stored at level `full`."""
    questions: Any
    """The questions object exactly as sent."""
    hosted: tuple[tuple[Image, Loc], ...] = ()
    """Image URLs the service fetches before the evaluation (only where the operator allows hosts: otherwise they go
    to the backend as sent), each with where it stands in the body."""


WRONG_ROUTE = (
    "this is a Decisions request (`input`): POST it to /v1/decisions (OpenAI's shape, a list of `questions`, or "
    "Google's, a map of them); this route takes System One's `state` and a map of `questions`"
)


class WrongRoute(Exception):
    """The body is another wire format's, sent here: a 400 naming the route that takes it."""


def systemone_request_parse(
    *, data: Any, limits: Limits, models: frozenset[str], parts: Mapping[str, bytes] | None = None
) -> SystemOneRequest:
    """Validate everything before any work; raises RequestInvalid with every problem found. `parts` are a
    multipart body's image parts by name (the `request` part is `data`)."""
    invalid = document_problems(data=data)
    if invalid:  # first: the other checks quote keys and values
        raise RequestInvalid(invalid)
    if not isinstance(data, dict):
        raise RequestInvalid([Problem((), f"Input should be a JSON object, got {json_kind(data)}", "dict_type")])
    if "input" in data and "state" not in data:  # before anything else: every other problem would follow from it
        raise WrongRoute(WRONG_ROUTE)
    assets, asset_problems = assets_check(value=data.get("assets"), parts=parts or {}, limits=limits.images)
    check = Checker(assets=assets, limits=limits.images)
    check.problems += asset_problems
    model = data.get("model")
    if "model" not in data:
        check.add(("model",), "Field required", "missing")
    elif not isinstance(model, str):
        check.add(("model",), f"Input should be a string, got {json_kind(model)}", "string_type")
    elif not language_model_named(name=model, names=models):
        check.add(
            ("model",),
            f"Unknown model {value_quoted(model)}; use one of {', '.join(sorted(models))} or any jev-* alias",
            "unknown_model",
        )
    conversation: tuple[Message, ...] = ()
    if "state" not in data:
        check.add(("state",), "Field required", "missing")
    elif not is_text(data["state"]):
        check.add(
            ("state",), f"Input should be a string, object or array, got {json_kind(data['state'])}", "state_type"
        )
    else:
        conversation = conversation_check(check, data["state"])
        check.problems += images_total_check(images=check.images, limits=limits.images)
    questions = _questions_check(check, data, limits)
    if check.problems:
        raise RequestInvalid(check.problems)
    return SystemOneRequest(
        model=str(model),
        evaluation=EvaluationRequest(conversation=conversation, questions=questions),
        state=data["state"],
        questions=data["questions"],
        hosted=hosted_located(images=check.images, limits=limits.images),
    )


def _questions_check(check: Checker, data: dict[str, Any], limits: Limits) -> tuple[Question, ...]:
    loc: Loc = ("questions",)
    if "questions" not in data:
        check.add(loc, "Field required", "missing")
        return ()
    questions = data["questions"]
    if not isinstance(questions, dict):
        check.add(loc, f"Input should be an object of question id to question, got {json_kind(questions)}", "dict_type")
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
        result = _question_cached(check, qid, question, (*loc, qid), limits)
        if result is not None and check.holds_placeholder(question):
            check.add((*loc, qid), "images are accepted in the state only, not in questions", "unsupported_content")
        elif result is not None:
            built.append(result)
    return tuple(built)


_parsed: SizedLRU[JsonKeyed, Question] = json_cache_new()
"""Valid questions by id and JSON: callers send the same questions with ever new states, and checking
and building 64 of them was a tenth of the server's CPU on the 64-question request."""


def _question_cached(check: Checker, qid: str, question: Any, loc: Loc, limits: Limits) -> Question | None:
    return json_cached(
        cache=_parsed,
        key=(qid, limits.max_answers),
        value=question,
        build=lambda: _question_check(check, qid, question, loc, limits),
    )


def _question_check(check: Checker, qid: str, question: Any, loc: Loc, limits: Limits) -> Question | None:
    if not isinstance(question, dict):
        check.add(loc, f"Input should be a question object, got {json_kind(question)}", "dict_type")
        return None
    qtype = question.get("type")
    if qtype not in QUESTION_TYPES:
        msg = (
            "Field required"
            if "type" not in question
            else f"Input tag {value_quoted(qtype)} is not one of 'noul', 'choice', 'score'"
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


def _noul_check(check: Checker, criteria: Any, loc: Loc, limits: Limits) -> None:
    if criteria is None:
        return
    if not isinstance(criteria, dict):
        check.add(loc, f"Input should be an object with 'true' and/or 'false', got {json_kind(criteria)}", "dict_type")
        return
    for key, value in criteria.items():
        if key not in ("true", "false"):
            check.add((*loc, key), "Only 'true' and 'false' are allowed in noul criteria", "extra_forbidden")
        else:
            check.text(value, (*loc, key), nullable=True)


def _choice_check(check: Checker, criteria: Any, loc: Loc, limits: Limits) -> None:
    if not isinstance(criteria, dict):
        check.add(
            loc,
            f"Input should be an object of option name to description, got {json_kind(criteria)}",
            "missing" if criteria is None else "dict_type",
        )
        return
    if not check.count(criteria, loc, limit=limits.max_answers, what="choice"):
        return
    for key, value in criteria.items():
        check.text(value, (*loc, key), nullable=True)


def _score_check(check: Checker, criteria: Any, loc: Loc, limits: Limits) -> None:
    if isinstance(criteria, dict):
        check.add(
            loc, 'Score levels must be an array, lowest first; the object form {"0": ...} is not accepted', "list_type"
        )
        return
    if not isinstance(criteria, list):
        check.add(
            loc,
            f"Input should be an array of levels, got {json_kind(criteria)}",
            "missing" if criteria is None else "list_type",
        )
        return
    if not check.count(criteria, loc, limit=limits.levels, what="score"):
        return
    for i, level in enumerate(criteria):
        check.text(level, (*loc, i), nullable=False)
