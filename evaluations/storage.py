"""Storing evaluations without touching the answer: a bounded queue and one writer thread.

The event loop only describes the outcome and puts a small job on a queue (microseconds); the
writer thread turns jobs into rows and inserts them in batches, one transaction per batch. One
writer means SQLite never sees two writers of ours at once, and batching turns a burst of
evaluations into a few transactions. Nothing here raises into the caller: a full queue, a bad row
or a database outage is logged and counted (`storage_stats`), and the answer goes out unchanged.
Connection-level errors (server down, "database is locked") are retried a few times, so a database
restart loses nothing while the queue has room. The writer closes its connection when idle, so it
never pins one.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, ProgrammingError, connections, transaction
from django.db.models import Q

from evaluations.errors import ApiError, error_text, inference_error_to_api
from evaluations.livefeed import live_feed
from evaluations.parsing import text_printable
from inference.errors import InferenceError, RequestInvalid
from inference.questions import QUESTION_TYPES
from inference.runner import Outcome

log = logging.getLogger(__name__)

QUEUE_SIZE = 10_000
BATCH_MAX = 200
LINGER_SECONDS = 0.05
IDLE_CLOSE_SECONDS = 2.0
RETRY_DELAYS: Sequence[float] = (0.25, 1.0, 3.0)
ERROR_MESSAGE_MAX = 4000
QUESTION_ID_MAX = 500
CHOICE_MAX = 255
FAILED_JSON_MAX = 64 * 1024
"""Characters of JSON a failed request keeps of its state and of its questions (each), and of its
validation problems: a 2 MiB body refused in a millisecond must not cost 2 MiB of database per try."""
TRUNCATED_KEY = "openjev_truncated"


@dataclass(frozen=True)
class _EvaluationJob:
    request_id: str
    created_at: datetime
    level: str
    api_key: str | None
    data: Any
    served_model: str
    backend: str
    total_ms: float
    status: int
    error_type: str = ""
    error_message: str = ""
    error_detail: list[dict[str, Any]] | None = None
    outcome: Outcome | None = None
    classifier_id: int | None = None
    classifier_name: str = ""


@dataclass(frozen=True)
class _TouchJob:
    key_id: int
    when: datetime


class _Stop:
    """Sentinel: finish what is queued, close the connection, end the thread."""


@dataclass
class _Stats:
    submitted: int = 0
    stored: int = 0
    failed: int = 0
    dropped: int = 0
    batches: int = 0
    writer_cpu_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, **deltas: float) -> None:
        with self.lock:
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)


def error_describe(*, error: BaseException) -> tuple[int, str, str, list[dict[str, Any]] | None]:
    """(status, error_type, message, detail) with the status and type the client got; the message is
    what operators need: where the client got a generic 5xx, the redacted cause."""
    if isinstance(error, RequestInvalid):
        detail = [{"loc": list(p.loc), "msg": p.msg, "type": p.type} for p in error.problems]
        return 422, "validation_error", str(error), detail
    if isinstance(error, ApiError):
        return error.status, error.error_type, error.internal or error.message, None
    if isinstance(error, InferenceError):
        api = inference_error_to_api(error)
        return api.status, api.error_type, api.internal or api.message, None
    if isinstance(error, asyncio.CancelledError):
        return 499, "client_closed", "the client disconnected before the answer was ready", None
    return 500, "internal_error", error_text(error=error), None


class _Writer:
    """The one thread that writes; started on first use, restarted after a fork or a stop."""

    def __init__(self) -> None:
        self.stats = _Stats()
        self._queue: queue.Queue[Any] = queue.Queue(QUEUE_SIZE)
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._start_lock = threading.Lock()
        self._pending = 0
        self._idle = threading.Condition()
        self._last_drop_log = 0.0
        self._last_schema_log = 0.0

    # -- producer side (event loop) ---------------------------------------------------------------

    def submit(self, job: _EvaluationJob | _TouchJob) -> bool:
        self._ensure_started()
        with self._idle:
            self._pending += 1
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()
            self.stats.add(dropped=1)
            now = time.monotonic()
            if now - self._last_drop_log > 10:
                self._last_drop_log = now
                log.error("evaluation storage queue is full (%d jobs): dropping; the database is too slow or down",
                          QUEUE_SIZE)
            return False
        if isinstance(job, _EvaluationJob):
            self.stats.add(submitted=1)
        return True

    def _ensure_started(self) -> None:
        thread = self._thread
        if thread is not None and thread.is_alive() and self._pid == os.getpid():
            return
        with self._start_lock:
            if self._thread is not None and self._thread.is_alive() and self._pid == os.getpid():
                return
            if self._pid != os.getpid():  # a forked child inherits a queue without its thread
                self._queue = queue.Queue(QUEUE_SIZE)
                self._pending = 0
            self._pid = os.getpid()
            self._thread = threading.Thread(target=self._run, name="openjev-storage", daemon=True)
            self._thread.start()

    def drain(self, *, timeout: float) -> bool:
        """Wait until every submitted job is written (or failed); False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout=timeout)

    def stop(self, *, timeout: float) -> bool:
        """Write what is queued, close the connection and end the thread (tests, bench, process exit)."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            return True
        try:
            self._queue.put(_Stop(), timeout=timeout)
        except queue.Full:
            return False
        thread.join(timeout)
        if thread.is_alive():
            return False
        if self._pending:  # submitted while the old thread was stopping
            self._ensure_started()
        return True

    # -- consumer side (writer thread) ------------------------------------------------------------

    def _run(self) -> None:
        while True:
            try:
                first = self._queue.get(timeout=IDLE_CLOSE_SECONDS)
            except queue.Empty:
                connections.close_all()
                continue
            batch = [first]
            deadline = time.monotonic() + LINGER_SECONDS
            while len(batch) < BATCH_MAX and not isinstance(batch[-1], _Stop):
                try:  # linger briefly: one transaction for a burst costs far less than one per row
                    batch.append(self._queue.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
            stop = isinstance(batch[-1], _Stop)
            jobs = [j for j in batch if not isinstance(j, _Stop)]
            started = time.thread_time()
            try:
                self._process(jobs)
            except BaseException:  # never let the thread die with jobs counted as pending
                log.exception("evaluation storage writer failed")
                self.stats.add(failed=sum(isinstance(j, _EvaluationJob) for j in jobs))
                connections.close_all()
            finally:
                self.stats.add(writer_cpu_s=time.thread_time() - started, batches=1)
                with self._idle:
                    self._pending -= len(jobs)
                    self._idle.notify_all()
            if stop:
                connections.close_all()
                return

    def _process(self, jobs: list[_EvaluationJob | _TouchJob]) -> None:
        evaluations = [j for j in jobs if isinstance(j, _EvaluationJob)]
        touches = [j for j in jobs if isinstance(j, _TouchJob)]
        if evaluations:
            self._evaluations_write(evaluations)
        if touches:
            try:
                _with_retries(lambda: _touches_write(touches))
            except Exception:
                log.warning("could not record last use of %d API key(s)", len(touches), exc_info=True)
                connections.close_all()

    def _evaluations_write(self, jobs: list[_EvaluationJob]) -> None:
        rows = []
        for job in jobs:
            try:
                rows.append(evaluation_rows_build(job=job))
            except Exception:
                log.exception("could not store evaluation %s: building its row failed", job.request_id)
                self.stats.add(failed=1)
        if not rows:
            return
        try:
            _with_retries(lambda: _rows_insert(rows))
            self.stats.add(stored=len(rows))
            return
        except Exception as exc:
            connections.close_all()
            if _schema_missing(exc):
                now = time.monotonic()
                if now - self._last_schema_log > 60:
                    self._last_schema_log = now
                    log.error("cannot store evaluations: the tables are missing (%s); run `manage.py migrate`", exc)
                self.stats.add(failed=len(rows))
                return
            if isinstance(exc, OperationalError | InterfaceError):  # the database is unreachable: give up
                log.error("could not store %d evaluation(s) (%s): the database is unavailable: %s",
                          len(rows), ", ".join(r[0]["request_id"] for r in rows[:5]), exc)
                self.stats.add(failed=len(rows))
                return
            log.warning("storing a batch of %d evaluations failed (%s); retrying one by one", len(rows), exc)
        for row in rows:  # a bad row (a NUL PostgreSQL refuses, a lone surrogate no UTF-8 driver encodes)
            try:  # must not sink its batch
                try:
                    _rows_insert([row])
                except (DatabaseError, UnicodeError):
                    connections.close_all()
                    _rows_insert([_row_scrub(row)])
                self.stats.add(stored=1)
            except Exception:
                log.exception("could not store evaluation %s", row[0]["request_id"])
                self.stats.add(failed=1)
                connections.close_all()


def _schema_missing(exc: BaseException) -> bool:
    """Not migrated: PostgreSQL says ProgrammingError, SQLite an OperationalError "no such table"."""
    return isinstance(exc, ProgrammingError) or "no such table" in str(exc)


def _with_retries(write: Any) -> None:
    """Retry a write while the database is unreachable; other errors go straight to the caller."""
    for delay in (*RETRY_DELAYS, None):
        try:
            write()
            return
        except (OperationalError, InterfaceError) as exc:
            connections.close_all()
            if delay is None or _schema_missing(exc):
                raise
            log.warning("database unavailable for evaluation storage (%s); retrying in %.2f s", exc, delay)
            time.sleep(delay)


def _touches_write(jobs: list[_TouchJob]) -> None:
    from evaluations.keys import TOUCH_SECONDS
    from evaluations.models import ApiKey

    latest: dict[int, datetime] = {}
    for job in jobs:
        latest[job.key_id] = max(job.when, latest.get(job.key_id, job.when))
    for key_id, when in latest.items():
        stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=when - timedelta(seconds=TOUCH_SECONDS))
        ApiKey.objects.filter(stale, pk=key_id).update(last_used_at=when)


Row = tuple[dict[str, Any], list[dict[str, Any]]]  # (evaluation, answers) as attname -> value, before insert


def evaluation_rows_build(*, job: _EvaluationJob) -> Row:
    """Column values for one job, at its storage level (plain dicts: cheaper than model instances)."""
    data = job.data if isinstance(job.data, dict) else {}
    questions = data.get("questions")
    questions = questions if isinstance(questions, dict) else {}
    types = sorted(t for t in QUESTION_TYPES if any(isinstance(q, dict) and q.get("type") == t
                                                    for q in questions.values()))
    model = data.get("model")
    outcome = job.outcome
    full = job.level == "full"
    count = len(questions)
    if job.classifier_name:  # a classification asks its classifier's one question of every input text
        state = data.get("state")
        count = len(state) if isinstance(state, list) else int(isinstance(state, str))
    evaluation = {
        "request_id": job.request_id,
        "created_at": job.created_at,
        "api_key_id": None,
        "api_key_label": job.api_key or "",
        "requested_model": model[:200] if isinstance(model, str) else "",
        "served_model": job.served_model[:200],
        "backend": job.backend[:32],
        "status_code": job.status,
        "error_type": job.error_type[:64],
        "error_message": job.error_message[:ERROR_MESSAGE_MAX],
        "error_detail": _failed_json_capped(job.error_detail),
        "question_count": min(count, 32767),
        "question_types": ",".join(types),
        "input_tokens": outcome.usage.input_tokens if outcome else None,
        "output_tokens": outcome.usage.output_tokens if outcome else None,
        "prefix_tokens": outcome.prefix_tokens if outcome else None,
        "cached_tokens": outcome.cached_tokens if outcome else None,
        "prepare_ms": outcome.timings.prepare_ms if outcome else None,
        "prefill_ms": outcome.timings.prefill_ms if outcome else None,
        "branches_ms": outcome.timings.branches_ms if outcome else None,
        "total_ms": job.total_ms,
        "classifier_id": job.classifier_id,
        "classifier_name": job.classifier_name[:100],
        "store_level": job.level,
        "state": _stored_json(data.get("state"), full=full, failed=job.status != 200),
        "questions": _stored_json(data.get("questions"), full=full, failed=job.status != 200),
    }
    answers = []
    for position, answer in enumerate(outcome.answers if outcome else ()):
        kind = answer.question.type
        keys = [o.key for o in answer.question.options]
        answers.append({
            "position": position,
            "question_id": answer.question_id[:QUESTION_ID_MAX],
            "type": kind,
            "noul": answer.probabilities[0] if kind == "noul" else None,
            "choice": keys[answer.choice_index][:CHOICE_MAX] if kind == "choice" else None,
            "score": answer.score if kind == "score" else None,
            "confidence": answer.confidence,
            "probabilities": dict(zip(keys, answer.probabilities, strict=True)),
            "option_keys": keys,
            "raw_probabilities": dict(zip(keys, answer.raw_probabilities, strict=True)),
            "label_mass": answer.label_mass,
        })
    return evaluation, answers


def _failed_json_capped(value: Any) -> Any:
    """`value` if its JSON fits in `FAILED_JSON_MAX` characters, else a marker object holding the size
    and the head of that JSON text (readable in the admin, and never mistaken for a state as sent)."""
    if value is None:
        return None
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if len(text) <= FAILED_JSON_MAX:
        return value
    return {TRUNCATED_KEY: {"json_chars": len(text), "head": text[:FAILED_JSON_MAX]}}


def _stored_json(value: Any, *, full: bool, failed: bool) -> Any:
    if not full:
        return None
    return _failed_json_capped(value) if failed else value


@dataclass(frozen=True)
class _Statements:
    """INSERTs compiled once per database vendor. The ORM's bulk_create compiles its SQL on every
    call, which was most of the writer's CPU; here only JSON and date-time values are adapted."""

    evaluation_sql: str
    evaluation_fields: tuple[Any, ...]
    answer_sql: str
    answer_fields: tuple[Any, ...]
    prepared: frozenset[str]


