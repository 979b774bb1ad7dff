"""System One, as the shared plumbing reads it (`api.plumbing.formats`)."""

from __future__ import annotations

from api.plumbing.formats import WireFormat
from api.systemone.answer import systemone_answer
from api.systemone.service import systemone_check

FORMAT = WireFormat(
    name="systemone",
    label="System One (POST /v1/systemone and its stream)",
    path="/v1/systemone",
    serve=systemone_answer,
    check=systemone_check,
    multipart=True,  # the official SDK uploads images as multipart parts
    system="typesafe",
)
