"""`POST /v1/systemone`'s body, validated once into a typed request, or every problem found.

Hand-written rather than DRF serializers because the wire contract needs FastAPI-style `loc` paths
for every problem, byte-exact caller keys and no coercion (a number is not a string), and because
this runs on every request: a 64-question body validates in well under a millisecond. Problems are
located relative to the body; the error renderer puts them under `body`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evaluations.config import language_model_named
from evaluations.json_body import Loc, document_problems, json_kind
from inference.errors import Problem, RequestInvalid
from inference.questions import QUESTION_TYPES, Question, question_build, text_render
from inference.requests import ROLES, EvaluationRequest, Message, Role, conversation_of_text


@dataclass(frozen=True)
class Limits:
    max_questions: int
    max_answers: int


@dataclass(frozen=True)
class SystemOneRequest:
    """A valid System One request: what the core evaluates, and the JSON as sent for the audit."""

    model: str
    evaluation: EvaluationRequest
    state: Any
    """The state exactly as sent (key order included), stored at level `full`."""
    questions: Any
    """The questions object exactly as sent."""


def _is_text(value: Any) -> bool:
    """A text field may be a string, an object or an array (structured text the model reads as JSON)."""
    return isinstance(value, str | dict | list)


class _Checker:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, loc: Loc, msg: str, type_: str) -> None:
        self.problems.append(Problem(loc, msg, type_))

    def count(self, items: dict[str, Any] | list[Any], loc: Loc, *, limit: int, what: str) -> bool:
        """Whether `items` holds 2 to `limit` entries (a problem is added when not)."""
        if 2 <= len(items) <= limit:
            return True
        self.add(loc, f"A {what} needs 2 to {limit} {'options' if what == 'choice' else 'levels'}, got {len(items)}",
                 "too_short" if len(items) < 2 else "too_long")
        return False

    def text(self, value: Any, loc: Loc, *, nullable: bool) -> None:
        if value is None and nullable:
            return
        if not _is_text(value):
            expected = "a string, object or array" + (" or null" if nullable else "")
            self.add(loc, f"Input should be {expected}, got {json_kind(value)}", "text_type")


def systemone_request_parse(*, data: Any, limits: Limits, models: frozenset[str]) -> SystemOneRequest:
    """Validate everything before any work; raises RequestInvalid with every problem found."""
    invalid = document_problems(data=data)
    if invalid:  # first: the other checks quote keys and values
        raise RequestInvalid(invalid)
    check = _Checker()
    if not isinstance(data, dict):
        raise RequestInvalid([Problem((), f"Input should be a JSON object, got {json_kind(data)}", "dict_type")])
    model = data.get("model")
    if "model" not in data:
        check.add(("model",), "Field required", "missing")
    elif not isinstance(model, str):
        check.add(("model",), f"Input should be a string, got {json_kind(model)}", "string_type")
    elif not language_model_named(name=model, names=models):
        check.add(("model",), f"Unknown model {model!r}; use one of {', '.join(sorted(models))} or any jev-* alias",
                  "unknown_model")
    conversation: tuple[Message, ...] = ()
    if "state" not in data:
        check.add(("state",), "Field required", "missing")
    elif not _is_text(data["state"]):
        check.add(("state",), f"Input should be a string, object or array, got {json_kind(data['state'])}",
                  "state_type")
    else:
        conversation = _conversation_check(check, data["state"])
    questions = _questions_check(check, data, limits)
    if check.problems:
        raise RequestInvalid(check.problems)
    return SystemOneRequest(model=str(model), evaluation=EvaluationRequest(conversation=conversation,
                                                                           questions=questions),
                            state=data["state"], questions=data["questions"])


def _conversation_check(check: _Checker, state: Any) -> tuple[Message, ...]:
    """A chat transcript (a non-empty list of objects with `role`, bare or as `{"messages": [...]}`) is
    kept as sent; any other state is one user message, structured values as compact JSON."""
    loc: Loc
    if isinstance(state, dict) and list(state) == ["messages"]:
        candidate, loc = state["messages"], ("state", "messages")
    else:
        candidate, loc = state, ("state",)
    if not (isinstance(candidate, list) and candidate and all(isinstance(m, dict) and "role" in m for m in candidate)):
        return conversation_of_text(text=text_render(state))
    messages = [_message_check(check, message, (*loc, i)) for i, message in enumerate(candidate)]
    return tuple(m for m in messages if m is not None)


def _message_check(check: _Checker, message: dict[str, Any], loc: Loc) -> Message | None:
    role = message["role"]
    if role not in ROLES:
        check.add((*loc, "role"), f"role must be one of {', '.join(sorted(ROLES))}", "enum")
        return None
    content = message.get("content")
    if content is None or isinstance(content, str):
        text = content or ""
    elif isinstance(content, list):
        parts = _text_parts(check, content, (*loc, "content"))
        if parts is None:
            return None
        text = "\n".join(parts)
    else:
        check.add((*loc, "content"), "content must be a string or a list of text parts", "type_error")
        return None
    extra = tuple((key, value) for key, value in message.items() if key not in ("role", "content"))
    return Message(role=_role(role), content=text, extra=extra)


def _role(value: str) -> Role:
    return next(role for role in ROLES if role == value)


def _text_parts(check: _Checker, parts: list[Any], loc: Loc) -> list[str] | None:
    """The texts of a content list; None (and a problem) at the first part that is not text."""
    texts = []
    for i, part in enumerate(parts):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            check.add((*loc, i), f"only text content is supported, got {kind!r}", "unsupported_content")
            return None
    return texts


def _questions_check(check: _Checker, data: dict[str, Any], limits: Limits) -> tuple[Question, ...]:
    loc: Loc = ("questions",)
    if "questions" not in data:
        check.add(loc, "Field required", "missing")
        return ()
    questions = data["questions"]
    if not isinstance(questions, dict):
        check.add(loc, f"Input should be an object of question id to question, got {json_kind(questions)}",
                  "dict_type")
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
        check.add(loc, f"Input should be a question object, got {json_kind(question)}", "dict_type")
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
        check.add(loc, f"Input should be an object with 'true' and/or 'false', got {json_kind(criteria)}",
                  "dict_type")
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
            f"Input should be an object of option name to description, got {json_kind(criteria)}",
            "missing" if criteria is None else "dict_type",
        )
        return
    if not check.count(criteria, loc, limit=limits.max_answers, what="choice"):
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
            f"Input should be an array of levels, got {json_kind(criteria)}",
            "missing" if criteria is None else "list_type",
        )
        return
    if not check.count(criteria, loc, limit=limits.max_answers, what="score"):
        return
    for i, level in enumerate(criteria):
        check.text(level, (*loc, i), nullable=False)
