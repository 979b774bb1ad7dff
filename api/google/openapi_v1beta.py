"""`POST /v1beta/decisions` in the OpenAPI document: Google's shape alone, on the path its clients post to by default.

Its view is left out of the generated document, and its operation is written from the one `POST /v1/decisions`
documents once Google's shape is in it (`google_openapi`): the same operation with only Google's alternatives, its
examples and its key scheme, so the two paths cannot tell different stories about one shape.
"""

from __future__ import annotations

import copy
from typing import Any

from drf_spectacular.utils import extend_schema

from api.google.openapi import PATH, V1BETA_PATH, google_openapi

OPENAI_REQUEST_ID = "x-request-id"
google_v1beta_schema = extend_schema(exclude=True)
"""The view's own annotation: none (`google_document` writes its operation)."""


def _google_only(media: dict[str, Any]) -> None:
    """A media type of the shared operation with Google's alternative and examples only."""
    schema = media["schema"]
    media["schema"] = schema["oneOf"][-1] if "oneOf" in schema else schema
    examples = {name: example for name, example in media.get("examples", {}).items() if name.startswith("Google")}
    if examples:
        media["examples"] = examples
    else:
        media.pop("examples", None)


def google_document(document: dict[str, Any]) -> None:
    """Google's shape on `POST /v1/decisions` (`google_openapi`), then the same operation in Google's shape alone
    on `POST /v1beta/decisions`."""
    google_openapi(document)
    operation = copy.deepcopy(document["paths"][PATH]["post"])
    operation["operationId"] = "google_decisions_create"
    operation["summary"] = "Typed decisions in Google's shape (its clients' default path)"
    operation["description"] = (
        "Google's Decisions shape, as on `POST /v1/decisions` (see there), on the path `google-genai` with the "
        "`v1beta` API version, pydantic-ai's `google-decisions:` and `@ai-sdk/google` post to. Every answer, "
        "errors included, is in Google's shape; any other path under `/v1beta/` is a 404 in Google's shape."
    )
    _google_only(operation["requestBody"]["content"]["application/json"])
    for response in operation["responses"].values():
        response.get("headers", {}).pop(OPENAI_REQUEST_ID, None)  # OpenAI's SDK's name for the id: not sent here
        for media in response.get("content", {}).values():
            _google_only(media)
    document["paths"][V1BETA_PATH] = {"post": operation}
