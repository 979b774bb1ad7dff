"""Engine failures as a small hierarchy; `evaluations.errors` maps each class to one HTTP status."""

from __future__ import annotations

from dataclasses import dataclass


class InferenceError(Exception):
    """Base of every failure the core reports on purpose."""


@dataclass(frozen=True)
class Problem:
    """One validation problem, located like FastAPI's `loc` so clients can point at the field."""

    loc: tuple[str | int, ...]
    msg: str
    type: str


class RequestInvalid(InferenceError):
    """The request cannot be evaluated as sent (422): nothing was sent to the backend."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(f"{'.'.join(map(str, p.loc))}: {p.msg}" for p in problems))
        self.problems = problems


class Overloaded(InferenceError):
    """Too many evaluations are active in this process (529)."""


class BackendUnavailable(InferenceError):
    """The backend cannot be reached or is still starting (503)."""


class BackendFailed(InferenceError):
    """The backend answered with an error or with log-probs we cannot trust (502)."""


class EvaluationTimeout(InferenceError):
    """The evaluation ran past its deadline (504)."""


class StartupError(InferenceError):
    """The evaluator cannot start as configured (bad tokenizer, too few labels, missing model)."""
