"""`OPENJEV_LOG_FORMAT=json`: one JSON object per log line, for log pipelines that index fields.

Every line has `time` (UTC, ISO 8601), `level`, `logger` and `message`, and, when it was written while a request
was served, the request's `request_id`, its `trace_id` (with tracing on), its `api` and the caller's `key` (its
public label, `oj_<prefix>`; never a secret). Each evaluating request also ends with one line of its own
(`openjev.request`: `route`, `status`, `duration_ms`), written by its meter (`api.plumbing.metering`). Redaction is the
text format's (`serving.redaction`): the whole line, after formatting, so no field can carry a secret out.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from api.plumbing.metering import meter_current
from api.plumbing.requestids import request_id_current
from api.plumbing.tracing import trace_id_current
from serving.redaction import RedactingFormatter, configured_secrets, text_redact

RECORD_FIELDS = ("route", "status", "duration_ms")
"""Fields a record may carry (`extra=`) that the line shows as fields of their own."""


class JsonFormatter(RedactingFormatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id, trace_id, meter = request_id_current(), trace_id_current(), meter_current()
        if request_id is not None:
            entry["request_id"] = request_id
        if trace_id is not None:
            entry["trace_id"] = trace_id
        if meter is not None:
            entry["api"] = meter.api
            if meter.caller is not None:
                entry["key"] = meter.caller
        entry |= {name: getattr(record, name) for name in RECORD_FIELDS if hasattr(record, name)}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        line = json.dumps(entry, ensure_ascii=False, default=str)
        return text_redact(text=line, secrets=configured_secrets())
