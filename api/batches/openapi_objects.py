"""The objects of OpenAI's Files and Batches routes as documented (`File`, `Batch`, their lists, the creation
and upload bodies) and the examples the operations show (`api.batches.openapi`).

Documentation only: `api.batches.requests`, `batches.files` and `batches.lifecycle` check and write them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.batches.requests import BATCH_ENDPOINTS, METADATA_KEY, METADATA_PAIRS, METADATA_VALUE, PURPOSES
from api.openapi.fields import NullField, const_field
from batches.lifecycle import WINDOWS
from batches.models import Batch

FILE_ID, BATCH_ID = "file-6f1c0a5b9d2e4c7a8b3f1e20", "batch_3a9e5c1d7b2f4e6a8c0d2b41"
STAMP = 1767225600
"""2026-01-01T00:00:00Z, the examples' time."""


# -- Objects ---------------------------------------------------------------------------------------------------


def enum_field(values: Sequence[str], **kwargs: Any) -> serializers.CharField:
    """A string of `values`, documented as a plain enum (no generated choice text)."""

    @extend_schema_field({"type": "string", "enum": list(values)})
    class EnumField(serializers.CharField):
        pass

    return EnumField(**kwargs)


@extend_schema_field({"type": "string", "format": "binary", "contentMediaType": "application/octet-stream"})
class UploadField(serializers.FileField):
    """A multipart file part, its bytes as sent."""


def _unix(help_text: str, *, nullable: bool = False) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=0, allow_null=nullable, help_text=help_text)


class OpenAIFileSerializer(serializers.Serializer):
    """OpenAI's `File`: an uploaded batch input file, or a batch's output or error file."""

    id = serializers.CharField(help_text="`file-…`: `input_file_id` of a batch, or a batch's output or error file.")
    object = const_field("file")(help_text="Always `file`.")
    bytes = serializers.IntegerField(min_value=0, help_text="The file's size in bytes.")
    created_at = _unix("Unix seconds when it was uploaded (or, for a batch's file, written).")
    filename = serializers.CharField(help_text="The uploaded file's name; `<batch id>_output.jsonl` or `_error`.")
    purpose = enum_field(
        ["batch", "batch_output"], help_text="`batch` for an upload, `batch_output` for a batch's files."
    )
    status = const_field("processed")(help_text="Always `processed`: a file is listed only once it is stored whole.")
    status_details = NullField(help_text="Always null.")
    expires_at = _unix(
        "Unix seconds after which it is deleted: an upload `OPENJEV_BATCH_RETENTION_DAYS` after it was sent, a "
        "batch's files with their batch (`manage.py prune_batches`).",
        nullable=True,
    )


class OpenAIFileListSerializer(serializers.Serializer):
    object = const_field("list")(help_text="Always `list`.")
    data = OpenAIFileSerializer(many=True, help_text="The key's files, newest first.")  # type: ignore[assignment]
    first_id = serializers.CharField(allow_null=True, help_text="The first file's id (null for an empty page).")
    last_id = serializers.CharField(allow_null=True, help_text="The last file's id: `after` for the next page.")
    has_more = serializers.BooleanField(help_text="Whether older files follow this page.")


class OpenAIFileDeletedSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The deleted file's id.")
    object = const_field("file")(help_text="Always `file`.")
    deleted = serializers.BooleanField(help_text="Always true.")


@extend_schema_field(
    {
        "type": ["object", "null"],
        "maxProperties": METADATA_PAIRS,
        "propertyNames": {"maxLength": METADATA_KEY},
        "additionalProperties": {"type": "string", "maxLength": METADATA_VALUE},
    }
)
class MetadataField(serializers.JSONField):
    """OpenAI's metadata: up to 16 string pairs, or null."""


METADATA_HELP = (
    f"Up to {METADATA_PAIRS} pairs of your own (keys up to {METADATA_KEY} characters, values up to "
    f"{METADATA_VALUE}), kept with the batch and shown in the admin; null when none was sent."
)


