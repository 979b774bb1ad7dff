"""`manage.py evaluate_dataset FILE`: run labelled items through the service and report how right it is.

    manage.py evaluate_dataset items.jsonl --name support-v1 [--concurrency 8] [--json]
    manage.py evaluate_dataset reviews.csv --question '{"type": "noul", "instructions": "Positive?"}'

JSONL: one `{"state", "question", "label"}` a line; CSV: `state,label` columns and `--question`. Items
go through the configured engine (SGLang or embedded) exactly as `POST /v1/systemone` runs them and are
stored under the named dataset run with their labels (the admin shows the run); rerunning the same name
resumes. Prints accuracy, log loss, Brier, ECE (10 bins), mean label mass and a confusion matrix.
"""

from __future__ import annotations

import asyncio
import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from api.systemone.datasets import DatasetInvalid, dataset_items_read, items_evaluate, run_finish, run_pending
from audit.models import DatasetRun


class Command(BaseCommand):
    help = "Evaluate a labelled dataset (JSONL, or CSV with --question) and print its accuracy and calibration."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--name", help="The dataset run's name (default: the file name); a known run resumes.")
        parser.add_argument("--question", help="CSV only: the question object every row is asked, as JSON.")
        parser.add_argument("--concurrency", type=int, default=4, help="Items evaluated at once (default 4).")
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
        pending = run_pending(run=run, items=items)
        with tqdm(total=len(items), initial=len(items) - len(pending), unit="item", disable=options["json"]) as bar:
            failures = asyncio.run(
                items_evaluate(
                    run=run,
                    items=items,
                    indices=pending,
                    concurrency=options["concurrency"],
                    progress=lambda _: bar.update(),
                )
            )
        try:
            metrics = run_finish(run=run, items=items)
        except DatasetInvalid as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps({"run": run.name, "items": len(items), "failed": failures, **metrics}))
            return
        self._print(run=run, metrics=metrics, items=len(items), failures=failures)

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
