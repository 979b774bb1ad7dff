"""The stored rows' shared vocabulary: the JSON-as-text column and the choices several models use.

State and questions are kept as JSON *text* rather than `JSONField`, because PostgreSQL's jsonb reorders object
keys, and the order of a choice's options (and of a transcript's keys) is part of what the model saw."""

from __future__ import annotations

import json
from typing import Any

from django.db import models

STATUS_CHOICES = [
    (200, "200 OK"),
    (400, "400 invalid request (classify, decisions)"),
    (404, "404 unknown classifier or model (classify, decisions)"),
    (422, "422 invalid request"),
    (499, "499 client closed request"),
    (500, "500 internal error"),
    (502, "502 backend error"),
    (503, "503 backend unavailable"),
    (504, "504 timeout"),
    (529, "529 overloaded"),
]
QUESTION_TYPE_CHOICES = [("noul", "noul"), ("choice", "choice"), ("score", "score")]
STORE_LEVEL_CHOICES = [("full", "full"), ("metadata", "metadata")]


class JSONTextField(models.TextField):
    """Any JSON value, stored as compact JSON text so key order and duplicates survive every database."""

    description = "JSON kept as text (key order preserved)"
    # What the model attribute holds, for django-stubs: any JSON value, not the text it is stored as.
    _pyi_private_set_type: Any
    _pyi_private_get_type: Any

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        return None if value is None else json.loads(value)

    def to_python(self, value: Any) -> Any:
        return value

    def get_prep_value(self, value: Any) -> str | None:
        if value is None:
            return None
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    def value_to_string(self, obj: models.Model) -> str:
        return self.get_prep_value(self.value_from_object(obj)) or ""
