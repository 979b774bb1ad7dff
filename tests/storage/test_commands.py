"""Retention (`prune_evaluations`), the key command's argument checks, and dashboard percentiles."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from audit.admin.dashboard import percentiles_compute, window_stats_compute
from audit.models import Evaluation, EvaluationAnswer
from tests.factories import evaluation_make

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_prune_deletes_only_evaluations_older_than_n_days_in_batches_with_their_answers():
    now = timezone.now()
    old = [evaluation_make(created_at=now - timedelta(days=40 + i)) for i in range(5)]
    kept = [evaluation_make(created_at=now - timedelta(days=i)) for i in range(3)]
    assert EvaluationAnswer.objects.count() == 8 * 3

    out = io.StringIO()
    call_command("prune_evaluations", "--days", "30", "--dry-run", stdout=out)
    assert "Would delete 5" in out.getvalue() and Evaluation.objects.count() == 8

    out = io.StringIO()
    call_command("prune_evaluations", "--days", "30", "--batch-size", "2", stdout=out)
    assert "Deleted 5" in out.getvalue()
    assert set(Evaluation.objects.values_list("request_id", flat=True)) == set(kept)
    assert not Evaluation.objects.filter(request_id__in=old).exists()
    assert EvaluationAnswer.objects.count() == 3 * 3  # answers went with their evaluations (ON DELETE CASCADE)


@pytest.mark.parametrize("args", [["--days", "-1"], ["--days", "1", "--batch-size", "0"]])
def test_prune_refuses_bad_arguments(args):
    with pytest.raises(CommandError):
        call_command("prune_evaluations", *args)


@pytest.mark.parametrize(
    "args",
    [
        ["--expires-in-days", "0"],
        ["--expires-at", "yesterday"],
        ["--expires-at", "2001-01-01T00:00:00Z"],
        ["--expires-in-days", "1", "--expires-at", "2999-01-01T00:00:00Z"],
    ],
)
def test_issue_command_refuses_bad_expiry(args):
    with pytest.raises(CommandError):
        call_command("issue_api_key", "name", *args, stdout=io.StringIO(), stderr=io.StringIO())


def test_percentiles_are_nearest_rank_on_every_database():
    for ms in range(100, 0, -1):
        evaluation_make(total_ms=float(ms))
    evaluation_make(status=529, total_ms=5000.0)  # failures are not latency samples
    answered = Evaluation.objects.filter(status_code=200)
    assert percentiles_compute(queryset=answered, field="total_ms") == {"p50": 50.0, "p90": 90.0, "p99": 99.0}
    assert percentiles_compute(queryset=answered.none(), field="total_ms") == {"p50": None, "p90": None, "p99": None}


def test_window_stats_count_outcomes_and_error_rates():
    now = timezone.now()
    for status in (200, 200, 200, 422, 529, 502):
        evaluation_make(status=status)
    evaluation_make(created_at=now - timedelta(days=3))
    day = window_stats_compute(title="day", since=now - timedelta(days=1))
    week = window_stats_compute(title="week", since=now - timedelta(days=7))
    assert (day.total, day.answered, day.invalid, day.overloaded, day.failed) == (6, 3, 1, 1, 1)
    assert day.error_rate == pytest.approx(0.5) and day.server_error_rate == pytest.approx(2 / 6)
    assert week.total == 7 and week.answered == 4
    assert {s["status_code"]: s["n"] for s in day.by_status} == {200: 3, 422: 1, 529: 1, 502: 1}