_statements: dict[str, _Statements] = {}


def _statements_for(connection: Any) -> _Statements:
    found = _statements.get(connection.vendor)
    if found is not None:
        return found
    from django.db import models

    from evaluations.models import Evaluation, EvaluationAnswer, JSONTextField

    qn = connection.ops.quote_name
    ev_fields = tuple(f for f in Evaluation._meta.concrete_fields if not f.primary_key)
    an_fields = tuple(f for f in EvaluationAnswer._meta.concrete_fields if not f.primary_key and f.name != "evaluation")
    ev_table, an_table = qn(Evaluation._meta.db_table), qn(EvaluationAnswer._meta.db_table)
    evaluation_sql = (f"INSERT INTO {ev_table} ({', '.join(qn(f.column) for f in ev_fields)}) "
                      f"VALUES ({', '.join(['%s'] * len(ev_fields))})")
    answer_sql = (f"INSERT INTO {an_table} ({qn(EvaluationAnswer._meta.get_field('evaluation').column)}, "
                  f"{', '.join(qn(f.column) for f in an_fields)}) "
                  f"VALUES ((SELECT {qn('id')} FROM {ev_table} WHERE {qn('request_id')} = %s), "
                  f"{', '.join(['%s'] * len(an_fields))})")
    prepared = frozenset(f.attname for f in (*ev_fields, *an_fields)
                         if isinstance(f, models.DateTimeField | models.JSONField | JSONTextField))
    found = _Statements(evaluation_sql, ev_fields, answer_sql, an_fields, prepared)
    _statements[connection.vendor] = found
    return found


