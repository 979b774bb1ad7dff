"""A database made before `evaluations/` was split into `api/`, `audit/`, `calibration/` and `serving/`
needs no migration for the split: the models' app kept its label, so its tables, migration history and rows are
the new code's own, and only the migrations written since apply.

`data/presplit.sqlite3.gz` was written by the code of commit 1dd6f7d (`manage.py migrate`, then
`issue_api_key "before the split"` and one stored evaluation) and is read here by today's code in a
separate process, as an operator's upgrade would.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

from django.apps import apps

from serving.config import BASE_DIR

PRESPLIT = Path(__file__).parent / "data" / "presplit.sqlite3.gz"
MIGRATIONS_SINCE = (
    "evaluations.0011_apikey_limits_zero_pauses",
    "evaluations.0012_evaluation_api_google",
    "evaluations.0013_answer_option_texts",
    "evaluations.0014_evaluation_api_installed_formats",
)
"""Migrations written after the database above was made, in order: applying them is an ordinary upgrade."""


def _manage(*args: str, database: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"OPENJEV_DATABASE_URL": f"sqlite:///{database}"}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=120
    )


def test_a_database_migrated_before_the_split_needs_only_later_migrations_and_its_rows_read_back(tmp_path):
    database = tmp_path / "db.sqlite3"
    database.write_bytes(gzip.decompress(PRESPLIT.read_bytes()))

    plan = _manage("migrate", "--plan", "--no-input", database=database)
    assert plan.returncode == 0, plan.stderr
    assert [line.strip() for line in plan.stdout.splitlines() if line.startswith("evaluations.")] == list(
        MIGRATIONS_SINCE
    ), plan.stdout  # nothing for the split itself: only what later changes added
    applied = _manage("migrate", "--no-input", database=database)
    assert applied.returncode == 0, applied.stderr

    probe = (
        "from audit.models import ApiKey, Evaluation; "
        "e = Evaluation.objects.select_related('api_key').get(request_id='before-the-split'); "
        "print(e.api_key.name, e.served_model, e.api, ApiKey.objects.count())"
    )
    read = _manage("shell", "-c", probe, database=database)
    assert read.returncode == 0, read.stderr
    assert read.stdout.strip().splitlines()[-1] == "before the split Qwen/Qwen3-4B systemone 1"


def test_the_models_app_keeps_the_label_its_tables_and_admin_urls_are_named_by():
    config = apps.get_app_config("evaluations")
    assert config.name == "audit"
    assert {model._meta.db_table for model in config.get_models()} >= {
        "evaluations_evaluation",
        "evaluations_evaluationanswer",
        "evaluations_apikey",
        "evaluations_calibration",
    }
