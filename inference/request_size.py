"""How much text a request holds, counted only until past a limit: a request with a lot of it is rendered and
tokenized off the event loop (`inference.runner.plan_prepare`, `inference.batch`).
"""

from __future__ import annotations

from typing import Any

from inference.requests import EvaluationRequest

OFF_LOOP_CHARACTERS = 16_384
"""Requests with more text than this are rendered and tokenised in a worker thread: a megabyte of
text takes a second to tokenise, and the event loop must keep answering meanwhile."""


def request_characters(*, request: EvaluationRequest, limit: int) -> int:
    """Characters of the texts a request's compile tokenises (its messages, keys included, and its questions'
    texts), counted until past `limit`. A question's count is kept on it (`Question.characters`): the API
    reuses a parsed question for every request that sends it again, and walking 64 questions' texts here
    cost as much as validating them."""
    total = text_size(value=[(m.content, m.extra) for m in request.conversation], limit=limit)
    for question in request.questions:
        if total > limit:
            break
        total += question.characters
    return total


def text_size(*, value: Any, limit: int) -> int:
    """Characters of the strings in `value` (keys included), counted until past `limit`."""
    total = 0
    stack = [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return total
