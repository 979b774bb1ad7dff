"""`POST /v1/systemone`: the Jev / TypeSafe System One wire format."""

from __future__ import annotations

from django.http import HttpResponse
from rest_framework.request import Request

from api.systemone.format import FORMAT
from api.systemone.openapi import systemone_schema
from api.views import WireFormatView


class SystemOneView(WireFormatView):
    path = FORMAT.path

    @systemone_schema
    async def post(self, request: Request) -> HttpResponse:
        return await super().post(request)
