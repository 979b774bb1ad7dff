"""`manage.py calibrate`: fit a calibration from labelled stored answers, print its report, optionally activate it.

    manage.py calibrate --list                          question keys with labels, most labelled first
    manage.py calibrate --question-key KEY [--vector] [--activate]
    manage.py calibrate --classifier NAME [--vector] [--activate]
    manage.py calibrate --question-key KEY --keys oj_ab12cd34 --apply-to oj_ab12cd34   one tenant's labels, for it

A fit is stored inactive unless `--activate` is given, so its held-out report can be read (here or in
the admin) before serving uses it; the admin activates and deactivates too.
"""

from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from calibration.fitting import FitRefused, calibration_activate, calibration_fit_store, labelled_keys_list


def _labels(text: str) -> list[str]:
    """API key labels, comma-separated (an empty item: calls made without a key)."""
    return [label.strip() for label in text.split(",")]


class Command(BaseCommand):
    help = "Fit a per-question (or per-classifier) calibration from labelled answers and print its held-out report."

    def add_arguments(self, parser: ArgumentParser) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--question-key", help="The answers' question key (`--list` shows them).")
        target.add_argument("--classifier", help="A saved classifier's name.")
        target.add_argument("--list", action="store_true", help="List question keys that have labels.")
        parser.add_argument(
            "--vector", action="store_true", help="Fit per-option biases as well as the temperature (vector scaling)."
        )
        parser.add_argument("--activate", action="store_true", help="Serve it at once (replaces the active one).")
        parser.add_argument(
            "--min-labels", type=int, default=None, help="Override OPENJEV_CALIBRATION_MIN_LABELS for this fit."
        )
        parser.add_argument("--json", action="store_true", help="Print the stored calibration as JSON.")
        parser.add_argument(
            "--keys",
            type=_labels,
            default=None,
            help="Fit from these API keys' labels only: comma-separated labels (oj_<prefix>, env; "
            "'' for calls without a key). Default: every key's.",
        )
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument(
            "--apply-to",
            type=_labels,
            default=None,
            help="Serve it to these API keys' calls only (same form). Default: the keys whose labels it was fitted on.",
        )
        scope.add_argument(
            "--apply-to-all", action="store_true", help="Serve it to every caller, whoever gave the labels."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["list"]:
            for row in labelled_keys_list():
                self.stdout.write(f"{row['question_key']}  {row['type']:<6}  {row['labels']} labels")
            return
        try:
            calibration = calibration_fit_store(
                question_key=options["question_key"],
                classifier=options["classifier"],
                vector=options["vector"],
                min_labels=options["min_labels"],
                keys=options["keys"],
                applies_to=options["apply_to"],
                everyone=options["apply_to_all"],
            )
        except FitRefused as exc:
            raise CommandError(str(exc)) from None
        if options["activate"]:
            calibration_activate(calibration=calibration)
        report = calibration.report
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "id": calibration.pk,
                        "key": calibration.key,
                        "active": calibration.active,
                        "method": calibration.method,
                        "temperature": calibration.temperature,
                        "biases": calibration.biases,
                        "report": report,
                        "label_keys": calibration.label_keys,
                        "applies_to": calibration.applies_to,
                    }
                )
            )
            return
        self.stdout.write(
            f"calibration {calibration.pk} of {calibration.subject} ({calibration.method}): "
            f"T={calibration.temperature:.4g} biases={calibration.biases}"
        )
        self.stdout.write(
            f"labels {report['n']}: fitted on {report['n_fit']}, judged on {report['n_held_out']}; "
            f"by key: {calibration.label_keys}; applies to: {calibration.applies_to or 'every caller'}"
        )
        for name in ("log_loss", "brier", "ece", "accuracy"):
            self.stdout.write(f"  {name:<9} before {report['before'][name]:.4f}  after {report['after'][name]:.4f}")
        self.stdout.write(
            "active: serving uses it"
            if calibration.active
            else "inactive: activate it in the admin or rerun with --activate"
        )
