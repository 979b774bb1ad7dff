"""What the core is asked: a conversation and typed questions about it, already validated.

The HTTP layer parses and validates the client's JSON once, into these types, and locates every
problem in the body it received; the core never sees the wire format. What is left for the core to
refuse is only what it alone can know: token budgets and what the model's chat template renders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from inference.questions import Question

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class Message:
    """One chat message, its content already reduced to text."""

    role: Role
    content: str
    extra: tuple[tuple[str, Any], ...] = ()
    """The message's other keys as sent (a name, tool calls): the chat template may read them."""

    def chat(self) -> dict[str, Any]:
        """The message as a chat template reads it."""
        return {"role": self.role, "content": self.content, **dict(self.extra)}


def conversation_of_text(*, text: str) -> tuple[Message, ...]:
    """A state that is not a transcript: one user message."""
    return (Message(role="user", content=text),)


@dataclass(frozen=True)
class EvaluationRequest:
    """One evaluation: the conversation every question is asked about, and the questions in order."""

    conversation: tuple[Message, ...]
    questions: tuple[Question, ...]
