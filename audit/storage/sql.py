"""The INSERTs of stored evaluations, compiled once per database vendor.

The ORM's bulk_create compiles its SQL on every call, which was most of the writer's CPU; here only
JSON and date-time values are adapted per row. A batch is one transaction: the evaluations' INSERT
returns their ids, which the answers' rows then carry. How the rows travel is the driver's fastest way:
multi-row INSERTs on SQLite, a pipelined INSERT per evaluation and a `COPY` of the answers on PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import psycopg
from django.db import connection, models, transaction
from django.db.backends.base.operations import BaseDatabaseOperations

from audit.models import ApiKey, Calibration, Classifier, Evaluation, EvaluationAnswer, JSONTextField
from audit.storage.rows import Row


class _Columns:
    """A statement's columns in order: a row's values read by one `itemgetter`, then the few that need it
    adapted (JSON, date-times); 64 answers per evaluation made a per-column loop count."""

    def __init__(self, fields: tuple[Any, ...], db: Any) -> None:
        self._values = operator.itemgetter(*(f.attname for f in fields))
        self._adapters = tuple(
            (i, _adapter(f, db))
            for i, f in enumerate(fields)
            if isinstance(f, models.DateTimeField | models.JSONField | JSONTextField)
        )

    def params(self, values: dict[str, Any]) -> list[Any]:
        row = list(self._values(values))
        for i, adapt in self._adapters:
            row[i] = adapt(row[i])
        return row


ROWS_PER_STATEMENT = 64
"""Rows per multi-row INSERT. One statement rather than one `executemany` step per row: SQLite's driver
releases the GIL around every step, and the event loop and the writer handing it back and forth 64
times per evaluation cost more CPU than the inserts themselves."""


@dataclass(frozen=True)
class _Insert:
    """`INSERT INTO table (columns) VALUES` and one row's `(placeholders)`, for any number of rows."""

    table: str
    names: str
    """The quoted columns, comma-separated."""
    row: str
    columns: _Columns
    tail: str = ""
    _sql: dict[int, str] = dataclasses.field(default_factory=dict)

    def sql(self, rows: int) -> str:
        """The statement for `rows` rows, built once (the same text object each time, as the driver's
        statement cache is keyed by it)."""
        found = self._sql.get(rows)
        if found is None:
            values = ", ".join([self.row] * rows)
            found = self._sql[rows] = f"INSERT INTO {self.table} ({self.names}) VALUES {values}{self.tail}"
        return found

    @property
    def copy(self) -> str:
        """PostgreSQL's bulk load of the same columns."""
        return f"COPY {self.table} ({self.names}) FROM STDIN"


@dataclass(frozen=True)
class _Statements:
    evaluation: _Insert
    answer: _Insert


_statements: dict[str, _Statements] = {}


def _statements_for(db: Any) -> _Statements:
    found = _statements.get(db.vendor)
    if found is not None:
        return found
    qn = db.ops.quote_name
    mark = "?" if db.vendor == "sqlite" else "%s"  # see _statement_run
    ev_fields = tuple(f for f in Evaluation._meta.concrete_fields if not f.primary_key)
    an_fields = tuple(f for f in EvaluationAnswer._meta.concrete_fields if not f.primary_key and f.name != "evaluation")
    ev_table, an_table = qn(Evaluation._meta.db_table), qn(EvaluationAnswer._meta.db_table)
    evaluation = _Insert(
        ev_table,
        ", ".join(qn(f.column) for f in ev_fields),
        f"({', '.join([mark] * len(ev_fields))})",
        _Columns(ev_fields, db),
        tail=f" RETURNING {qn('id')}, {qn('request_id')}",
    )
    answer = _Insert(
        an_table,
        ", ".join(qn(f.column) for f in (EvaluationAnswer._meta.get_field("evaluation"), *an_fields)),
        f"({', '.join([mark] * (1 + len(an_fields)))})",
        _Columns(an_fields, db),
    )
    found = _Statements(evaluation, answer)
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