class BatchErrorSerializer(serializers.Serializer):
    code = serializers.CharField(
        help_text="What is wrong: `invalid_json_line`, `invalid_custom_id`, `duplicate_custom_id`, "
        "`mismatched_endpoint`, `invalid_method`, `invalid_body`, `too_many_requests`, `more_errors`."
    )
    message = serializers.CharField(help_text="What is wrong, for people, naming the line.")
    param = serializers.CharField(allow_null=True, help_text="The line's field at fault (`custom_id`, `url`), if one.")
    line = serializers.IntegerField(
        min_value=1, allow_null=True, help_text="The line's number in the input file (1 is the first), if one."
    )


class BatchErrorsSerializer(serializers.Serializer):
    """Why a batch failed before any line ran."""

    object = const_field("list")(help_text="Always `list`.")
    data = BatchErrorSerializer(  # type: ignore[assignment]
        many=True, help_text="The first 100 problems, in line order; a last `more_errors` says how many more."
    )


class BatchRequestCountsSerializer(serializers.Serializer):
    total = serializers.IntegerField(min_value=0, help_text="Lines of the batch (its input file's, once validated).")
    completed = serializers.IntegerField(min_value=0, help_text="Lines answered with a 2xx (the output file).")
    failed = serializers.IntegerField(
        min_value=0, help_text="Lines answered with an error, their route's or their own (the error file)."
    )


class BatchInputTokensDetailsSerializer(serializers.Serializer):
    cached_tokens = serializers.IntegerField(min_value=0, help_text="Input tokens the backend's prefix cache held.")


class BatchOutputTokensDetailsSerializer(serializers.Serializer):
    reasoning_tokens = serializers.IntegerField(min_value=0, help_text="Always 0: nothing is generated.")


class BatchUsageSerializer(serializers.Serializer):
    input_tokens = serializers.IntegerField(min_value=0, help_text="Prompt tokens of every answered line.")
    input_tokens_details = BatchInputTokensDetailsSerializer(help_text="Cache hits among them.")
    output_tokens = serializers.IntegerField(min_value=0, help_text="Label tokens read back over every line.")
    output_tokens_details = BatchOutputTokensDetailsSerializer(help_text="Always 0 reasoning tokens.")
    total_tokens = serializers.IntegerField(min_value=0, help_text="Input and output tokens together.")


class BatchSerializer(serializers.Serializer):
    """OpenAI's `Batch`: one uploaded file of decision lines, answered line by line in the background."""

    id = serializers.CharField(help_text="`batch_…`.")
    object = const_field("batch")(help_text="Always `batch`.")
    endpoint = enum_field(BATCH_ENDPOINTS, help_text="The route every line is sent to.")
    # A field named like Serializer.errors: DRF's metaclass moves it into `fields`, so the property is intact.
    errors = BatchErrorsSerializer(  # type: ignore[assignment]
        allow_null=True, help_text="Why the batch failed validation; null otherwise."
    )
    input_file_id = serializers.CharField(help_text="The uploaded file of lines.")
    completion_window = enum_field(
        list(WINDOWS), help_text="How long the batch may run: lines not answered by then are not run."
    )
    status = enum_field(
        Batch.STATUSES,
        help_text="`validating` (every line checked before any runs) → `in_progress` → `finalizing` → "
        "`completed`; or `failed` (a file that is not a batch: see `errors`), `expired` (its window closed), "
        "`cancelling` → `cancelled`.",
    )
    output_file_id = serializers.CharField(
        allow_null=True, help_text="Once it has ended: the file of lines answered with a 2xx, if any was."
    )
    error_file_id = serializers.CharField(
        allow_null=True, help_text="Once it has ended: the file of lines answered with an error, if any was."
    )
    created_at = _unix("Unix seconds when it was created.")
    in_progress_at = _unix("When its lines started running.", nullable=True)
    expires_at = _unix("When its completion window closes.")
    finalizing_at = _unix("When its last line was answered.", nullable=True)
    completed_at = _unix("When it completed.", nullable=True)
    failed_at = _unix("When it failed validation.", nullable=True)
    expired_at = _unix("When it expired.", nullable=True)
    cancelling_at = _unix("When it was asked to stop.", nullable=True)
    cancelled_at = _unix("When it stopped, once its running lines had ended.", nullable=True)
    request_counts = BatchRequestCountsSerializer(help_text="Its lines, answered so far.")
    metadata = MetadataField(help_text=METADATA_HELP)
    usage = BatchUsageSerializer(help_text="Tokens of its answered lines.")


