"""Checking a request exactly as its route does, without evaluating it: how a batch checks every line up front.

Each format's service parses and checks its body, then asks the shared plumbing to fetch images and evaluate
(`api.plumbing.evaluate`); inside `validation_only` that step raises `Validated` instead, so the line gets the
very errors its route would give and no model work is done. `evaluation_recorded` stores nothing for it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager


class Validated(Exception):
    """Raised in a `validation_only` block where a valid request would start its evaluation."""


_validating: contextvars.ContextVar[bool] = contextvars.ContextVar("openjev_validation_only", default=False)


@contextmanager
def validation_only() -> Iterator[None]:
    """In this block a format's service checks its body exactly as its route does (parse, model, classifier) and
    raises `Validated` instead of fetching images or evaluating: how a batch checks every line before any model
    work, with the very errors the route gives."""
    token = _validating.set(True)
    try:
        yield
    finally:
        _validating.reset(token)


def evaluation_starts() -> None:
    """Where a valid request starts its evaluation: raises `Validated` in a `validation_only` block."""
    if _validating.get():
        raise Validated
