"""Google's Decisions request, declared once: the parser (`api.google.parsing`, `api.google.inputs`) takes these
shapes' keys and union members, the OpenAPI document renders their schemas (`api.google.openapi`).

Where the parser reads more than the shape says (an id's characters, a level not blank, one of `data` or `uri`),
the description says it, and the parser's own problem is what a client gets.
"""

from __future__ import annotations

from typing import Any

from api.checking.shapes import Setting, Shape, Union, const, ref, text

MODEL_PREFIX = "models/"
"""Google's resource prefix of a model name (`models/jev-latest`); the bare name is accepted too."""
IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp")
"""The image `mime_type`s taken: the formats the image path reads (`api.checking.images`)."""
MAX_QUESTIONS = Setting("max_questions")
MAX_ANSWERS = Setting("max_answers")

TEXT_BLOCK = Shape(
    "GoogleTextBlock",
    "A text content block.",
    {
        "type": const("text", "`text`."),
        "text": text("The text."),
        "annotations": {
            "type": "array",
            "items": {"type": "object"},
            "description": "Citations of generated text: accepted, not read.",
        },
    },
    ("type", "text"),
)
IMAGE_BLOCK = Shape(
    "GoogleImageBlock",
    "An image content block: exactly one of base64 `data` or a `uri` (https, of a host the operator allows; "
    "refused where none is allowed), where the deployment takes images (`max_images`).",
    {
        "type": const("image", "`image`."),
        "data": text("The image's bytes, base64 (standard alphabet).", contentEncoding="base64"),
        "mime_type": text("The image's type; the bytes' own signature is what counts.", enum=list(IMAGE_TYPES)),
        "resolution": text(
            "Accepted, not read: the backend sees the image as it is.", enum=["low", "medium", "high", "ultra_high"]
        ),
        "uri": text("An https URL of a host the operator allows (`OPENJEV_IMAGE_URL_HOSTS`); else a 400."),
    },
    ("type",),
    {"oneOf": [{"required": ["data"]}, {"required": ["uri"]}]},
)
CONTENT_BLOCK = Union(
    "GoogleContentBlock",
    "One block of the input: text or an image (`document`, `audio` and `video` are refused with a 400).",
    {"text": TEXT_BLOCK, "image": IMAGE_BLOCK},
)
UNSUPPORTED_BLOCKS = ("document", "audio", "video")
"""Blocks of Google's shape this server does not read: refused with a 400 saying so."""

NOUL_CRITERIA = Shape(
    "GoogleNoulCriteria",
    "What yes and no mean: System One's `criteria.true` / `criteria.false`. A side missing, null or empty reads as "
    "the default side.",
    {
        "true_description": {"type": ["string", "null"], "description": "What a yes means."},
        "false_description": {"type": ["string", "null"], "description": "What a no means."},
    },
)
_INSTRUCTIONS: dict[str, Any] = {
    "description": "What is asked: a string, a text block or a list of text blocks (joined with newlines); "
    "required, and an empty one asks the type's own question (as System One's null or empty instructions). Text "
    "only: images go in the input.",
    "oneOf": [
        {"type": "string"},
        TEXT_BLOCK.ref,
        {"type": "array", "items": TEXT_BLOCK.ref, "minItems": 1},
    ],
}
_QUESTION_TYPE = "The question's type: `noul` (yes/no), `choice` (one of its options) or `score` (a level)."
NOUL_QUESTION = Shape(
    "GoogleNoulQuestion",
    "A yes/no question: the answer is P(true).",
    {
        "type": const("noul", _QUESTION_TYPE),
        "instructions": _INSTRUCTIONS,
        "criteria": ref(NOUL_CRITERIA.name, "Optional: what yes and no mean."),
    },
    ("type", "instructions"),
)
CHOICE_QUESTION = Shape(
    "GoogleChoiceQuestion",
    "Pick one of the options: every option's probability.",
    {
        "type": const("choice", _QUESTION_TYPE),
        "instructions": _INSTRUCTIONS,
        "criteria": {
            "type": "object",
            "description": "Option id → description, in order; the model reads the description, or the id where it "
            'is `""` (or null). Ids are non-empty, without control characters or surrounding whitespace.',
            "additionalProperties": {"type": ["string", "null"]},
            "propertyNames": {"minLength": 1},
            "minProperties": 2,
            "maxProperties": MAX_ANSWERS,
        },
    },
    ("type", "instructions", "criteria"),
)
SCORE_QUESTION = Shape(
    "GoogleScoreQuestion",
    "Rate on ordered levels: the expected level index and every level's probability.",
    {
        "type": const("score", _QUESTION_TYPE),
        "instructions": _INSTRUCTIONS,
        "criteria": {
            "type": "array",
            "description": "Each level's rubric, lowest first; each a non-empty string.",
            "items": {"type": "string", "minLength": 1},
            "minItems": 2,
            "maxItems": MAX_ANSWERS,
        },
    },
    ("type", "instructions", "criteria"),
)
QUESTION = Union(
    "GoogleQuestion",
    "One question, discriminated by `type`.",
    {"noul": NOUL_QUESTION, "choice": CHOICE_QUESTION, "score": SCORE_QUESTION},
)
REQUEST = Shape(
    "GoogleDecisionRequest",
    "Google's Decisions request (`google-genai`'s `client.decisions.create`): told from OpenAI's by its "
    "`questions`, a map.",
    {
        "model": text(
            f"`{MODEL_PREFIX}jev-latest` (or any `jev-*` alias, the public or the served model id), with or without "
            f"the `{MODEL_PREFIX}` prefix; anything else is a 404 `NOT_FOUND`."
        ),
        "input": {
            "description": "What every question is about, read as one user message: a string, a content block, or "
            "a list of them (texts joined with newlines, images where they stand); not empty.",
            "oneOf": [
                {"type": "string", "minLength": 1},
                CONTENT_BLOCK.ref,
                {"type": "array", "items": CONTENT_BLOCK.ref, "minItems": 1},
            ],
        },
        "questions": {
            "type": "object",
            "description": "Question id → question, 1 to `max_questions` (`GET /v1/limits`, `google`); the answers "
            "come back under the same ids.",
            "additionalProperties": QUESTION.ref,
            "propertyNames": {"minLength": 1},
            "minProperties": 1,
            "maxProperties": MAX_QUESTIONS,
        },
    },
    ("model", "input", "questions"),
)
REQUEST_COMPONENTS: tuple[Shape | Union, ...] = (
    TEXT_BLOCK,
    IMAGE_BLOCK,
    CONTENT_BLOCK,
    NOUL_CRITERIA,
    NOUL_QUESTION,
    CHOICE_QUESTION,
    SCORE_QUESTION,
    QUESTION,
    REQUEST,
)
"""The request's components, in the document's order."""
