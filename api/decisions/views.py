"""`POST /v1/decisions`: OpenAI's Decisions API (and any format that shares its path, chosen by the body)."""

from __future__ import annotations

from django.http import HttpResponse
from rest_framework.request import Request

from api.decisions.format import FORMAT
from api.decisions.openapi import decisions_schema
from api.views import WireFormatView


class DecisionsView(WireFormatView):
    """Every error of this route, 405 included, is in OpenAI's `{"error": {...}}` shape until a body is read
    that another format sharing the path claims."""

    path = FORMAT.path

    @decisions_schema
    async def post(self, request: Request) -> HttpResponse:
        return await super().post(request)
