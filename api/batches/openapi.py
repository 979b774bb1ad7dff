"""OpenAI's Files and Batches routes (`api.batches.views`) as documented: each operation's body, answers, errors
(every one in OpenAI's shape, whatever refused the request) and headers, declared with `operation_schema`; what every
operation shares is in `openapi_shared`, the objects are in `openapi_objects`.

`tests/docs/test_response_contract.py` drives each operation into each documented status and holds the answers to
these documents, as it does for every route.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse

from api.batches.openapi_objects import (
    BATCH_CREATE,
    BATCH_OBJECT,
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
from api.batches.openapi_shared import (
    BATCH_ID_PARAMETER,
    BATCH_MISSING,
    BATCH_NOT_FOUND,
    BODY_LATE,
    BODY_TOO_LARGE,
    CROSS_SITE,
    FILE_ID_PARAMETER,
    FILE_MISSING,
    FILE_NOT_FOUND,
    LIMIT_INVALID,
    PAGE_INVALID,
    PAGE_PARAMETERS,
    RATE_LIMITED,
    RETRY_HINTS,
    error_example,
    operation_schema,
)
from api.decisions.openapi_response import error_response

JSONL = "application/jsonl"

# -- Files -------------------------------------------------------------------------------------------------------

file_create_schema = operation_schema(
    "createFile",
    summary="Upload a batch input file",
    description='OpenAI\'s `files.create(file=..., purpose="batch")`: a JSONL file of decision lines, one '
    "request a line:\n\n```json\n" + INPUT_LINE + "\n```\n\n`url` is the batch's endpoint (`/v1/decisions`, which "
    "takes OpenAI's and Google's bodies, `/v1/systemone` or `/v1/classify`) and `body` what that route takes. The "
    "file is checked as it is stored (UTF-8 text, the line count and each line's size) and refused whole, naming "
    "the line, when it is not one; each line's request is checked when a batch is created over it.",
    tag="Files",
    request={"multipart/form-data": FileUploadSerializer},
    responses={
        200: OpenApiResponse(OpenAIFileSerializer, description="The stored file."),
        400: error_response(
            "Nothing was stored: `purpose` is not `batch` (`invalid_request`), no `file` part, a body that is not "
            "multipart, a file that is not UTF-8 text (`invalid_file`), empty (`empty_file`), over "
            "`OPENJEV_BATCH_MAX_LINES` lines (`too_many_lines`) or with a line over the line limit "
            "(`line_too_long`); or a corrupt gzip/zstd body."
        ),
        403: CROSS_SITE,
        408: BODY_LATE,
        413: error_response(
            "The file is over `OPENJEV_BATCH_MAX_FILE_BYTES` (200 MB by default; an uncompressed upload from a valid "
            "key is streamed up to it), or a body without a valid key or compressed is over `max_body_bytes`, after "
            "decompression (`request_too_large`)."
        ),
        415: error_response(
            "The body is neither multipart/form-data nor JSON, or of an unsupported `Content-Encoding`."
        ),
        429: RATE_LIMITED,
    },
    examples=[
        OpenApiExample("file", value=FILE_OBJECT, response_only=True, status_codes=["200"]),
        error_example(400, "too_many_lines", "the file has over 50000 lines, the most a batch takes", param="file"),
    ],
    headers=RETRY_HINTS,
)

files_list_schema = operation_schema(
    "listFiles",
    summary="List the key's files",
    description="OpenAI's `files.list()`: uploads and batches' output and error files of the caller's key, newest "
    "first, a page at a time (`after` the previous page's `last_id`).",
    tag="Files",
    responses={
        200: OpenApiResponse(OpenAIFileListSerializer, description="A page of files."),
        400: PAGE_INVALID,
    },
    examples=[LIMIT_INVALID],
    parameters=[
        *PAGE_PARAMETERS,
        OpenApiParameter(
            "purpose", str, OpenApiParameter.QUERY, description="Only files of this purpose (`batch`, `batch_output`)."
        ),
    ],
)

file_schema = operation_schema(
    "retrieveFile",
    summary="Describe a file",
    description="OpenAI's `files.retrieve(file_id)`.",
    tag="Files",
    responses={
        200: OpenApiResponse(OpenAIFileSerializer, description="The file."),
        404: FILE_MISSING,
    },
    examples=[FILE_NOT_FOUND],
    parameters=[FILE_ID_PARAMETER],
)

file_delete_schema = operation_schema(
    "deleteFile",
    summary="Delete a file",
    description="OpenAI's `files.delete(file_id)`: the file and its lines. A batch that still runs over an upload "
    "has read its lines already; its own output and error files go with it.",
    tag="Files",
    responses={
        200: OpenApiResponse(OpenAIFileDeletedSerializer, description="The file is deleted."),
        404: FILE_MISSING,
    },
    examples=[FILE_NOT_FOUND],
    parameters=[FILE_ID_PARAMETER],
)

file_content_schema = operation_schema(
    "downloadFile",
    summary="Download a file's content",
    description="OpenAI's `files.content(file_id)`: an upload as it was sent, or a batch's output or error file, "
    "one JSON line per answered request in line order:\n\n```json\n" + OUTPUT_LINE + "\n```\n\n`response.body` is "
    "exactly what the batch's route answered that body (and stored, as any answer), `response.status_code` its "
    "status; the output file holds the 2xx, the error file every other answer and the lines that were not a "
    "request (`response` null, `error` `{code, message}`). Streamed, so a 50,000-line file is never held whole.",
    tag="Files",
    responses={
        (200, JSONL): OpenApiResponse(OpenApiTypes.STR, description="The file's lines (JSONL), as an attachment."),
        (404, "application/json"): FILE_MISSING,
    },
    examples=[FILE_NOT_FOUND],
    parameters=[FILE_ID_PARAMETER],
    headers=[
        OpenApiParameter(
            "Content-Disposition",
            str,
            OpenApiParameter.HEADER,
            required=True,
            response=[200],
            description="`attachment`, with the file's name.",
        ),
    ],
    errors_as="application/json",
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

batch_create_schema = operation_schema(
    "createBatch",
    summary="Create a batch over an uploaded file",
    description=BATCHES_DESCRIPTION,
    tag="Batches",
    request=BatchCreateRequestSerializer,
    responses={
        200: OpenApiResponse(BatchSerializer, description="The batch, `validating`."),
        400: error_response(
            "Nothing was created: a body that is not a JSON object, an `endpoint` not served here, a "
            "`completion_window` other than `24h`, metadata over OpenAI's bounds (`invalid_request`), a body "
            "that is not JSON (`invalid_json`) or a corrupt gzip/zstd body."
        ),
        403: CROSS_SITE,
        404: error_response("`input_file_id` is no upload (purpose `batch`) of this key (`not_found`)."),
        408: BODY_LATE,
        413: BODY_TOO_LARGE,
        415: error_response("The body is not declared JSON, or of an unsupported `Content-Encoding`."),
        429: error_response(
            "The key is over its requests per minute (`rate_limit_exceeded`), or the batch has more lines than "
            "the key's requests per minute allow within the window (`rate_limited`, `x-should-retry: false`)."
        ),
    },
    examples=[
        OpenApiExample("batch", value=BATCH_CREATE, request_only=True, summary="Every line of an upload"),
        OpenApiExample("created", value={**BATCH_OBJECT, "status": "validating"}, response_only=True),
        error_example(
            400,
            "invalid_request",
            "endpoint '/v1/chat/completions' is not one a batch runs: one of /v1/decisions, /v1/systemone, "
            "/v1/classify",
            param="endpoint",
        ),
        FILE_NOT_FOUND,
    ],
    headers=RETRY_HINTS,
)

batches_list_schema = operation_schema(
    "listBatches",
    summary="List the key's batches",
    description="OpenAI's `batches.list()`: the caller's key's batches, newest first, a page at a time.",
    tag="Batches",
    responses={
        200: OpenApiResponse(BatchListSerializer, description="A page of batches."),
        400: PAGE_INVALID,
    },
    examples=[LIMIT_INVALID],
    parameters=PAGE_PARAMETERS,
)

batch_schema = operation_schema(
    "retrieveBatch",
    summary="Describe a batch and its progress",
    description="OpenAI's `batches.retrieve(batch_id)`: its status, `request_counts` as its lines are answered, and "
    "once it has ended its output and error files.",
    tag="Batches",
    responses={
        200: OpenApiResponse(BatchSerializer, description="The batch."),
        404: BATCH_MISSING,
    },
    examples=[
        OpenApiExample("completed", value=BATCH_OBJECT, response_only=True, status_codes=["200"]),
        BATCH_NOT_FOUND,
    ],
    parameters=[BATCH_ID_PARAMETER],
)

batch_cancel_schema = operation_schema(
    "cancelBatch",
    summary="Cancel a batch",
    description="OpenAI's `batches.cancel(batch_id)`: `cancelling` at once, no new line starts within about a "
    "second, and `cancelled` once the running lines have ended, with what was answered in its files. A batch that "
    "has ended is answered as it is: cancelling twice is harmless.",
    tag="Batches",
    request=None,
    responses={
        200: OpenApiResponse(BatchSerializer, description="The batch, `cancelling` (or as it ended)."),
        403: CROSS_SITE,
        404: BATCH_MISSING,
    },
    examples=[BATCH_NOT_FOUND],
    parameters=[BATCH_ID_PARAMETER],
)
