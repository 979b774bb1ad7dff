"""Scoring defaults per served model and question shape, as measured by `bench/quality.py`.

A model's temperature is fitted by log loss on the bench's labelled items, so its probabilities mean
roughly what they say; debiasing and option orders are on where they raised the bench's accuracy.
Each question shape (`Question.shape`: noul, choice with 2 options, with 3-5, score) has its own
values, because a setting that helps two options can hurt five. A model that was never measured
gets temperature 1, no debiasing and one option order: nothing is assumed about it.

A production model is tuned without a code change: `bench/quality.py --backend sglang --write-tuning
FILE` measures it and writes a tuning file, which `OPENJEV_TUNING_FILE` loads at startup; its shapes
replace the built-in values for the model it names.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from inference.errors import StartupError
from inference.questions import SHAPES, Question, Shape

MAX_PERMUTATIONS = 16
"""The most option orders one question may be asked in (`OPENJEV_PERMUTATIONS` has the same bound)."""


@dataclass(frozen=True)
class ShapeTuning:
    """How the questions of one shape are scored."""

    temperature: float
    debias: bool
    """Divide out the content-free prior (when the evaluator measures priors at all)."""
    permutations: int = 1
    """Option orders averaged per question (1: the order sent only)."""


@dataclass(frozen=True)
class Tuning:
    """A served model's scoring, one `ShapeTuning` for every question shape."""

    shapes: Mapping[Shape, ShapeTuning]

    def of(self, question: Question) -> ShapeTuning:
        return self.shapes[question.shape]

    @property
    def debiases(self) -> bool:
        """Whether any shape divides out content-free priors (so the evaluator must measure them)."""
        return any(s.debias for s in self.shapes.values())


def tuning_uniform(*, temperature: float, debias: bool, permutations: int = 1) -> Tuning:
    """The same scoring for every shape: a model measured only as a whole, or a test's fixed scoring."""
    same = ShapeTuning(temperature=temperature, debias=debias, permutations=permutations)
    return Tuning(shapes=MappingProxyType(dict.fromkeys(SHAPES, same)))


def tuning_override(
    *, tuning: Tuning, temperature: float | None = None, debias: bool | None = None, permutations: int | None = None
) -> Tuning:
    """`tuning` with what the configuration sets explicitly (not None) applied to every shape: an
    operator's `OPENJEV_TEMPERATURE`, `OPENJEV_DEBIAS` or `OPENJEV_PERMUTATIONS` wins over any tuning."""
    return Tuning(
        shapes=MappingProxyType(
            {
                shape: ShapeTuning(
                    temperature=s.temperature if temperature is None else temperature,
                    debias=s.debias if debias is None else debias,
                    permutations=s.permutations if permutations is None else permutations,
                )
                for shape, s in tuning.shapes.items()
            }
        )
    )


UNMEASURED = tuning_uniform(temperature=1.0, debias=False)

TUNINGS = MappingProxyType(
    {
        # bench/quality.py --n 100: raw answers put every IMDB review on one side (47 %); debiased 69-72 %.
        "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF:q4_k_m": tuning_uniform(temperature=0.165, debias=True),
        # bench/quality.py --n 100 (docs/quality.md): debiasing took BoolQ from 64 % to 75 % and MMLU from
        # 39 % to 44 % with IMDB at 93-96 % either way. The wider bench (docs/quality.md, issue 26) found no
        # setting that beat debiasing on every task, and fitted the temperature per shape on the debiased
        # answers (--temperatures: ECE over each shape's items 0.056/0.076/0.075 at the one temperature,
        # 0.028/0.061/0.052 per shape, cross-validated); `score` has no bench task and keeps the one (0.417).
        # Choices with 3-5 options average three option orders of the debiased answers: on 587 fresh items
        # (--seed 1) +3.6 points [+0.1, +7.2] on the mean of the four 3-5-option tasks, none losing, at 2.2
        # times the cost (the rule written before that run: adopt if the interval is above 0 and no task's
        # is wholly below it); the temperature is the one fitted on those averaged answers. Choices of
        # six options or more were never measured: they keep what served every choice of three or more
        # before (one order, debiased, the temperature fitted on one order's 3-5-option answers), since
        # three orders of a 255-option prompt would triple its cost (past the request timeout on 2 cores).
        "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF:q4_k_m": Tuning(
            shapes=MappingProxyType(
                {
                    "noul": ShapeTuning(temperature=0.237, debias=True),
                    "choice 2": ShapeTuning(temperature=0.232, debias=True),
                    "choice 3-5": ShapeTuning(temperature=0.377, debias=True, permutations=3),
                    "choice 6+": ShapeTuning(temperature=0.549, debias=True),
                    "score": ShapeTuning(temperature=0.417, debias=True),
                }
            )
        ),
    }
)


