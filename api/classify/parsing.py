"""`POST /v1/classify`'s body, validated once into a typed request, or one 400 naming every problem.

Other fields are ignored (clients send `user`, `rid`, `priority`, ...). Token ids as input are not
supported: the classifier's prompt is built around the text, with the served model's own tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.checking.json_body import document_problems, json_kind
from api.plumbing.api_error import ApiError, problems_text


@dataclass(frozen=True)
class ClassifyRequest:
    model: str
    """The classifier's name."""
    inputs: tuple[str, ...]
    input: Any
    """`input` exactly as sent, stored for the audit."""


def classify_request_parse(*, data: Any, max_inputs: int) -> ClassifyRequest:
    """`{"model": name, "input": text | [texts]}`; every problem found, as one 400."""
    invalid = document_problems(data=data)
    if invalid:
        raise ApiError(400, "invalid_request", problems_text(invalid))
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_request", f"the body must be a JSON object, got {json_kind(data)}")
    problems = []
    model = data.get("model")
    if "model" not in data:
        problems.append("`model` is required: the name of a classifier (GET /v1/models lists them)")
    elif not isinstance(model, str) or not model:
        problems.append(f"`model` must be a non-empty string, got {json_kind(model)}")
    texts = data.get("input")
    inputs: tuple[str, ...] = ()
    if "input" not in data:
        problems.append("`input` is required: a text, or a list of texts")
    elif isinstance(texts, str):
        inputs = (texts,)
    elif not isinstance(texts, list):
        problems.append(f"`input` must be a string or a list of strings, got {json_kind(texts)}")
    elif not texts:
        problems.append("`input` must not be an empty list")
    elif len(texts) > max_inputs:
        problems.append(f"`input` has {len(texts)} texts; at most {max_inputs} are allowed per request")
    else:
        wrong = [f"input[{i}] is {json_kind(t)}" for i, t in enumerate(texts) if not isinstance(t, str)]
        if wrong:
            problems.append(
                "`input` must be a list of strings (token ids are not supported): "
                + ", ".join(wrong[:5])
                + (", …" if len(wrong) > 5 else "")
            )
        else:
            inputs = tuple(texts)
    if problems:
        raise ApiError(400, "invalid_request", "; ".join(problems))
    return ClassifyRequest(model=str(model), inputs=inputs, input=texts)
