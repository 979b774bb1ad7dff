"""The core's failures as a small hierarchy; the HTTP layer (`api.errors`) maps each class to a status."""

from __future__ import annotations

from dataclasses import dataclass


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
        super().__init__("; ".join(f"{'.'.join(map(str, p.loc))}: {p.msg}" for p in problems))
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
