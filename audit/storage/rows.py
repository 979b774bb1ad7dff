"""A stored evaluation as column values: one evaluation row and one row per answer, plain dicts
(cheaper than model instances), at the record's storage level."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from audit.storage.records import StoredEvaluation
from audit.storage.scrub import image_bytes_redact, text_storable
from inference.scoring import Answer
from inference.vector_scaling import question_key

ERROR_MESSAGE_MAX = 4000
QUESTION_ID_MAX = 500
CHOICE_MAX = 255
FAILED_JSON_MAX = 64 * 1024
"""Characters of JSON a failed request keeps of its state and of its questions (each), and of its
validation problems: a 2 MiB body refused in a millisecond must not cost 2 MiB of database per try."""
TRUNCATED_KEY = "openjev_truncated"

Row = tuple[dict[str, Any], list[dict[str, Any]]]
"""(evaluation, answers) as attname -> value, before insert."""


def evaluation_rows_build(*, record: StoredEvaluation) -> Row:
    """Column values for one stored evaluation."""
    full = record.level == "full"
    answers = record.outcome.answers if record.outcome else ()
    return evaluation_row_build(record=record, full=full), [
        answer_row_build(answer=answer, position=position, full=full, refusal_below=record.received.refusal_below)
        for position, answer in enumerate(answers)
    ]


def evaluation_row_build(*, record: StoredEvaluation, full: bool) -> dict[str, Any]:
    """The evaluation's own row: who asked, what was served, how it went, and the request at level `full`."""
    received, outcome, failure = record.received, record.outcome, record.failure
    caller = record.caller
    classifier = received.classifier
    return {
        "request_id": record.request_id,
        "created_at": record.created_at,
        "api_key_id": caller.key_id if caller else None,
        "api_key_label": caller.label if caller else "",
        "requested_model": received.requested_model[:200],
        "served_model": record.served_model[:200],
        "backend": record.backend[:32],
        "status_code": record.status,
        "error_type": failure.error_type[:64] if failure else "",
        "error_message": failure.message[:ERROR_MESSAGE_MAX] if failure else "",
        "error_detail": _failed_json_capped(failure.detail) if failure else None,
        "question_count": min(received.question_count, 32767),
        "question_types": ",".join(received.question_types),
        "input_tokens": outcome.usage.input_tokens if outcome else None,
        "output_tokens": outcome.usage.output_tokens if outcome else None,
        "prefix_tokens": outcome.prefix_tokens if outcome else None,
        "cached_tokens": outcome.cached_tokens if outcome else None,
        "prepare_ms": outcome.timings.prepare_ms if outcome else None,
        "prefill_ms": outcome.timings.prefill_ms if outcome else None,
        "branches_ms": outcome.timings.branches_ms if outcome else None,
        "total_ms": record.total_ms,
        "classifier_id": classifier.id if classifier else None,
        "classifier_name": classifier.name[:100] if classifier else "",
        "store_level": record.level,
        "api": received.api,
        "safety_identifier": received.safety_identifier[:64],
        "prompt_cache_key": received.prompt_cache_key[:256],
        "image_count": min(len(received.images), 32767),
        "images": [asdict(meta) for meta in received.images] or None,
        "state": _stored_json(received.state, full=full, failed=failure is not None),
        "questions": _stored_json(received.questions, full=full, failed=failure is not None),
        "dataset_run_id": None,
    }


def answer_row_build(*, answer: Answer, position: int, full: bool, refusal_below: float) -> dict[str, Any]:
    """One answer's row: its question, its probabilities as served and before calibration, and whether it counts
    as refused (its label mass under `refusal_below`)."""
    kind = answer.question.type
    keys = [o.key for o in answer.question.options]
    return {
        "position": position,
        "question_id": answer.question_id[:QUESTION_ID_MAX],
        "type": kind,
        "noul": answer.probabilities[0] if kind == "noul" else None,
        "choice": keys[answer.choice_index][:CHOICE_MAX] if kind == "choice" else None,
        "score": answer.score if kind == "score" else None,
        "confidence": answer.confidence,
        "probabilities": dict(zip(keys, answer.probabilities, strict=True)),
        "option_keys": keys,
        "option_texts": [o.text for o in answer.question.options] if full else None,
        "instructions": (answer.question.instructions or "") if full else "",
        "raw_probabilities": dict(zip(keys, answer.raw_probabilities, strict=True)),
        "label_mass": answer.label_mass,
        "refused": answer.label_mass < refusal_below,
        "question_key": question_key(question=answer.question),
        "uncalibrated_probabilities": (
            None if answer.uncalibrated is None else dict(zip(keys, answer.uncalibrated, strict=True))
        ),
        "calibration_id": answer.calibration,
        "label": None,
        "labelled_at": None,
    }


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
    """The request's JSON at level `full`, never with image bytes (a `data:` URL keeps its header)."""
    if not full:
        return None
    value = image_bytes_redact(value)
    return _failed_json_capped(value) if failed else value


def _scrub(value: Any) -> Any:
    """Text every database can store: NUL characters and lone surrogates as U+FFFD."""
    if isinstance(value, str):
        return text_storable(value)
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


def row_scrub(row: Row) -> Row:
    """The row with every text storable (a retry after the database refused it)."""
    evaluation, answers = row
    return _scrub(evaluation), [_scrub(a) for a in answers]