class TuningFileError(StartupError):
    """An `OPENJEV_TUNING_FILE` the service cannot use: the message names the file and the field."""


@dataclass(frozen=True)
class TuningFile:
    """A tuning measured by `bench/quality.py --write-tuning` for one model."""

    path: Path
    model: str
    """The served model's name (the backend's `model`) the bench measured."""
    shapes: Mapping[Shape, ShapeTuning]
    """The shapes it measured; any other shape keeps the model's built-in values."""
    bench: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """What it came from, verbatim: the command and the bench's table (for the operator, not read)."""


def tuning_for(*, model: str, file: TuningFile | None = None) -> Tuning:
    """The model's built-in tuning (or the unmeasured one), with the shapes of `file` replacing their
    values; a file measured on another model is refused rather than silently applied to this one."""
    tuning = TUNINGS.get(model, UNMEASURED)
    if file is None:
        return tuning
    if file.model != model:
        raise TuningFileError(
            f"{file.path}: field 'model' is {file.model!r}, but the served model is {model!r} "
            "(measure the served model with bench/quality.py --write-tuning)"
        )
    return Tuning(shapes=MappingProxyType({**tuning.shapes, **file.shapes}))


FILE_FIELDS = ("model", "shapes", "bench")
SHAPE_FIELDS: Mapping[str, tuple[Callable[[Any], bool], str]] = MappingProxyType(
    {
        "temperature": (
            lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0,
            "a positive number",
        ),
        "debias": (lambda v: isinstance(v, bool), "true or false"),
        "permutations": (
            lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_PERMUTATIONS,
            f"an integer from 1 to {MAX_PERMUTATIONS}",
        ),
    }
)


def _fields_check(*, path: Path, where: str, value: Any, allowed: Sequence[str]) -> dict[str, Any]:
    """`value` as an object holding only `allowed` keys: a misspelt key must not be ignored quietly."""
    if not isinstance(value, dict):
        raise TuningFileError(f"{path}: {f'field {where!r}' if where else 'the file'} must be a JSON object")
    for key in value:
        if key not in allowed:
            name = f"{where}.{key}" if where else key
            raise TuningFileError(f"{path}: unknown field {name!r} (expected {', '.join(allowed)})")
    return value


def _shape_parse(*, path: Path, shape: str, value: Any) -> ShapeTuning:
    data = _fields_check(path=path, where=f"shapes.{shape}", value=value, allowed=tuple(SHAPE_FIELDS))
    for name, (check, rule) in SHAPE_FIELDS.items():
        if name not in data:
            raise TuningFileError(f"{path}: field 'shapes.{shape}.{name}' is missing ({rule})")
        if not check(data[name]):
            raise TuningFileError(f"{path}: field 'shapes.{shape}.{name}' is {data[name]!r}, not {rule}")
    return ShapeTuning(**data)


def tuning_file_load(*, path: Path) -> TuningFile:
    """Read and check a tuning file; every mistake is a `TuningFileError` naming the file and the field."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TuningFileError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TuningFileError(f"{path}: not JSON ({exc})") from None
    data = _fields_check(path=path, where="", value=data, allowed=FILE_FIELDS)
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise TuningFileError(f"{path}: field 'model' must be the served model's name, a non-empty string")
    shapes = _fields_check(path=path, where="shapes", value=data.get("shapes"), allowed=SHAPES)
    if not shapes:
        raise TuningFileError(f"{path}: field 'shapes' holds no shape (expected some of {', '.join(SHAPES)})")
    bench = data.get("bench", {})
    if not isinstance(bench, dict):
        raise TuningFileError(f"{path}: field 'bench' must be a JSON object")
    return TuningFile(
        path=path,
        model=model,
        bench=bench,
        shapes=MappingProxyType(
            {shape: _shape_parse(path=path, shape=shape, value=shapes[shape]) for shape in SHAPES if shape in shapes}
        ),
    )


def tuning_file_write(*, path: Path, model: str, shapes: Mapping[Shape, ShapeTuning], bench: Mapping[str, Any]) -> None:
    """Write what `tuning_file_load` reads back (shapes in their canonical order)."""
    body = {
        "model": model,
        "shapes": {
            shape: {"temperature": s.temperature, "debias": s.debias, "permutations": s.permutations}
            for shape in SHAPES
            if (s := shapes.get(shape)) is not None
        },
        "bench": dict(bench),
    }
    path.write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
