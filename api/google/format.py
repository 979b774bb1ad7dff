"""Google's Decisions shape, as the shared plumbing reads it (`api.plumbing.formats`): it shares OpenAI's
`POST /v1/decisions`, claims the bodies whose `questions` is a map, and answers in Google's error shape the requests
that carry Google's key header before their body is read; it is the only format of `POST /v1beta/decisions`, where
Google's clients post by default (pydantic-ai's `google-decisions:`, `@ai-sdk/google`, google-genai with the `v1beta`
API version), and every other path under `/v1beta/` answers in its shape (a 404, with the request id).

`system`: OpenInference names no Google decision API (its `decision.system` values are `typesafe` and `openai`);
`google` is the vendor's name in its provider values, and the system of the same vendor's LLM spans
(`vertexai`) would say Vertex AI, whose clients post elsewhere (`/v1beta1/...`)."""

from __future__ import annotations

from api.google.answer import google_answer
from api.google.errors import GOOGLE_SHAPE
from api.google.openapi import V1BETA_PATH
from api.google.openapi_v1beta import google_document
from api.google.parsing import google_claims
from api.google.service import API, google_check, google_limits_shown
from api.plumbing.formats import WireFormat

KEY_HEADER = "x-goog-api-key"
"""The header Google's SDK sends its API key in, bare."""

FORMAT = WireFormat(
    name=API,
    label="Google's Decisions shape (POST /v1/decisions, /v1beta/decisions)",
    path="/v1/decisions",
    serve=google_answer,
    check=google_check,
    shape=GOOGLE_SHAPE,
    system="google",
    claims=google_claims,
    key_header=KEY_HEADER,
    announced_by=KEY_HEADER,
    openapi=google_document,
    limits=google_limits_shown,
    own_path=V1BETA_PATH,
    family=("/v1beta/",),
)
