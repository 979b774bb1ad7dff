"""Labelled dataset runs: every item through the service's own evaluation path, stored with its label.

`manage.py evaluate_dataset` reads the items (JSONL, or CSV with one question for all rows), checks
every one before any model work (a bad line is named, not discovered an hour in), then evaluates them
with `systemone_evaluate` - the same code `POST /v1/systemone` runs, on the configured engine - so
each item is stored as an ordinary evaluation. Each item's request id is `ds<run>_<index>`, so a
rerun of the same named run skips what is stored already (resume) and retries what failed.
"""

from __future__ import annotations

import asyncio
import csv
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from api.checking.limits import limits_configured
from api.errors import problems_text
from api.systemone.parsing import systemone_request_parse
from api.systemone.service import systemone_evaluate
from audit.models import DatasetRun, Evaluation, EvaluationAnswer
from audit.storage.writer import writer_drain
from calibration.labelled import label_key_of, label_rule, labelled_report
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


def item_request_id(*, run: DatasetRun, index: int) -> str:
    return f"ds{run.pk}_{index}"


def run_pending(*, run: DatasetRun, items: Sequence[DatasetItem]) -> list[int]:
    """Indices still to evaluate: those not stored as answered. Failed ones are deleted to be retried."""
    ids = {item_request_id(run=run, index=i): i for i in range(len(items))}
    stored = Evaluation.objects.filter(request_id__in=list(ids))
    done = set(stored.filter(status_code=200).values_list("request_id", flat=True))
    stored.exclude(status_code=200).delete()
    return [i for rid, i in ids.items() if rid not in done]


async def items_evaluate(
    *,
    run: DatasetRun,
    items: Sequence[DatasetItem],
    indices: Sequence[int],
    concurrency: int,
    progress: Callable[[bool], None],
) -> int:
    """Evaluate `indices` at most `concurrency` at a time; `progress(ok)` after each. Returns the failures."""
    gate = asyncio.Semaphore(concurrency)
    failures = 0

    async def one(index: int) -> None:
        nonlocal failures
        async with gate:
            try:
                await systemone_evaluate(
                    data=items[index].body, request_id=item_request_id(run=run, index=index), caller=None
                )
                progress(True)
            except Exception:  # stored as failed with its cause; the run goes on and a rerun retries it
                failures += 1
                progress(False)

    await asyncio.gather(*(one(i) for i in indices))
    return failures


def run_finish(*, run: DatasetRun, items: Sequence[DatasetItem]) -> dict[str, Any]:
    """Link the stored evaluations to the run, label their answers, and keep the run's metrics."""
    if not writer_drain(timeout=120):
        raise DatasetInvalid("the storage writer did not finish writing the evaluations in 120 s")
    now = timezone.now()
    with transaction.atomic():
        ids = [item_request_id(run=run, index=i) for i in range(len(items))]
        Evaluation.objects.filter(request_id__in=ids).update(dataset_run=run)
        for i, item in enumerate(items):
            EvaluationAnswer.objects.filter(evaluation__request_id=ids[i], question_id=QUESTION_ID).update(
                label=item.label, labelled_at=now
            )
        answers = EvaluationAnswer.objects.filter(evaluation__dataset_run=run, evaluation__status_code=200)
        run.metrics = labelled_report(answers=answers)
        run.item_count, run.finished_at = len(items), now
        run.save(update_fields=["metrics", "item_count", "finished_at"])
    return run.metrics
