"""The core's failures as a small hierarchy; the HTTP layer (`api.plumbing.error_responses`) maps each class to a
status."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

QUOTE_MAX_CHARACTERS = 200
"""What an error quotes of any one value a client sent (a key, a type, a model name): a client value is never
echoed at length, so an error stays small whatever the body held (a 1 MB field name gave a 3 MB error)."""
PROBLEMS_TEXT_MAX = 20
"""Problems spelled out in an error's one-line text (the log, `RequestInvalid`'s message)."""


def text_cut(text: str, *, limit: int = QUOTE_MAX_CHARACTERS) -> str:
    """`text`, or its first `limit` characters and an ellipsis."""
    return text if len(text) <= limit else f"{text[:limit]}…"


def value_quoted(value: object) -> str:
    """A client's value as an error quotes it: a string in quotes, cut to `QUOTE_MAX_CHARACTERS`; a number,
    a boolean or null as itself; anything else by its kind only."""
    if isinstance(value, str):
        return repr(text_cut(value))
    if value is None or isinstance(value, bool | int | float):
        return text_cut(repr(value))
    return f"a {type(value).__name__}"


def loc_bounded(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """A location with each key cut to `QUOTE_MAX_CHARACTERS` (keys are the client's: question ids, field names)."""
    return tuple(text_cut(part) if isinstance(part, str) else part for part in loc)


def problems_line(problems: Sequence[Problem], *, root: tuple[str | int, ...] = ()) -> str:
    """The problems as one line (`root.questions.q.type: ...; ...`), the first `PROBLEMS_TEXT_MAX` of them."""
    text = "; ".join(
        f"{'.'.join(map(str, loc_bounded((*root, *p.loc))))}: {p.msg}" for p in problems[:PROBLEMS_TEXT_MAX]
    )
    more = len(problems) - PROBLEMS_TEXT_MAX
    return f"{text}; and {more} more" if more > 0 else text


class InferenceError(Exception):
    """Base of every failure the core reports on purpose."""


@dataclass(frozen=True)
class Problem:
    """One problem with the request, located within it (`("questions", "q", "criteria")`; `()` for the
    request as a whole), so the caller can point at the field in its own wire format."""

    loc: tuple[str | int, ...]
    msg: str
    type: str


class RequestInvalid(InferenceError):
    """The request cannot be evaluated as sent: nothing was sent to the backend."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(problems_line(problems))
        self.problems = problems


class Overloaded(InferenceError):
    """Too many evaluations are active in this process: retry shortly."""


class BackendUnavailable(InferenceError):
    """The backend cannot be reached or is still starting."""


class BackendFailed(InferenceError):
    """The backend answered with an error or with log-probs we cannot trust."""


class EvaluationTimeout(InferenceError):
    """The evaluation ran past its deadline."""


class StartupError(InferenceError):
    """The evaluator cannot start as configured (bad tokenizer, too few labels, missing model)."""
