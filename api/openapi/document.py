"""The OpenAPI document: generated once per process from the views' annotations, then completed.

Limits that depend on the deployment (questions per request, options per question) are written into
the document by `schema_postprocess` from `settings.OPENJEV` when it is generated, once per process.
"""

from __future__ import annotations

import copy
import json
import threading
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from drf_spectacular.generators import SchemaGenerator

from api.openapi.operations import SECURITY_SCHEME
from api.plumbing.formats import wire_formats
from serving.config_reading import config_from_env

API_DESCRIPTION = """\
Typed classification from a language model's label log-probabilities, in the Jev / TypeSafe **System One** wire
format: the official `typesafe-sdk` and OpenAI-style clients work by changing their base URL.

Three question types: **noul** (yes/no → P(true)), **choice** (one of 2 to `max_answers_per_question` options,
255 by default → the most likely key and every option's probability) and **score** (a level on an ordered scale →
the expected level index). `confidence` says how peaked a distribution is; it is not a calibrated probability of
being right.

```python
from typesafe_sdk import Choice, Noul, TypeSafeClient

url = "http://127.0.0.1:8000"
with TypeSafeClient(api_key="any", base_url=url) as client:
    result = client.system_one(
        state="I was charged twice!",
        questions={
            "refund": Noul(instructions="Refund request?"),
            "team": Choice(criteria={"Billing": None, "Tech": None}),
        },
    )
print(result.nouls["refund"].noul, result.choices["team"].choice)
```

**Classifiers** saved in the admin are also served through SGLang's and vLLM's `POST /v1/classify`
(`{"model": <classifier>, "input": text or [texts]}`), answered the same way.

**Batch jobs**: OpenAI's Files and Batches API (`/v1/files`, `/v1/batches`) runs a whole JSONL file of
`/v1/decisions`, `/v1/systemone` or `/v1/classify` requests in the background, each line answered as that route
answers it; the official `openai` SDK's `files` and `batches` work unchanged, errors in OpenAI's shape.

**Auth** is off unless the server sets `OPENJEV_API_KEY` (or requires issued keys); then every `/v1/*` route
(OPTIONS included) needs `Authorization: Bearer <key>` (Google's `x-goog-api-key` works too), and only the health
checks (`/health`, `/health/live`), `/metrics` (behind its own token where one is set) and the reference pages (`/`,
`/docs`, `/openapi.json`) are open. Any Bearer value is accepted while auth is off.

**Errors**: on System One's routes a 422 lists the validation problems (the first 50, then how many more) as
`{"detail": [{"loc", "msg", "type"}]}`, and every other error is `{"detail": {"error_type", "message"}}`, as JSON
(never HTML, never a redirect). `POST /v1/decisions` answers in OpenAI's shape, or in Google's for a body in
Google's shape (or one sent with `x-goog-api-key`), an invalid request there being a 400; `POST /v1/classify`
answers in SGLang's and vLLM's shape, `{"error", "type", "code"}`. Every response carries
`x-typesafe-request-id`; a 5xx's message (but a 529's, which says how busy the server is) is the same for every
cause of its kind and names that id, which is where the operator finds the cause.
"""

TAGS = [
    {"name": "Evaluation", "description": "Typed questions about a state."},
    {"name": "Classification", "description": "SGLang / vLLM `POST /v1/classify` over classifiers saved in the admin."},
    {"name": "Labels", "description": "The true answers of stored evaluations, for accuracy and calibration."},
    {"name": "Models", "description": "Names accepted as `model`."},
    {"name": "Service", "description": "Limits and health probes."},
    {"name": "Files", "description": "OpenAI's Files API: batch input files, and batches' output and error files."},
    {"name": "Batches", "description": "OpenAI's Batches API: a whole file of decision lines in one job."},
]

SECURITY_SCHEMES = {
    SECURITY_SCHEME: {
        "type": "http",
        "scheme": "bearer",
        "description": "Needed only when the server has auth on (`OPENJEV_API_KEY` set, or issued keys required). "
        "The official SDK always sends one; any value is accepted while auth is off.",
    },
}


def _component(result: dict[str, Any], name: str) -> dict[str, Any]:
    schema: dict[str, Any] = result["components"]["schemas"][name]
    return schema


def schema_postprocess(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular hook: what serializers cannot express, and this deployment's limits.

    Runs once per generated document (the served one is generated once per process).
    """
    # With auth on, an anonymous caller (the document is open to the docs pages) learns the defaults, not this
    # deployment's limits; `GET /v1/limits` gives those to a key.
    config = config_from_env({}) if settings.OPENJEV.auth_required else settings.OPENJEV
    result = copy.deepcopy(result)
    result["info"]["description"] = API_DESCRIPTION
    result["info"]["license"] = {"name": "Apache-2.0", "identifier": "Apache-2.0"}
    result["tags"] = TAGS
    result.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES

    questions = _component(result, "SystemOneRequest")["properties"]["questions"]
    questions.update(minProperties=1, maxProperties=config.max_questions, propertyNames={"minLength": 1})
    _component(result, "SystemOneRequest")["additionalProperties"] = True
    choice = _component(result, "ChoiceQuestion")["properties"]["criteria"]
    choice.update(minProperties=2, maxProperties=config.max_answers)
    score = _component(result, "ScoreQuestion")["properties"]["criteria"]
    score.update(maxItems=config.max_answers)
    noul_criteria = _component(result, "NoulCriteria")
    noul_criteria["additionalProperties"] = False
    _component(result, "Question")["description"] = (
        "One question, discriminated by `type`; any other type (e.g. `box`, `boolean`) is rejected with 422."
    )
    _component(result, "Answer")["description"] = "One answer, of its question's type."
    _component(result, "ClassifyRequest")["properties"]["input"].update(maxItems=config.max_classify_inputs)
    _component(result, "ClassifyRequest")["additionalProperties"] = True
    # What each wire format writes itself: a format sharing a path documents its bodies on the primary's operation.
    for wire_format in wire_formats():
        if wire_format.openapi is not None:
            wire_format.openapi(result)
    return result


_generate_lock = threading.Lock()


@lru_cache(maxsize=1)
def schema_document() -> dict[str, Any]:
    """The OpenAPI document without `servers`, generated from the views' annotations.

    Generation walks every URL pattern and serializer (tens of milliseconds), so it runs once per
    process; the result depends only on code and settings. Treat it as read-only.
    """
    with _generate_lock:
        document: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return document


@lru_cache(maxsize=8)
def schema_render(*, server_url: str = "/") -> bytes:
    """The document as served: JSON with one `servers` entry, the URL the operations are under."""
    document = copy.copy(schema_document())
    document["servers"] = [{"url": server_url, "description": "This server"}]
    return json.dumps(document, cls=DjangoJSONEncoder, ensure_ascii=False, indent=2).encode()
