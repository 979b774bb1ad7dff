"""OpenAI's Decisions API, as the shared plumbing reads it (`api.plumbing.formats`): the primary format of
`POST /v1/decisions` (Google's Decisions shape claims its own bodies there), whose shape the other route of its SDK
answers in (`GET /v1/models/{id}`: the SDK's `models.retrieve`, a 404 for an unknown name)."""

from __future__ import annotations

from api.decisions.answer import decisions_answer
from api.decisions.errors import OPENAI_SHAPE
from api.decisions.openapi import decisions_family_openapi
from api.decisions.service import decisions_check, decisions_limits_shown
from api.plumbing.formats import REQUEST_ID_HEADER, WireFormat

FORMAT = WireFormat(
    name="decisions",
    label="Decisions (POST /v1/decisions)",
    path="/v1/decisions",
    serve=decisions_answer,
    check=decisions_check,
    shape=OPENAI_SHAPE,
    request_id_headers=(REQUEST_ID_HEADER, "x-request-id"),  # OpenAI's SDK reads `x-request-id` (`_request_id`)
    system="openai",
    limits=decisions_limits_shown,
    family=("/v1/models/",),
    openapi=decisions_family_openapi,
)
