"""The INSERTs of stored evaluations, compiled once per database vendor.

The ORM's bulk_create compiles its SQL on every call, which was most of the writer's CPU; here only
JSON and date-time values are adapted per row. Answers are linked to their evaluation through its
unique request id, so a whole batch is two `executemany` calls in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from django.db import connection, models, transaction
from django.db.backends.base.operations import BaseDatabaseOperations

from evaluations.models import ApiKey, Calibration, Classifier, Evaluation, EvaluationAnswer, JSONTextField
from evaluations.storage.rows import Row

_Columns = tuple[tuple[str, Callable[[Any], Any] | None], ...]
"""Per column in statement order: its attname and how its value becomes a query parameter (None: as it is)."""


@dataclass(frozen=True)
class _Statements:
    evaluation_sql: str
    evaluation_columns: _Columns
    answer_sql: str
    answer_columns: _Columns


_statements: dict[str, _Statements] = {}


def _statements_for(db: Any) -> _Statements:
    found = _statements.get(db.vendor)
    if found is not None:
        return found
    qn = db.ops.quote_name
    ev_fields = tuple(f for f in Evaluation._meta.concrete_fields if not f.primary_key)
    an_fields = tuple(f for f in EvaluationAnswer._meta.concrete_fields if not f.primary_key and f.name != "evaluation")
    ev_table, an_table = qn(Evaluation._meta.db_table), qn(EvaluationAnswer._meta.db_table)
    evaluation_sql = (f"INSERT INTO {ev_table} ({', '.join(qn(f.column) for f in ev_fields)}) "
                      f"VALUES ({', '.join(['%s'] * len(ev_fields))})")
    answer_sql = (f"INSERT INTO {an_table} ({qn(EvaluationAnswer._meta.get_field('evaluation').column)}, "
                  f"{', '.join(qn(f.column) for f in an_fields)}) "
                  f"VALUES ((SELECT {qn('id')} FROM {ev_table} WHERE {qn('request_id')} = %s), "
                  f"{', '.join(['%s'] * len(an_fields))})")
    found = _Statements(evaluation_sql, _columns(ev_fields, db), answer_sql, _columns(an_fields, db))
    _statements[db.vendor] = found
    return found


def _json_text(value: Any) -> str | None:
    """JSON text by orjson: the standard library's encoder, via Django's field preparation, was a third
    of the writer's CPU on 64-answer evaluations. Only for values that are finite by construction
    (answers, error details, image lists): orjson writes infinity as null, where the request as sent
    (`JSONTextField`) may hold 1e400 and keeps its own encoding. What orjson refuses (a lone surrogate)
    goes through the standard library, so the database refuses it as before and the row is scrubbed."""
    return None if value is None else _json_encode(value)


def _json_encode(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _columns(fields: tuple[Any, ...], db: Any) -> _Columns:
    return tuple((f.attname, _adapter(f, db) if isinstance(f, models.DateTimeField | models.JSONField | JSONTextField)
                  else None) for f in fields)


def _adapter(field: Any, db: Any) -> Callable[[Any], Any]:
    """`JSONField`s are written by `_json_text`: as text where the database takes JSON as text (its backend
    keeps Django's default adaptation: SQLite), as psycopg's `Jsonb` with that text on PostgreSQL; anything
    else (date-times, the request as sent) the field prepares itself."""
    if isinstance(field, models.JSONField) and field.encoder is None:
        if type(db.ops).adapt_json_value is BaseDatabaseOperations.adapt_json_value:
            return _json_text
        if db.vendor == "postgresql":
            from psycopg.types.json import Jsonb

            return lambda value: None if value is None else Jsonb(value, dumps=_json_encode)
    return lambda value: None if value is None else field.get_db_prep_save(value, db)


def _params(values: dict[str, Any], columns: _Columns) -> list[Any]:
    return [values[name] if adapt is None else adapt(values[name]) for name, adapt in columns]


def _existing(model: type[models.Model], ids: set[int]) -> set[int]:
    return set(model._default_manager.filter(pk__in=ids).values_list("pk", flat=True)) if ids else set()


def rows_insert(rows: list[Row]) -> None:
    """One transaction for the batch: evaluations, then answers. A link to an API key, a classifier or a
    calibration deleted since the request is dropped (the label and the name are kept)."""
    keys = _existing(ApiKey, {ev["api_key_id"] for ev, _ in rows if ev["api_key_id"] is not None})
    classifiers = _existing(Classifier, {ev["classifier_id"] for ev, _ in rows if ev["classifier_id"] is not None})
    calibrations = _existing(Calibration, {a["calibration_id"] for _, answers in rows for a in answers
                                           if a["calibration_id"] is not None})
    sql = _statements_for(connection)
    ev_params = []
    an_params = []
    for ev, answers in rows:
        linked = {**ev, "api_key_id": ev["api_key_id"] if ev["api_key_id"] in keys else None,
                  "classifier_id": ev["classifier_id"] if ev["classifier_id"] in classifiers else None}
        ev_params.append(_params(linked, sql.evaluation_columns))
        for answer in answers:
            kept = answer if answer["calibration_id"] in calibrations else {**answer, "calibration_id": None}
            an_params.append([ev["request_id"], *_params(kept, sql.answer_columns)])
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(sql.evaluation_sql, ev_params)
        if an_params:
            cursor.executemany(sql.answer_sql, an_params)
