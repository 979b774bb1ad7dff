"""OpenAI's Files and Batches routes (`api.batches.views`) as documented: each operation's body, answers, errors
(every one in OpenAI's shape, whatever refused the request) and headers; the objects are in `openapi_objects`.

`tests/docs/test_response_contract.py` drives each operation into each documented status and holds the answers to
these documents, as it does for every route.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema

from api.batches.openapi_objects import (
    BATCH_CREATE,
    BATCH_ID,
    BATCH_OBJECT,
    FILE_ID,
    FILE_OBJECT,
    INPUT_LINE,
    OUTPUT_LINE,
    BatchCreateRequestSerializer,
    BatchListSerializer,
    BatchSerializer,
    FileUploadSerializer,
    OpenAIFileDeletedSerializer,
    OpenAIFileListSerializer,
    OpenAIFileSerializer,
)
from api.batches.requests import LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX
from api.decisions.errors import OPENAI_SHAPE
from api.decisions.openapi import OpenAIErrorSerializer
from api.openapi.errors import CROSS_SITE_DESCRIPTION, EXAMPLE_REQUEST_ID
from api.openapi.operations import AUTH_HEADER, OPTIONAL_AUTH, RATE_LIMIT_HEADERS, REQUEST_ID_HEADER
from api.plumbing.api_error import ApiError
from api.plumbing.error_responses import PUBLIC_MESSAGES, error_body

JSONL = "application/jsonl"


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(OpenAIErrorSerializer, description=description)


def _error_example(status: int, code: str, message: str, *, param: str | None = None) -> OpenApiExample:
    return OpenApiExample(
        f"error_{status}_{code}",
        value=error_body(ApiError(status, code, message, param=param), shape=OPENAI_SHAPE),
        response_only=True,
        status_codes=[str(status)],
    )


UNAUTHENTICATED = _error("Auth is on and the Bearer key is missing or wrong (`invalid_api_key`).")
CROSS_SITE = _error(CROSS_SITE_DESCRIPTION)
RATE_LIMITED = _error(
    "The key is over its requests per minute (`rate_limit_exceeded`; `retry-after`, `x-ratelimit-*`), or its "
    "counts cannot be read while `OPENJEV_RATE_LIMIT_FAILURE=closed`."
)
INTERNAL = _error("A bug on our side (`internal_error`); `x-should-retry: false`.")
BODY_LATE = _error("The body did not arrive in time (`request_timeout`); the connection is closed.")
BODY_TOO_LARGE = _error("The body, after decompression, is over `max_body_bytes` (`request_too_large`).")
PAGE_INVALID = _error(f"`limit` is not an integer from 1 to {LIST_LIMIT_MAX} (`invalid_request`).")
FILE_MISSING = _error("No file of this key has this id (`not_found`): another key's file is not found either.")
BATCH_MISSING = _error("No batch of this key has this id (`not_found`): another key's batch is not found either.")

KEY_MISSING = _error_example(401, "authentication_error", "missing API key: send Authorization: Bearer <key>")
BUG = _error_example(500, "internal_error", f"{PUBLIC_MESSAGES[500]} (request id {EXAMPLE_REQUEST_ID})")
FILE_NOT_FOUND = _error_example(404, "not_found", f"No such File object: {FILE_ID}", param="id")
BATCH_NOT_FOUND = _error_example(404, "not_found", f"No such Batch object: {BATCH_ID}", param="id")
LIMIT_INVALID = _error_example(
    400, "invalid_request", f"limit must be an integer from 1 to {LIST_LIMIT_MAX}", param="limit"
)

SHOULD_RETRY = OpenApiParameter(
    "x-should-retry",
    str,
    OpenApiParameter.HEADER,
    required=True,
    response=[400, 401, 403, 404, 408, 413, 415, 429, 500],
    description="`true` or `false`: whether retrying can help, which the SDK obeys.",
)
RETRY_HINTS = [
    OpenApiParameter(
        "Retry-After",
        int,
        OpenApiParameter.HEADER,
        required=False,
        response=[429],
        description="Seconds to wait before retrying; absent where no wait helps (`x-should-retry: false`).",
    ),
    *(
        OpenApiParameter(p.name, p.type, p.location, required=False, response=p.response, description=p.description)
        for p in RATE_LIMIT_HEADERS
    ),
]
"""A 429 of a batch route: the key's per-minute limits, with their hints, or a batch its key could never run within
its window, refused for good (no hint, `x-should-retry: false`)."""
HEADERS = [REQUEST_ID_HEADER, SHOULD_RETRY, AUTH_HEADER]
PAGE_PARAMETERS = [
    OpenApiParameter(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": LIST_LIMIT_MAX, "default": LIST_LIMIT_DEFAULT},
        OpenApiParameter.QUERY,
        description=f"Objects per page, 1 to {LIST_LIMIT_MAX} ({LIST_LIMIT_DEFAULT} by default).",
    ),
    OpenApiParameter("after", str, OpenApiParameter.QUERY, description="The previous page's `last_id`."),
]


def _path_id(name: str, what: str) -> OpenApiParameter:
    return OpenApiParameter(name, str, OpenApiParameter.PATH, description=f"The {what}'s id.")


FILE_ID_PARAMETER = _path_id("file_id", "file")
BATCH_ID_PARAMETER = _path_id("batch_id", "batch")

# -- Files -------------------------------------------------------------------------------------------------------

file_create_schema = extend_schema(
    operation_id="createFile",
    summary="Upload a batch input file",
    description='OpenAI\'s `files.create(file=..., purpose="batch")`: a JSONL file of decision lines, one '
    "request a line:\n\n```json\n" + INPUT_LINE + "\n```\n\n`url` is the batch's endpoint (`/v1/decisions`, which "
    "takes OpenAI's and Google's bodies, `/v1/systemone` or `/v1/classify`) and `body` what that route takes. The "
    "file is checked as it is stored (UTF-8 text, the line count and each line's size) and refused whole, naming "
    "the line, when it is not one; each line's request is checked when a batch is created over it.",
    tags=["Files"],
    request={"multipart/form-data": FileUploadSerializer},
    responses={
        200: OpenApiResponse(OpenAIFileSerializer, description="The stored file."),
        400: _error(
            "Nothing was stored: `purpose` is not `batch` (`invalid_request`), no `file` part, a body that is not "
            "multipart, a file that is not UTF-8 text (`invalid_file`), empty (`empty_file`), over "
            "`OPENJEV_BATCH_MAX_LINES` lines (`too_many_lines`) or with a line over the line limit "
            "(`line_too_long`); or a corrupt gzip/zstd body."
        ),
        401: UNAUTHENTICATED,
        403: CROSS_SITE,
        408: BODY_LATE,
        413: _error(
            "The file is over `OPENJEV_BATCH_MAX_FILE_BYTES` (200 MB by default; an uncompressed upload from a valid "
            "key is streamed up to it), or a body without a valid key or compressed is over `max_body_bytes`, after "
            "decompression (`request_too_large`)."
        ),
        415: _error("The body is neither multipart/form-data nor JSON, or of an unsupported `Content-Encoding`."),
        429: RATE_LIMITED,
        500: INTERNAL,
    },
    examples=[
        OpenApiExample("file", value=FILE_OBJECT, response_only=True, status_codes=["200"]),
        _error_example(400, "too_many_lines", "the file has over 50000 lines, the most a batch takes", param="file"),
        KEY_MISSING,
        BUG,
    ],
    parameters=[*HEADERS, *RETRY_HINTS],
    auth=OPTIONAL_AUTH,
)

files_list_schema = extend_schema(
    operation_id="listFiles",
    summary="List the key's files",
    description="OpenAI's `files.list()`: uploads and batches' output and error files of the caller's key, newest "
    "first, a page at a time (`after` the previous page's `last_id`).",
    tags=["Files"],
    responses={
        200: OpenApiResponse(OpenAIFileListSerializer, description="A page of files."),
        400: PAGE_INVALID,
        401: UNAUTHENTICATED,
        500: INTERNAL,
    },
    examples=[LIMIT_INVALID, KEY_MISSING, BUG],
    parameters=[
        *PAGE_PARAMETERS,
        OpenApiParameter(
            "purpose", str, OpenApiParameter.QUERY, description="Only files of this purpose (`batch`, `batch_output`)."
        ),
        *HEADERS,
    ],
    auth=OPTIONAL_AUTH,
)

file_schema = extend_schema(
    operation_id="retrieveFile",
    summary="Describe a file",
    description="OpenAI's `files.retrieve(file_id)`.",
    tags=["Files"],
    responses={
        200: OpenApiResponse(OpenAIFileSerializer, description="The file."),
        401: UNAUTHENTICATED,
        404: FILE_MISSING,
        500: INTERNAL,
    },
    examples=[FILE_NOT_FOUND, KEY_MISSING, BUG],
    parameters=[FILE_ID_PARAMETER, *HEADERS],
    auth=OPTIONAL_AUTH,
)

file_delete_schema = extend_schema(
    operation_id="deleteFile",
    summary="Delete a file",
    description="OpenAI's `files.delete(file_id)`: the file and its lines. A batch that still runs over an upload "
    "has read its lines already; its own output and error files go with it.",
    tags=["Files"],
    responses={
        200: OpenApiResponse(OpenAIFileDeletedSerializer, description="The file is deleted."),
        401: UNAUTHENTICATED,
        404: FILE_MISSING,
        500: INTERNAL,
    },
    examples=[FILE_NOT_FOUND, KEY_MISSING, BUG],
    parameters=[FILE_ID_PARAMETER, *HEADERS],
    auth=OPTIONAL_AUTH,
)

file_content_schema = extend_schema(
    operation_id="downloadFile",
    summary="Download a file's content",
    description="OpenAI's `files.content(file_id)`: an upload as it was sent, or a batch's output or error file, "
    "one JSON line per answered request in line order:\n\n```json\n" + OUTPUT_LINE + "\n```\n\n`response.body` is "
    "exactly what the batch's route answered that body (and stored, as any answer), `response.status_code` its "
    "status; the output file holds the 2xx, the error file every other answer and the lines that were not a "
    "request (`response` null, `error` `{code, message}`). Streamed, so a 50,000-line file is never held whole.",
    tags=["Files"],
    responses={
        (200, JSONL): OpenApiResponse(OpenApiTypes.STR, description="The file's lines (JSONL), as an attachment."),
        (401, "application/json"): UNAUTHENTICATED,
        (404, "application/json"): FILE_MISSING,
        (500, "application/json"): INTERNAL,
    },
    examples=[FILE_NOT_FOUND, KEY_MISSING, BUG],
    parameters=[
        FILE_ID_PARAMETER,
        *HEADERS,
        OpenApiParameter(
            "Content-Disposition",
            str,
            OpenApiParameter.HEADER,
            required=True,
            response=[200],
            description="`attachment`, with the file's name.",
        ),
    ],
    auth=OPTIONAL_AUTH,
)

# -- Batches -----------------------------------------------------------------------------------------------------

BATCHES_DESCRIPTION = """\
OpenAI's `batches.create(...)`: every line of an uploaded file (`files.create`, purpose `batch`) answered in the
background by `endpoint`, exactly as the same body sent there is answered (the same checks, scoring, calibration
and stored evaluation), each `custom_id` once however often a worker is killed. Answered `validating`; then every
line is checked before any model work: a file that is not a batch of this endpoint (a line that is not JSON, a
duplicate `custom_id`, another `url`, too many lines) fails the batch with the lines named in `errors`, and a line
whose body its route refuses is answered with that route's error in the error file. Poll `batches.retrieve`; once
`completed`, `files.content(output_file_id)`.

