"""`manage.py evaluate_dataset FILE`: run labelled items through the service and report how right it is.

    manage.py evaluate_dataset items.jsonl --name support-v1 [--concurrency 8] [--json]
    manage.py evaluate_dataset reviews.csv --question '{"type": "noul", "instructions": "Positive?"}'

JSONL: one `{"state", "question", "label"}` a line; CSV: `state,label` columns and `--question`. The run is
a labelled batch of `POST /v1/systemone` lines (`api.systemone.dataset_runs`): answered on the configured engine
(SGLang or embedded) exactly as that route answers them, by this process and by any batch worker running
(`--concurrency` lines at once here), stored under the named dataset run with their labels (the admin shows the
run and its batch); rerunning the same name resumes. Prints accuracy, log loss, Brier, ECE (10 bins), mean label
mass and a confusion matrix.
"""

from __future__ import annotations

import json
import sys
import threading
from argparse import ArgumentParser
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections
from django.test.utils import override_settings

from api.batches.jobs import batch_worked_here
from api.batches.waiting import batch_waited
from api.plumbing.api_error import ApiError
from api.systemone.dataset_runs import run_batches_started, run_finish, run_unfinished
from api.systemone.datasets import DatasetInvalid, dataset_items_read
from audit.models import DatasetRun
from batches.files import FileRefused
from batches.models import Batch


class Command(BaseCommand):
    help = "Evaluate a labelled dataset (JSONL, or CSV with --question) and print its accuracy and calibration."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--name", help="The dataset run's name (default: the file name); a known run resumes.")
        parser.add_argument("--question", help="CSV only: the question object every row is asked, as JSON.")
        parser.add_argument("--concurrency", type=int, default=4, help="Items evaluated at once here (default 4).")
        parser.add_argument("--json", action="store_true", help="Print the metrics as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        if settings.OPENJEV.store_evaluations == "off":
            raise CommandError("OPENJEV_STORE_EVALUATIONS=off: a dataset run is kept as stored evaluations")
        if not 1 <= options["concurrency"] <= settings.OPENJEV.max_concurrent_requests:
            raise CommandError(
                f"--concurrency must be from 1 to OPENJEV_MAX_CONCURRENT_REQUESTS "
                f"({settings.OPENJEV.max_concurrent_requests}): more would be refused as overloaded"
            )
        try:
            question = None if options["question"] is None else json.loads(options["question"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--question is not JSON: {exc.msg}") from None
        if (question is None) == (path.suffix.lower() == ".csv"):
            raise CommandError("a CSV file needs --question; a JSONL file carries its questions")
        try:
            items = dataset_items_read(path=path, question=question)
        except (DatasetInvalid, OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{path}: {exc}") from None
        run, _ = DatasetRun.objects.get_or_create(name=options["name"] or path.name, defaults={"source": str(path)})
        here = replace(settings.OPENJEV, batch_concurrency=options["concurrency"])
        with override_settings(OPENJEV=here):
            for batch in run_unfinished(run=run):
                self._worked(batch=batch, options=options)
            try:
                started = run_batches_started(run=run, items=items)
            except (ApiError, FileRefused) as exc:
                raise CommandError(f"the run cannot start: {exc}") from None
            for batch in started:
                self._worked(batch=batch, options=options)
        metrics, failures = run_finish(run=run, items=items)
        if options["json"]:
            self.stdout.write(json.dumps({"run": run.name, "items": len(items), "failed": failures, **metrics}))
            return
        self._print(run=run, metrics=metrics, items=len(items), failures=failures)

    def _worked(self, *, batch: Batch, options: dict[str, Any]) -> None:
        """The batch's work done here (batch workers running may share it) under a bar of its lines."""
        failed: list[BaseException] = []

        def work() -> None:
            try:
                batch_worked_here(batch_id=batch.id)
            except BaseException as exc:  # shown to the shell once the bar stops
                failed.append(exc)
            finally:
                connections.close_all()

        working = threading.Thread(target=work, name=f"evaluate-{batch.id}", daemon=True)
        working.start()
        bar_file = options.get("stderr") or sys.stderr  # tqdm's own writes: Django's wrapper adds line ends
        batch_waited(batch_id=batch.id, disable=options["json"], working=working, file=bar_file)
        working.join()
        if failed:
            raise CommandError(f"{batch.id} stopped: {failed[0]} (rerun the same --name to resume)") from failed[0]

    def _print(self, *, run: DatasetRun, metrics: dict[str, Any], items: int, failures: int) -> None:
        def figure(name: str) -> str:
            value = metrics[name]
            return "n/a" if value is None else f"{value:.4f}"

        self.stdout.write(
            f"dataset run {run.name!r}: {metrics['n']} of {items} items answered"
            + (f", {failures} failed (rerun to retry)" if failures else "")
        )
        for name in ("accuracy", "log_loss", "brier", "ece", "label_mass"):
            self.stdout.write(f"  {name:<10} {figure(name)}")
        for question in metrics["questions"]:
            keys = question["option_keys"]
            width = max(8, *(len(k) for k in keys)) + 1
            self.stdout.write(
                f"confusion of {question['question_id']} ({question['type']}, {question['n']} items; "
                "rows: true, columns: answered)"
            )
            self.stdout.write(" " * width + "".join(k.rjust(width) for k in keys))
            for key, row in zip(keys, question["confusion"], strict=True):
                self.stdout.write(key.rjust(width) + "".join(str(c).rjust(width) for c in row))