def _params(values: dict[str, Any], fields: tuple[Any, ...], prepared: frozenset[str], connection: Any) -> list[Any]:
    return [f.get_db_prep_save(values[f.attname], connection) if f.attname in prepared else values[f.attname]
            for f in fields]


def _rows_insert(rows: list[Row]) -> None:
    """One transaction for the batch: evaluations, then answers (linked through the unique request id)."""
    from django.db import connection

    from evaluations.models import ApiKey, Classifier

    labels = {ev["api_key_label"] for ev, _ in rows if ev["api_key_label"].startswith("oj_")}
    key_ids = dict(ApiKey.objects.filter(prefix__in=[label[3:] for label in labels])
                   .values_list("prefix", "id")) if labels else {}
    wanted = {ev["classifier_id"] for ev, _ in rows if ev["classifier_id"] is not None}
    classifiers = set(Classifier.objects.filter(pk__in=wanted).values_list("pk", flat=True)) if wanted else set()
    sql = _statements_for(connection)
    ev_params = []
    an_params = []
    for ev, answers in rows:
        label = ev["api_key_label"]
        ev["api_key_id"] = key_ids.get(label[3:]) if label.startswith("oj_") else None
        if ev["classifier_id"] not in classifiers:  # deleted since the request: keep the name, drop the link
            ev["classifier_id"] = None
        ev_params.append(_params(ev, sql.evaluation_fields, sql.prepared, connection))
        for answer in answers:
            an_params.append([ev["request_id"], *_params(answer, sql.answer_fields, sql.prepared, connection)])
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(sql.evaluation_sql, ev_params)
        if an_params:
            cursor.executemany(sql.answer_sql, an_params)


