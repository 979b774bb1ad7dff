"""What the core is asked: a conversation and typed questions about it, already validated.

The HTTP layer parses and validates the client's JSON once, into these types, and locates every
problem in the body it received; the core never sees the wire format. What is left for the core to
refuse is only what it alone can know: token budgets, what the model's chat template renders and
whether the served model can see images at all.

An image is a typed part of a user message, never text: the prompt gets the model's placeholder
where the chat template puts the image, and the backend gets the image's URL beside the token ids. A
question's instructions may hold images too (`Question.parts`): they go in that question's branch only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from inference.images import Image
from inference.questions import Question

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")


Part = str | Image


@dataclass(frozen=True)
class Message:
    """One chat message: its content as text, or as text and images in order (user messages only)."""

    role: Role
    content: str | tuple[Part, ...]
    extra: tuple[tuple[str, Any], ...] = ()
    """The message's other keys as sent (a name, tool calls): the chat template may read them."""

    @property
    def images(self) -> tuple[Image, ...]:
        return () if isinstance(self.content, str) else tuple(p for p in self.content if isinstance(p, Image))

    def chat(self, *, image_text: str | None = None) -> dict[str, Any]:
        """The message as a chat template reads it. Images are `{"type": "image"}` content parts, or,
        with `image_text`, that text inside one string (for a template that renders strings only)."""
        content: str | list[dict[str, str]]
        if isinstance(self.content, str):
            content = self.content
        elif image_text is not None:
            content = "".join(image_text if isinstance(p, Image) else p for p in self.content)
        else:
            content = [{"type": "image"} if isinstance(p, Image) else {"type": "text", "text": p} for p in self.content]
        return {"role": self.role, "content": content, **dict(self.extra)}


def conversation_of_text(*, text: str) -> tuple[Message, ...]:
    """A state that is not a transcript: one user message."""
    return (Message(role="user", content=text),)


@dataclass(frozen=True)
class EvaluationRequest:
    """One evaluation: the conversation every question is asked about, and the questions in order."""

    conversation: tuple[Message, ...]
    questions: tuple[Question, ...]

    @property
    def images(self) -> tuple[Image, ...]:
        """Every image of the request, in prompt order: the conversation's (the shared prefix), then each question's
        own (its instructions', in its branch)."""
        return (
            *(image for message in self.conversation for image in message.images),
            *(image for question in self.questions for image in question.images),
        )