class BatchListSerializer(serializers.Serializer):
    object = const_field("list")(help_text="Always `list`.")
    data = BatchSerializer(many=True, help_text="The key's batches, newest first.")  # type: ignore[assignment]
    first_id = serializers.CharField(allow_null=True, help_text="The first batch's id (null for an empty page).")
    last_id = serializers.CharField(allow_null=True, help_text="The last batch's id: `after` for the next page.")
    has_more = serializers.BooleanField(help_text="Whether older batches follow this page.")


class BatchCreateRequestSerializer(serializers.Serializer):
    input_file_id = serializers.CharField(help_text="An uploaded file (`purpose` batch) of this key.")
    endpoint = enum_field(
        BATCH_ENDPOINTS,
        help_text="The route every line names in its `url` and is answered by (those installed here).",
    )
    completion_window = enum_field(list(WINDOWS), required=False, help_text="`24h`, the only window (the default).")
    metadata = MetadataField(required=False, help_text=METADATA_HELP)


class FileUploadSerializer(serializers.Serializer):
    file = UploadField(
        help_text='JSONL: one request a line, `{"custom_id", "method": "POST", "url", "body"}`, UTF-8 '
        "text; at most `OPENJEV_BATCH_MAX_LINES` lines (50,000 by default), each at most the body limit and 64 KiB."
    )
    purpose = enum_field(PURPOSES, help_text="`batch`: the only files this service reads.")


# -- Examples --------------------------------------------------------------------------------------------------

FILE_OBJECT: dict[str, Any] = {
    "id": FILE_ID,
    "object": "file",
    "bytes": 48213,
    "created_at": STAMP,
    "filename": "tickets.jsonl",
    "purpose": "batch",
    "status": "processed",
    "status_details": None,
    "expires_at": STAMP + 30 * 86400,
}
BATCH_CREATE: dict[str, Any] = {
    "input_file_id": FILE_ID,
    "endpoint": "/v1/decisions",
    "completion_window": "24h",
    "metadata": {"project": "ticket routing"},
}
BATCH_OBJECT: dict[str, Any] = {
    "id": BATCH_ID,
    "object": "batch",
    "endpoint": "/v1/decisions",
    "errors": None,
    "input_file_id": FILE_ID,
    "completion_window": "24h",
    "status": "completed",
    "output_file_id": "file-3a9e5c1d7b2f4e6a8c0d2b41o",
    "error_file_id": None,
    "created_at": STAMP,
    "in_progress_at": STAMP + 1,
    "expires_at": STAMP + 86400,
    "finalizing_at": STAMP + 95,
    "completed_at": STAMP + 95,
    "failed_at": None,
    "expired_at": None,
    "cancelling_at": None,
    "cancelled_at": None,
    "request_counts": {"total": 200, "completed": 200, "failed": 0},
    "metadata": {"project": "ticket routing"},
    "usage": {
        "input_tokens": 80400,
        "input_tokens_details": {"cached_tokens": 57600},
        "output_tokens": 800,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 81200,
    },
}
INPUT_LINE = (
    '{"custom_id": "ticket-1", "method": "POST", "url": "/v1/decisions", "body": {"model": "jev-latest", "input": '
    '"I was charged twice!", "questions": [{"type": "predicate", "name": "refund", "instructions": "Refund?"}]}}'
)
OUTPUT_LINE = (
    '{"id":"batch_req_000000000000000000000001","custom_id":"ticket-1","response":{"status_code":200,'
    '"request_id":"req_5f0c3a9e2b7d4c18a6e1f4b2d9c07a35","body":{"answers":[{"type":"predicate","name":"refund",'
    '"probability":0.93}],"model":"jev-latest","usage":{"input_tokens":61,"input_tokens_details":{"cached_tokens":0,'
    '"cache_write_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":62}}},'
    '"error":null}'
)
