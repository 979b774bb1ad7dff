"""`POST /v1beta/decisions`: Google's Decisions shape on the path its clients post to by default (the same body and
answer as on `/v1/decisions`, where it shares OpenAI's route)."""

from __future__ import annotations

from django.http import HttpResponse
from rest_framework.request import Request

from api.google.openapi import V1BETA_PATH
from api.google.openapi_v1beta import google_v1beta_schema
from api.views import WireFormatView


class GoogleDecisionsView(WireFormatView):
    """Every error of this route, 405 included, is in Google's `{"error": {...}}` shape."""

    path = V1BETA_PATH

    @google_v1beta_schema
    async def post(self, request: Request) -> HttpResponse:
        return await super().post(request)
