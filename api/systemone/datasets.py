"""Labelled datasets as `manage.py evaluate_dataset` reads them: JSONL (`{"state", "question", "label"}` a line)
or CSV with one question for all rows, every item checked as `POST /v1/systemone` checks its body, and its label
against the question's options, before any model work (a bad line is named, not discovered an hour in). The run
itself is a labelled batch (`api.systemone.dataset_runs`).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from api.checking.limits import limits_configured
from api.plumbing.api_error import problems_text
from api.systemone.parsing import systemone_request_parse
from calibration.labelled import label_key_of, label_rule
from inference.errors import RequestInvalid

QUESTION_ID = "q"
"""The id each item's one question is asked under."""


class DatasetInvalid(Exception):
    """The file cannot be run as it is: every bad item, by line."""


@dataclass(frozen=True)
class DatasetItem:
    line: int
    body: dict[str, Any]
    """A `POST /v1/systemone` body: the item's state and its one question."""
    label: str
    """The true option's key."""


def _item_build(*, line: int, state: Any, question: Any, label: Any) -> DatasetItem:
    """One item checked as the API would check it, its label against the question's options."""
    body = {"model": settings.OPENJEV.model_alias, "state": state, "questions": {QUESTION_ID: question}}
    config = settings.OPENJEV
    try:
        request = systemone_request_parse(data=body, limits=limits_configured(), models=config.language_model_names)
    except RequestInvalid as exc:
        raise DatasetInvalid(f"line {line}: {problems_text(exc.problems)}") from None
    asked = request.evaluation.questions[0]
    keys = [o.key for o in asked.options]
    key = label_key_of(label=label, option_keys=keys)
    if key is None:
        raise DatasetInvalid(
            f"line {line}: label {label!r} is not an option; use "
            f"{label_rule(question_type=asked.type, option_keys=keys)}"
        )
    return DatasetItem(line=line, body=body, label=key)


def dataset_items_read(*, path: Path, question: Any = None) -> list[DatasetItem]:
    """JSONL (`{"state", "question", "label"}` a line) or, with `question`, CSV with `state,label` columns."""
    items, problems = [], []
    with path.open(encoding="utf-8", newline="") as handle:
        if question is not None:
            rows = [
                (n, {"state": r.get("state"), "question": question, "label": r.get("label")})
                for n, r in enumerate(csv.DictReader(handle), start=2)
            ]
        else:
            rows = []
            for n, text in enumerate(handle, start=1):
                if text.strip():
                    try:
                        rows.append((n, json.loads(text)))
                    except json.JSONDecodeError as exc:
                        problems.append(f"line {n}: not JSON ({exc.msg})")
    for n, row in rows:
        if not isinstance(row, dict) or not {"state", "question", "label"} <= row.keys():
            problems.append(f"line {n}: an item needs state, question and label")
            continue
        try:
            items.append(_item_build(line=n, state=row["state"], question=row["question"], label=row["label"]))
        except DatasetInvalid as exc:
            problems.append(str(exc))
    if problems:
        raise DatasetInvalid(
            "; ".join(problems[:20]) + (f"; and {len(problems) - 20} more" if len(problems) > 20 else "")
        )
    return items
