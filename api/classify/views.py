"""`POST /v1/classify`: SGLang's and vLLM's classification API over saved classifiers."""

from __future__ import annotations

from django.http import HttpResponse
from rest_framework.request import Request

from api.classify.format import FORMAT
from api.classify.openapi import classify_schema
from api.views import WireFormatView


class ClassifyView(WireFormatView):
    """Every error of this route, 405 included, is in their `{"error", "type", "code"}` shape."""

    path = FORMAT.path

    @classify_schema
    async def post(self, request: Request) -> HttpResponse:
        return await super().post(request)
