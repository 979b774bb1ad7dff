"""Whether the served model can see, and how an image stands in its prompt.

Qwen's vision models (Qwen2-VL to Qwen3.6) mark an image with one `<|vision_start|><|image_pad|>
<|vision_end|>` placeholder; SGLang decodes the ids it is sent, finds each placeholder, and expands its
`<|image_pad|>` into as many tokens as the image needs (its own multimodal processor), taking the images
in `image_data` in order. So the prompt must hold exactly one placeholder per image and no other: a
mismatch is refused by SGLang, and text that spells the markup (`<|image_pad|>` in a user's text is
parsed as the special token) would shift every image onto the wrong placeholder.

Support is decided once, at startup, from the tokenizer: the three markers must be single special
tokens. The chat template decides where the placeholder goes: a multimodal template (Qwen3.6's)
renders `{"type": "image"}` content parts itself; a template that renders string content only gets
the placeholder inside the message's text, where Qwen's multimodal templates put it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from inference.errors import Problem, RequestInvalid
from inference.questions import Question
from inference.tokenizer import Tokenizer

VISION_START = "<|vision_start|>"
IMAGE_PAD = "<|image_pad|>"
VISION_END = "<|vision_end|>"
PLACEHOLDER = f"{VISION_START}{IMAGE_PAD}{VISION_END}"
_PROBE = ({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe it."}]},)


@dataclass(frozen=True)
class Vision:
    """The served model's image markers, as token ids, and how its chat template takes images."""

    start_id: int
    pad_id: int
    end_id: int
    template_parts: bool
    """True: the chat template renders image content parts; False: the placeholder goes in the text."""

    @property
    def image_text(self) -> str | None:
        """What `Message.chat` puts in place of an image (None: a content part, for the template)."""
        return None if self.template_parts else PLACEHOLDER


def vision_probe(*, tokenizer: Tokenizer) -> Vision | None:
    """The model's vision markers, or None when its tokenizer has none (a model that cannot see)."""
    ids = tokenizer.encode(PLACEHOLDER)
    if len(ids) != 3 or [tokenizer.decode([i]) for i in ids] != [VISION_START, IMAGE_PAD, VISION_END]:
        return None
    try:
        rendered = tokenizer.render_chat(_PROBE)
    except RequestInvalid:  # the template renders string content only
        rendered = ""
    return Vision(start_id=ids[0], pad_id=ids[1], end_id=ids[2], template_parts=rendered.count(PLACEHOLDER) == 1)


def images_refused(*, state: bool = True, questions: Sequence[Question] = ()) -> RequestInvalid:
    """The served model cannot see: the problem of the state's images (`state`), and of each image of the
    `questions`' instructions, located at its part (`questions.<id>.instructions.<index>`)."""
    message = "the served model cannot see images; send text only"
    problems = [Problem(("state",), message, "images_not_supported")] if state else []
    problems += [
        Problem(("questions", q.id, "instructions", index), message, "images_not_supported")
        for q in questions
        for index, part in enumerate(q.parts)
        if not isinstance(part, str)
    ]
    return RequestInvalid(problems)


def placeholders_check(
    *,
    vision: Vision,
    images: int,
    prefix_ids: Sequence[int],
    suffixes: Sequence[tuple[str, Sequence[int], int]],
) -> None:
    """Exactly one placeholder per image: the prefix's `images` in the prefix, and each question's own images in its
    suffixes (`(question id, suffix ids, its images)`, every suffix sent with images). The model's image markup in
    the client's own text (the state, or a question's) would pair images with the wrong place."""
    markers = (vision.start_id, vision.pad_id)
    problems = [
        Problem(
            ("questions", qid),
            "the question spells the model's image markup (<|image_pad|> or <|vision_start|>); remove it",
            "image_markup",
        )
        for qid, ids, own in suffixes
        if any(ids.count(marker) != own for marker in markers)
    ]
    if any(prefix_ids.count(marker) != images for marker in markers):
        problems.insert(
            0,
            Problem(
                ("state",),
                "the state spells the model's image markup (<|image_pad|> or "
                "<|vision_start|>) besides its images; remove it",
                "image_markup",
            ),
        )
    if problems:
        raise RequestInvalid(list(dict.fromkeys(problems)))
