"""Which requests may stream a body larger than `OPENJEV_MAX_BODY_BYTES`: a batch input file's upload.

`POST /v1/files` takes a file of up to `OPENJEV_BATCH_MAX_FILE_BYTES` (200 MB by default, OpenAI's limit), far
over the 2 MB every other route takes. Such a body is not held in memory: the body reader streams it to Django,
which spills it to a temporary file, and stops it with a 413 at the limit. Only a caller whose key is valid (or
any caller, with auth off) gets the larger room, and only for an uncompressed body: a key-less client can make
the service write at most the ordinary limit, and a compressed upload is decoded in memory like any other body.
"""

from __future__ import annotations

from django.conf import settings

from api.plumbing.authentication import key_valid
from api.plumbing.formats import bare_key_of
from serving.asgi_types import Scope, scope_headers

UPLOAD_PATH = "/v1/files"
MULTIPART_ROOM = 64 * 1024
"""What the multipart envelope (boundaries, the `purpose` field, part headers) may add to the file itself."""


async def upload_room(scope: Scope, *, path: str) -> int | None:
    """The body limit of a batch file upload from a valid key; None for every other request (the ordinary
    limit applies, and an invalid key learns so from the view's 401 like anywhere else). `path` is the request's
    path below the deployment's root."""
    if scope.get("method") != "POST" or path != UPLOAD_PATH:
        return None
    headers = scope_headers(scope)
    if headers.get("content-encoding", "identity").strip().lower() not in ("", "identity"):
        return None
    if not await key_valid(authorization=headers.get("authorization"), api_key=bare_key_of(header=headers.get)):
        return None
    return settings.OPENJEV.batch_max_file_bytes + MULTIPART_ROOM
