"""What Google's Decisions shape answers, declared once for the OpenAPI document: the answers, the usage, the
error in `google.rpc.Status`'s shape and its block of `GET /v1/limits`. The renderers (`api.google.render`,
`api.google.errors`) write these; the response contract (`tests/docs`) checks every answer against them."""

from __future__ import annotations

from api.checking.shapes import Shape, Union, const, integer, probability, ref, text

_CONFIDENCE = probability(
    "The winning outcome's probability, as Google defines `confidence`: max(noul, 1 − noul) for a noul, the top "
    "probability for a choice or a score. **Not** System One's `confidence` (how peaked the distribution is)."
)
_PROBABILITIES = {"type": "number", "minimum": 0, "maximum": 1}

NOUL_ANSWER = Shape(
    "GoogleNoulAnswer",
    "A noul's answer.",
    {
        "type": const("noul", "`noul`."),
        "noul": {
            "type": "number",
            "minimum": 0.01,
            "maximum": 0.99,
            "description": "P(true), System One's `noul` kept within [0.01, 0.99] (Google's range).",
        },
        "confidence": _CONFIDENCE,
    },
    ("type", "noul", "confidence"),
)
CHOICE_ANSWER = Shape(
    "GoogleChoiceAnswer",
    "A choice's answer.",
    {
        "type": const("choice", "`choice`."),
        "choice": text("The most likely option id (ties: the first)."),
        "confidence": _CONFIDENCE,
        "probabilities": {
            "type": "object",
            "description": "Every option id's probability, in the request's order; they sum to 1.",
            "additionalProperties": _PROBABILITIES,
        },
    },
    ("type", "choice", "confidence", "probabilities"),
)
SCORE_ANSWER = Shape(
    "GoogleScoreAnswer",
    "A score's answer.",
    {
        "type": const("score", "`score`."),
        "score": {"type": "number", "minimum": 0, "description": "The expected level index, Σ i·p_i."},
        "confidence": _CONFIDENCE,
        "probabilities": {
            "type": "object",
            "description": 'Every level\'s probability, keyed "0" to "n-1"; they sum to 1.',
            "additionalProperties": _PROBABILITIES,
        },
        "legend": {
            "type": "object",
            "description": "Each level's rubric, keyed as `probabilities`.",
            "additionalProperties": {"type": "string"},
        },
    },
    ("type", "score", "confidence", "probabilities", "legend"),
)
ANSWER = Union(
    "GoogleAnswer",
    "One answer, of its question's type.",
    {"noul": NOUL_ANSWER, "choice": CHOICE_ANSWER, "score": SCORE_ANSWER},
)
MODALITY_TOKENS = Shape(
    "GoogleModalityTokens",
    "Prompt tokens of one modality.",
    {"modality": text("`text`.", enum=["text"]), "tokens": integer("Tokens.")},
    ("modality", "tokens"),
)
USAGE = Shape(
    "GoogleUsage",
    "Tokens the backend read for this request, in Google's fields.",
    {
        "total_input_tokens": integer("Prompt tokens the backend read (warm-up and every question)."),
        "total_output_tokens": integer("N + 1: one position read per question, and the warm-up."),
        "total_tokens": integer("Input and output tokens."),
        "total_cached_tokens": integer(
            "Prompt tokens the backend served from its prefix cache (0 when it does not say)."
        ),
        "input_tokens_by_modality": {
            "type": "array",
            "items": MODALITY_TOKENS.ref,
            "description": "All input tokens as `text`, when the input holds no image; left out when it does (the "
            "backends do not count image tokens apart).",
        },
    },
    ("total_input_tokens", "total_output_tokens", "total_tokens", "total_cached_tokens"),
)
RESPONSE = Shape(
    "GoogleDecisionResponse",
    "Google's Decisions response.",
    {
        "answers": {
            "type": "object",
            "description": "Question id → answer, in the request's order.",
            "additionalProperties": ANSWER.ref,
        },
        "usage": ref(USAGE.name, "Tokens the backend read."),
        "model": text("The model as requested (Google's response names none; its clients keep it)."),
    },
    ("answers", "usage", "model"),
)