def _scrub(value: Any) -> Any:
    """Text every database can store: NUL characters and lone surrogates as U+FFFD."""
    if isinstance(value, str):
        return text_printable(value.replace("\x00", "\ufffd"))
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


def _row_scrub(row: Row) -> Row:
    evaluation, answers = row
    return _scrub(evaluation), [_scrub(a) for a in answers]


_writer = _Writer()


def evaluation_store(*, request_id: str, created_at: datetime, api_key: str | None, data: Any, served_model: str,
                     backend: str, total_ms: float, outcome: Outcome | None = None,
                     error: BaseException | None = None, classifier_id: int | None = None,
                     classifier_name: str = "") -> None:
    """Queue one evaluation (success: `outcome`; failure: `error`) for the writer, and count it for the
    live dashboard (at every storage level). Never raises.

    A classification (`POST /v1/classify`) names its classifier; its `data` is already in System One
    form (`state` the input, `questions` the classifier's question)."""
    try:
        status, error_type, message, detail = (200, "", "", None) if error is None else error_describe(error=error)
        live_feed.record(status=status, total_ms=total_ms, outcome=outcome)
        level = settings.OPENJEV.store_evaluations
        if level == "off":
            return
        _writer.submit(_EvaluationJob(
            request_id=request_id, created_at=created_at, level=level, api_key=api_key, data=data,
            served_model=served_model, backend=backend, total_ms=total_ms, status=status, error_type=error_type,
            error_message=message, error_detail=detail, outcome=outcome, classifier_id=classifier_id,
            classifier_name=classifier_name))
    except Exception:
        log.exception("could not queue evaluation %s for storage", request_id)
        _writer.stats.add(failed=1)


def apikey_touch_enqueue(*, key_id: int, when: datetime) -> None:
    """Queue a last-used update for an API key (the writer coalesces them). Never raises."""
    try:
        _writer.submit(_TouchJob(key_id=key_id, when=when))
    except Exception:
        log.exception("could not queue an API key last-used update")


def evaluation_store_drain(*, timeout: float = 30.0) -> bool:
    """Block until everything queued so far is written or has failed (tests, bench, shutdown)."""
    return _writer.drain(timeout=timeout)


def storage_writer_stop(*, timeout: float = 30.0) -> bool:
    """Drain, close the writer's database connection and end its thread; the next store restarts it."""
    return _writer.stop(timeout=timeout)


def storage_stats() -> dict[str, float]:
    """Counters since the process started: submitted, stored, failed, dropped, pending, batches, writer CPU."""
    s = _writer.stats
    with s.lock:
        return {"submitted": s.submitted, "stored": s.stored, "failed": s.failed, "dropped": s.dropped,
                "pending": _writer._pending, "batches": s.batches, "writer_cpu_s": s.writer_cpu_s}


atexit.register(storage_writer_stop, timeout=5.0)