Lines run within the key's limits, waiting for their budget rather than refused; a batch its key could not run
within its window at the key's requests per minute is refused at once (429, `x-should-retry: false`).
"""

batch_create_schema = extend_schema(
    operation_id="createBatch",
    summary="Create a batch over an uploaded file",
    description=BATCHES_DESCRIPTION,
    tags=["Batches"],
    request=BatchCreateRequestSerializer,
    responses={
        200: OpenApiResponse(BatchSerializer, description="The batch, `validating`."),
        400: _error(
            "Nothing was created: a body that is not a JSON object, an `endpoint` not served here, a "
            "`completion_window` other than `24h`, metadata over OpenAI's bounds (`invalid_request`), a body "
            "that is not JSON (`invalid_json`) or a corrupt gzip/zstd body."
        ),
        401: UNAUTHENTICATED,
        403: CROSS_SITE,
        404: _error("`input_file_id` is no upload (purpose `batch`) of this key (`not_found`)."),
        408: BODY_LATE,
        413: BODY_TOO_LARGE,
        415: _error("The body is not declared JSON, or of an unsupported `Content-Encoding`."),
        429: _error(
            "The key is over its requests per minute (`rate_limit_exceeded`), or the batch has more lines than "
            "the key's requests per minute allow within the window (`rate_limited`, `x-should-retry: false`)."
        ),
        500: INTERNAL,
    },
    examples=[
        OpenApiExample("batch", value=BATCH_CREATE, request_only=True, summary="Every line of an upload"),
        OpenApiExample("created", value={**BATCH_OBJECT, "status": "validating"}, response_only=True),
        _error_example(
            400,
            "invalid_request",
            "endpoint '/v1/chat/completions' is not one a batch runs: one of /v1/decisions, /v1/systemone, "
            "/v1/classify",
            param="endpoint",
        ),
        FILE_NOT_FOUND,
        KEY_MISSING,
        BUG,
    ],
    parameters=[*HEADERS, *RETRY_HINTS],
    auth=OPTIONAL_AUTH,
)

batches_list_schema = extend_schema(
    operation_id="listBatches",
    summary="List the key's batches",
    description="OpenAI's `batches.list()`: the caller's key's batches, newest first, a page at a time.",
    tags=["Batches"],
    responses={
        200: OpenApiResponse(BatchListSerializer, description="A page of batches."),
        400: PAGE_INVALID,
        401: UNAUTHENTICATED,
        500: INTERNAL,
    },
    examples=[LIMIT_INVALID, KEY_MISSING, BUG],
    parameters=[*PAGE_PARAMETERS, *HEADERS],
    auth=OPTIONAL_AUTH,
)

batch_schema = extend_schema(
    operation_id="retrieveBatch",
    summary="Describe a batch and its progress",
    description="OpenAI's `batches.retrieve(batch_id)`: its status, `request_counts` as its lines are answered, and "
    "once it has ended its output and error files.",
    tags=["Batches"],
    responses={
        200: OpenApiResponse(BatchSerializer, description="The batch."),
        401: UNAUTHENTICATED,
        404: BATCH_MISSING,
        500: INTERNAL,
    },
    examples=[
        OpenApiExample("completed", value=BATCH_OBJECT, response_only=True, status_codes=["200"]),
        BATCH_NOT_FOUND,
        KEY_MISSING,
        BUG,
    ],
    parameters=[BATCH_ID_PARAMETER, *HEADERS],
    auth=OPTIONAL_AUTH,
)

batch_cancel_schema = extend_schema(
    operation_id="cancelBatch",
    summary="Cancel a batch",
    description="OpenAI's `batches.cancel(batch_id)`: `cancelling` at once, no new line starts within about a "
    "second, and `cancelled` once the running lines have ended, with what was answered in its files. A batch that "
    "has ended is answered as it is: cancelling twice is harmless.",
    tags=["Batches"],
    request=None,
    responses={
        200: OpenApiResponse(BatchSerializer, description="The batch, `cancelling` (or as it ended)."),
        401: UNAUTHENTICATED,
        403: CROSS_SITE,
        404: BATCH_MISSING,
        500: INTERNAL,
    },
    examples=[BATCH_NOT_FOUND, KEY_MISSING, BUG],
    parameters=[BATCH_ID_PARAMETER, *HEADERS],
    auth=OPTIONAL_AUTH,
)
