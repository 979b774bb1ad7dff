"""The admin's calibration pages (report, reliability charts, activation), dataset runs and answer labels."""

from __future__ import annotations

import json
import random

import pytest
from django.utils import timezone

from audit.models import Calibration, DatasetRun, EvaluationAnswer
from calibration.fitting import calibration_fit_store
from calibration.labelled import labelled_report
from tests.factories import evaluation_make, outcome_make

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TEAMS = ("Billing", "Technical", "Sales")


def labelled_team_answers(n: int) -> str:
    """`n` stored evaluations whose 'team' answer is sure of Billing, labelled Billing only half the time."""
    rng = random.Random(3)
    for _ in range(n):
        top = rng.uniform(0.8, 0.95)
        evaluation_make(outcome=outcome_make(team={"Billing": top, "Technical": (1 - top) / 2, "Sales": (1 - top) / 2}))
    for i, answer in enumerate(EvaluationAnswer.objects.filter(question_id="team")):
        answer.label = TEAMS[0] if i % 2 else TEAMS[1 + i % 4 // 2]
        answer.save(update_fields=["label"])
    return str(EvaluationAnswer.objects.filter(question_id="team").first().question_key)  # type: ignore[union-attr]


def test_a_calibration_page_shows_its_held_out_report_and_reliability_before_and_after(admin_client):
    calibration = calibration_fit_store(question_key=labelled_team_answers(20), min_labels=20)
    page = admin_client.get(f"/admin/evaluations/calibration/{calibration.pk}/change/").content.decode()

    report = calibration.report
    assert report["after"]["log_loss"] < report["before"]["log_loss"]  # half the "sure" answers were wrong
    assert "20 labels: fitted on 14, judged on 6 held out" in page
    assert f"{report['before']['ece']:.4f}" in page and f"{report['after']['ece']:.4f}" in page
    chart = json.loads(
        page.split(f'id="oj-reliability-{calibration.pk}" type="application/json">')[1].split("</script>")[0]
    )
    assert [s["label"] for s in chart["series"]] == ["before", "after"] and len(chart["x"]) == 10
    assert "vendor/uplot/1.6.32/uPlot.iife.min.js" in page and "openjev/reliability.js" in page


def test_activating_a_calibration_switches_off_the_previous_one_of_its_question(admin_client):
    key = labelled_team_answers(20)
    first = calibration_fit_store(question_key=key, min_labels=20)
    second = calibration_fit_store(question_key=key, vector=True, min_labels=20)
    changelist = "/admin/evaluations/calibration/"

    admin_client.post(changelist, {"action": "activate", "_selected_action": [first.pk]})
    admin_client.post(changelist, {"action": "activate", "_selected_action": [second.pk]})
    assert list(Calibration.objects.filter(active=True).values_list("pk", flat=True)) == [second.pk]
    admin_client.post(changelist, {"action": "deactivate", "_selected_action": [second.pk]})
    assert not Calibration.objects.filter(active=True).exists()


def test_a_dataset_run_page_shows_its_metrics_and_confusion_matrix(admin_client):
    labelled_team_answers(8)
    metrics = labelled_report(answers=EvaluationAnswer.objects.all())
    run = DatasetRun.objects.create(name="tickets", item_count=8, finished_at=timezone.now(), metrics=metrics)
    page = admin_client.get(f"/admin/evaluations/datasetrun/{run.pk}/change/").content.decode()

    assert f"{metrics['accuracy']:.4f}" in page and "true \\ answered" in page
    team = next(q for q in metrics["questions"] if q["question_id"] == "team")
    assert team["confusion"] == [[4, 0, 0], [2, 0, 0], [2, 0, 0]]  # every answer says Billing
    assert "<strong>4</strong>" in page


def test_an_answer_is_labelled_in_the_admin_with_one_of_its_own_options(admin_client):
    evaluation_make()
    answer = EvaluationAnswer.objects.get(question_id="team")
    url = f"/admin/evaluations/evaluationanswer/{answer.pk}/change/"

    refused = admin_client.post(url, {"label": "Marketing"})
    admin_client.post(url, {"label": "Sales"})
    answer.refresh_from_db()

    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    assert answer.label == "Sales" and answer.labelled_at is not None
    evaluation = admin_client.get(f"/admin/evaluations/evaluation/{answer.evaluation_id}/change/").content.decode()
    assert url in evaluation and "<strong>Sales</strong>" in evaluation
