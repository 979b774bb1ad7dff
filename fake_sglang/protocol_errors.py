"""The fake's refusal of a request, shared by the protocol checks."""

from __future__ import annotations


class BadRequest(Exception):
    """A 400; ``validation`` selects FastAPI's validation-error body instead of SGLang's ValueError body."""

    def __init__(self, message: str, *, validation: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.validation = validation
