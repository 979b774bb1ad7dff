"""`manage.py evaluate_dataset` on the fake SGLang: items stored with labels under a run, metrics, resume."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from api.systemone.dataset_runs import run_batches_started
from api.systemone.datasets import dataset_items_read
from audit.models import DatasetRun, Evaluation, EvaluationAnswer
from batches.models import Batch, BatchItem
from tests.database import db

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TEAM = {
    "type": "choice",
    "instructions": "Which team should handle this ticket?",
    "criteria": {"billing": "Payments and refunds", "tech": "Bugs and outages", "sales": "Pricing"},
}
TICKETS = [
    "I was charged twice",
    "The app crashes on start",
    "How much is the pro plan?",
    "Refund my order",
    "Error 503 since noon",
    "Can I get a discount?",
    "Invoice is wrong",
    "Login page is blank",
]
LABELS = ["billing", "tech", "sales", "billing", "tech", "sales", "billing", "tech"]


def dataset_write(tmp_path: Path) -> Path:
    path = tmp_path / "tickets.jsonl"
    path.write_text(
        "".join(
            json.dumps({"state": t, "question": TEAM, "label": label}) + "\n"
            for t, label in zip(TICKETS, LABELS, strict=True)
        )
    )
    return path


def evaluate(*args: Any) -> dict[str, Any]:
    out = io.StringIO()
    call_command("evaluate_dataset", *map(str, args), "--json", stdout=out)
    return dict(json.loads(out.getvalue()))


def stored_answers(run: str) -> list[EvaluationAnswer]:
    return list(EvaluationAnswer.objects.filter(evaluation__dataset_run__name=run).order_by("evaluation__request_id"))


async def test_a_dataset_run_stores_labelled_evaluations_and_reports_their_metrics(api, fake, store, tmp_path):
    report = await db(lambda: evaluate(dataset_write(tmp_path), "--name", "tickets", "--concurrency", "3"))
    answers = await db(lambda: stored_answers("tickets"))

    assert report["run"] == "tickets" and report["items"] == 8 and report["failed"] == 0 and report["n"] == 8
    assert sorted(a.label or "" for a in answers) == sorted(LABELS)
    hits = [a.choice == a.label for a in answers]
    assert report["accuracy"] == sum(hits) / 8
    log_loss = -sum(math.log(a.probabilities[a.label]) for a in answers) / 8
    assert math.isclose(report["log_loss"], log_loss, rel_tol=1e-9)
    question = report["questions"][0]
    assert question["option_keys"] == ["billing", "tech", "sales"]
    assert sum(map(sum, question["confusion"])) == 8
    assert [sum(row) for row in question["confusion"]] == [3, 3, 2]  # rows are the true labels
    assert sum(question["confusion"][i][i] for i in range(3)) == sum(hits)
    assert await db(lambda: DatasetRun.objects.get(name="tickets").metrics) == {
        k: v for k, v in report.items() if k not in ("run", "items", "failed")
    }


async def test_rerunning_a_named_run_resumes_without_evaluating_again(api, fake, store, tmp_path):
    path = dataset_write(tmp_path)
    first = await db(lambda: evaluate(path, "--name", "again"))
    calls = fake.generate_calls
    second = await db(lambda: evaluate(path, "--name", "again"))

    assert first == second
    assert calls > 0 and fake.generate_calls == calls
    assert await db(Evaluation.objects.count) == 8


async def test_a_csv_dataset_asks_the_question_given_on_the_command_line(api, fake, store, tmp_path):
    path = tmp_path / "reviews.csv"
    path.write_text("state,label\nGreat product,true\nBroke after a day,false\nLove it,true\n")
    noul = json.dumps({"type": "noul", "instructions": "Is the review positive?"})
    report = await db(lambda: evaluate(path, "--question", noul))

    assert report["run"] == "reviews.csv" and report["n"] == 3
    assert await db(lambda: sorted(a.label or "" for a in stored_answers("reviews.csv"))) == ["false", "true", "true"]


async def test_a_label_that_is_not_an_option_stops_the_run_before_any_evaluation_naming_the_line(
    api, fake, store, tmp_path
):
    path = dataset_write(tmp_path)
    path.write_text(path.read_text() + json.dumps({"state": "x", "question": TEAM, "label": "legal"}) + "\n")

    with pytest.raises(CommandError, match=r"line 9: label 'legal' is not an option; use one of the option keys"):
        await db(lambda: evaluate(path))
    assert await db(Evaluation.objects.count) == 0


async def test_a_dataset_run_is_a_labelled_batch_whose_lines_are_its_stored_evaluations(api, fake, store, tmp_path):
    report = await db(lambda: evaluate(dataset_write(tmp_path), "--name", "tickets"))

    (batch,) = await db(lambda: list(Batch.objects.all()))
    assert batch.labelled and batch.metadata == {"dataset_run": "tickets"} and batch.endpoint == "/v1/systemone"
    assert (batch.status, batch.total, batch.completed, batch.failed) == ("completed", 8, 8, 0)
    lines = await db(lambda: list(BatchItem.objects.filter(batch=batch).order_by("line")))
    assert [line.label for line in lines] == LABELS
    linked = await db(
        lambda: dict(Evaluation.objects.filter(dataset_run__name="tickets").values_list("request_id", "pk"))
    )
    assert sorted(linked) == sorted(line.request_id for line in lines) and report["n"] == 8


async def test_a_run_stopped_before_its_batch_ended_resumes_that_batch(api, fake, store, tmp_path):
    """The command was killed after starting its batch: the rerun works that batch, and starts no other."""
    path = dataset_write(tmp_path)
    items = dataset_items_read(path=path)

    def started() -> str:
        run = DatasetRun.objects.create(name="killed", source=str(path))
        (batch,) = run_batches_started(run=run, items=items)
        return batch.id

    batch_id = await db(started)
    report = await db(lambda: evaluate(path, "--name", "killed"))
    assert report["n"] == 8 and report["failed"] == 0
    assert await db(lambda: list(Batch.objects.values_list("pk", "status"))) == [(batch_id, "completed")]


async def test_items_the_backend_failed_are_sent_again_by_a_rerun_in_a_new_batch(api, fake, store, tmp_path):
    path = dataset_write(tmp_path)
    fake.fail_status = 500
    failed = await db(lambda: evaluate(path, "--name", "retry"))
    assert failed["failed"] == 8 and failed["n"] == 0
    fake.fail_status = None
    retried = await db(lambda: evaluate(path, "--name", "retry"))
    assert retried["failed"] == 0 and retried["n"] == 8
    counts = await db(lambda: list(Batch.objects.order_by("created_at").values_list("completed", "failed")))
    assert counts == [(0, 8), (8, 0)]