def _chunks(params: list[list[Any]]) -> Iterator[list[list[Any]]]:
    """Up to `ROWS_PER_STATEMENT` rows, fewer where the database takes fewer parameters per statement (a
    SQLite built with a lower variable limit)."""
    limit = connection.features.max_query_params
    per = ROWS_PER_STATEMENT if not limit or not params else max(1, min(ROWS_PER_STATEMENT, limit // len(params[0])))
    for start in range(0, len(params), per):
        yield params[start : start + per]


def _inserted(cursor: Any, insert: _Insert, rows: list[list[Any]]) -> list[Any]:
    """`rows` inserted in the driver's cheapest way; what the statement returns (`insert.tail`), if anything.
    Driver errors become Django's, as on Django's cursor: retries and the row-by-row fallback
    (`audit.storage.store`) catch those."""
    if not rows:
        return []
    with connection.wrap_database_errors:
        if connection.vendor == "postgresql":
            return _postgresql_inserted(insert, rows)
        return [found for chunk in _chunks(rows) for found in _statement_run(cursor, insert, chunk)]


def _statement_run(cursor: Any, insert: _Insert, rows: list[list[Any]]) -> list[Any]:
    """One multi-row INSERT on the driver's own cursor, in its own placeholder style (Django's SQLite cursor
    rewrites `%s` to `?` by a regular expression on every call: a fifth of the insert's CPU for 64 rows)."""
    sql, params = insert.sql(len(rows)), [value for row in rows for value in row]
    if isinstance(cursor, sqlite3.Cursor):
        sqlite3.Cursor.execute(cursor, sql, params)
    else:
        cursor.execute(sql, params)
    return cursor.fetchall() if insert.tail else []


def _postgresql_inserted(insert: _Insert, rows: list[list[Any]]) -> list[Any]:
    """PostgreSQL, on a cursor that binds on the server: Django's binds on the client, where psycopg quotes
    every value into the statement's text in Python and parses again each statement over 4 KB or 50
    parameters, 3.7 ms of the writer's CPU per 64-answer evaluation. A returning INSERT is pipelined (one
    short statement per row, one round trip for them all), the answers go in one `COPY`: 0.5 ms."""
    with psycopg.Cursor(connection.connection) as cursor:
        if not insert.tail:
            with cursor.copy(insert.copy) as copy:
                for row in rows:
                    copy.write_row(row)
            return []
        cursor.executemany(insert.sql(1), rows, returning=True)
        found = []
        while True:
            found.extend(cursor.fetchall())
            if not cursor.nextset():
                return found


def _existing(model: type[models.Model], ids: set[int]) -> set[int]:
    return set(model._default_manager.filter(pk__in=ids).values_list("pk", flat=True)) if ids else set()


def rows_insert(rows: list[Row]) -> None:
    """One transaction for the batch: evaluations, then answers. A link to an API key, a classifier or a
    calibration deleted since the request is dropped (the label and the name are kept)."""
    keys = _existing(ApiKey, {ev["api_key_id"] for ev, _ in rows if ev["api_key_id"] is not None})
    classifiers = _existing(Classifier, {ev["classifier_id"] for ev, _ in rows if ev["classifier_id"] is not None})
    calibrations = _existing(
        Calibration, {a["calibration_id"] for _, answers in rows for a in answers if a["calibration_id"] is not None}
    )
    sql = _statements_for(connection)
    ev_params = []
    for ev, _ in rows:
        linked = {
            **ev,
            "api_key_id": ev["api_key_id"] if ev["api_key_id"] in keys else None,
            "classifier_id": ev["classifier_id"] if ev["classifier_id"] in classifiers else None,
        }
        ev_params.append(sql.evaluation.columns.params(linked))
    with transaction.atomic(), connection.cursor() as cursor:
        ids = {request_id: pk for pk, request_id in _inserted(cursor.cursor, sql.evaluation, ev_params)}
        an_params = [
            [
                ids[ev["request_id"]],
                *sql.answer.columns.params(
                    answer if answer["calibration_id"] in calibrations else {**answer, "calibration_id": None}
                ),
            ]
            for ev, answers in rows
            for answer in answers
        ]
        _inserted(cursor.cursor, sql.answer, an_params)
