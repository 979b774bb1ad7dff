"""`GET /v1/models` and `GET /v1/models/{id}`: the names `model` accepts, the language model's and what the wire
formats serve besides (saved classifiers), in the shape both Jev clients and the OpenAI SDKs read."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from rest_framework.request import Request

from api.openapi import operations as doc
from api.plumbing.api_error import ApiError
from api.plumbing.formats import wire_formats
from api.plumbing.json_render import json_response
from api.views import ApiView
from inference.errors import value_quoted


class ModelsView(ApiView):
    @doc.models_schema
    async def get(self, request: Request) -> HttpResponse:
        config = settings.OPENJEV
        names = [config.model_alias, config.model]
        described = {config.model_alias: f"Alias of {config.model}", config.model: "Served model"}
        # What a format serves besides the language model (saved classifiers) goes in `data` only: Jev
        # clients read `models` as the names `model` accepts.
        return json_response(
            body={
                "models": [
                    {"name": n, "description": described[n], "release_date": config.model_release_date} for n in names
                ],
                "object": "list",
                "data": [model_entry(name=n) for n in await model_names()],
            }
        )


async def model_names() -> list[str]:
    """What `GET /v1/models` lists: the alias, the public model id, then what the formats serve besides."""
    config = settings.OPENJEV
    served = [name for f in wire_formats() if f.models is not None for name in await f.models()]
    return [config.model_alias, config.model, *served]


def model_entry(*, name: str) -> dict[str, Any]:
    """One model as the SDKs' `Model` type reads it (`id`, `object`, `created`, `owned_by`)."""
    return {"id": name, "object": "model", "created": MODEL_CREATED, "owned_by": "openjev"}


class ModelView(ApiView):
    """`GET /v1/models/{id}`: one listed model (the SDKs' `models.retrieve`), 404 for any other name."""

    @doc.model_schema
    async def get(self, request: Request, model_id: str) -> HttpResponse:
        if model_id not in await model_names():
            raise ApiError(404, "not_found", f"no model named {value_quoted(model_id)}; GET /v1/models lists them")
        return json_response(body=model_entry(name=model_id))


MODEL_CREATED = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp())
"""`created` of every model entry (the SDKs' `Model` requires one): a fixed date, since neither the service nor a
checkpoint knows when a model was created; clients read it as a sort key only."""