def _detail(kind: str, description: str, fields: dict[str, dict[str, object]]) -> Shape:
    """One typed detail of `google.rpc.Status`, its `@type` first."""
    return Shape(
        f"Google{kind}",
        description,
        {"@type": const(f"type.googleapis.com/google.rpc.{kind}", "The detail's type."), **fields},
        ("@type", *fields),
    )


ERROR_DETAIL = Union(
    "GoogleErrorDetail",
    "One typed detail of an error.",
    {
        shape.fields["@type"]["const"]: shape
        for shape in (
            _detail(
                "ErrorInfo",
                "What kind of error, for programs.",
                {
                    "reason": text(
                        "The error type upper-cased (`TOO_SHORT`, `MODEL_NOT_FOUND`, `RATE_LIMITED`, ...); "
                        "`API_KEY_INVALID` for a missing or wrong key, as Gemini names it."
                    ),
                    "domain": text("`openjev`.", enum=["openjev"]),
                },
            ),
            _detail(
                "BadRequest",
                "Every problem of an invalid request (the first 50).",
                {
                    "fieldViolations": {
                        "type": "array",
                        "items": ref("GoogleFieldViolation"),
                        "description": "The problems, each with its field.",
                    }
                },
            ),
            _detail(
                "RetryInfo",
                "How long to wait before retrying: the full wait, where `Retry-After` is cut to 2 s.",
                {"retryDelay": text("A duration: `12s`, `0.250s`.")},
            ),
            _detail(
                "RequestInfo",
                "The request's id, as in the response's `x-typesafe-request-id`: what to quote to operators.",
                {"requestId": text("The request id (`req_...`).")},
            ),
        )
    },
    on="@type",
)
FIELD_VIOLATION = Shape(
    "GoogleFieldViolation",
    "One problem of the request.",
    {
        "field": text("The field at fault: `questions.team.criteria`, `input[1].data`."),
        "description": text("What is wrong with it."),
        "reason": text("The problem's type (`too_short`, `unknown_field`, ...)."),
    },
    ("field", "description", "reason"),
)
ERROR_STATUS = Shape(
    "GoogleErrorStatus",
    "The error, as `google.rpc.Status`.",
    {
        "code": integer("The HTTP status."),
        "message": text(
            "What happened, for people; a 400 lists the first 20 problems found (`field: what`), then how many more."
        ),
        "status": text(
            "The status's `google.rpc.Code`: `INVALID_ARGUMENT` (400), `UNAUTHENTICATED` (401), `PERMISSION_DENIED` "
            "(403), `NOT_FOUND` (404), `RESOURCE_EXHAUSTED` (429), `INTERNAL` (500, 502), `UNAVAILABLE` (503, 529), "
            "`DEADLINE_EXCEEDED` (408, 504)."
        ),
        "details": {
            "type": "array",
            "items": ERROR_DETAIL.ref,
            "description": "An `ErrorInfo`; a `BadRequest` for an invalid request; a `RetryInfo` where the server "
            "asks for a wait; a `RequestInfo` with the request id.",
        },
    },
    ("code", "message", "status", "details"),
)
ERROR = Shape(
    "GoogleError",
    "Every error of a Google client on this path, in Google's shape.",
    {"error": ref(ERROR_STATUS.name, "The error.")},
    ("error",),
)
LIMITS = Shape(
    "GoogleLimits",
    "What one request in Google's shape may ask; over a limit is a 400 naming it.",
    {
        "max_questions": integer("Questions (`OPENJEV_MAX_DECISIONS_QUESTIONS`; Google's API takes 1000).", minimum=1),
        "max_choices": integer("Options of one choice question.", minimum=2),
        "max_levels": integer("Levels of one score question.", minimum=2),
        "max_images": integer("Images in the input; 0: refused.", minimum=0),
    },
    ("max_questions", "max_choices", "max_levels", "max_images"),
)
ANSWER_COMPONENTS: tuple[Shape | Union, ...] = (
    NOUL_ANSWER,
    CHOICE_ANSWER,
    SCORE_ANSWER,
    ANSWER,
    MODALITY_TOKENS,
    USAGE,
    RESPONSE,
    *ERROR_DETAIL.members.values(),
    FIELD_VIOLATION,
    ERROR_DETAIL,
    ERROR_STATUS,
    ERROR,
    LIMITS,
)
"""The answer's components, in the document's order."""
