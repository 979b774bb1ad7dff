"""`manage.py batch`: batch jobs from a shell on the server, through what the Files and Batches routes run.

    manage.py batch create tickets.jsonl --endpoint /v1/decisions [--metadata project=routing] [--key oj_…] [--wait]
    manage.py batch status BATCH_ID [--wait] [--json]
    manage.py batch cancel BATCH_ID
    manage.py batch results BATCH_ID [--output answers.jsonl] [--errors errors.jsonl]

`create` stores the file and starts a batch over it as `files.create` and `batches.create` do: the same checks and
limits, under the key `--key` names (its limits; its callers see the batch), or the auth-off owner's without it.
The task engine's workers answer its lines (`manage.py serve` runs one; `manage.py batch_worker`; Celery). `--wait`
shows a bar until the batch ends. This is the operator's shell: any owner's batch is found by its id.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from argparse import ArgumentParser
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from api.batches.jobs import batch_started, upload_stored
from api.batches.owners import KEY_LABEL_PREFIX, caller_of_owner
from api.batches.requests import BATCH_ENDPOINTS, batch_asked
from api.batches.waiting import batch_text, batch_waited
from api.plumbing.api_error import ApiError
from audit.callers import Caller
from audit.models import ApiKey
from batches.files import FileRefused
from batches.lifecycle import WINDOWS, batch_cancel, batch_object
from batches.models import Batch, BatchFile
from batches.output import batch_lines

ENV_KEY = "env"
"""The owner label of a batch made with the environment's key (`OPENJEV_API_KEY`)."""


class Command(BaseCommand):
    help = "Create, watch, cancel and collect batch jobs (OpenAI's Batch API for decision lines) from a shell."

    def add_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="{create,status,cancel,results}")
        create = actions.add_parser("create", help="Upload a JSONL file of requests and start a batch over it.")
        create.add_argument("file", type=Path, help='JSONL: {"custom_id", "method": "POST", "url", "body"} a line.')
        create.add_argument("--endpoint", required=True, choices=BATCH_ENDPOINTS, help="The route of every line.")
        create.add_argument("--metadata", action="append", default=[], metavar="KEY=VALUE", help="Repeatable.")
        create.add_argument("--key", default="", help="The owner key's label (oj_…, or env); default: none.")
        create.add_argument("--window", default="24h", choices=list(WINDOWS), help="The completion window.")
        status = actions.add_parser("status", help="Show a batch's progress.")
        status.add_argument("batch_id")
        for watched in (create, status):
            watched.add_argument("--wait", action="store_true", help="Show a progress bar until the batch ends.")
            watched.add_argument("--json", action="store_true", help="Print the batch as the API answers it.")
        actions.add_parser("cancel", help="Stop a batch: running lines finish, none starts.").add_argument("batch_id")
        results = actions.add_parser("results", help="Write a batch's output (and error) lines.")
        results.add_argument("batch_id")
        results.add_argument("--output", type=Path, help="Where the output lines go (default: standard output).")
        results.add_argument("--errors", type=Path, help="Where the error lines go (default: not written).")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        batch = self._created(options) if action == "create" else _batch_found(batch_id=options["batch_id"])
        if action == "cancel":
            batch = batch_cancel(batch=batch)
        if action == "results":
            self._results_written(batch=batch, output=options["output"], errors=options["errors"])
            return
        if options.get("wait"):
            bar_file = options.get("stderr") or sys.stderr  # tqdm's own writes: Django's wrapper adds line ends
            batch = batch_waited(batch_id=batch.id, disable=options["json"], hint=self.stderr.write, file=bar_file)
        self._shown(batch=batch, as_json=options.get("json", False))

    def _created(self, options: dict[str, Any]) -> Batch:
        path: Path = options["file"]
        caller = _caller_of_key(label=options["key"])
        body = {
            "input_file_id": "-",  # checked before the upload is stored; the stored file's id replaces it
            "endpoint": options["endpoint"],
            "completion_window": options["window"],
            "metadata": _metadata_of(pairs=options["metadata"]),
        }
        try:
            asked = batch_asked(data=body)
            with path.open("rb") as source:
                stored = upload_stored(source=source, filename=path.name, owner=caller.label if caller else "")
            return batch_started(caller=caller, asked=dataclasses.replace(asked, input_file_id=stored.id))
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror or exc}") from None
        except FileRefused as exc:
            raise CommandError(f"{path}: {exc}") from None
        except ApiError as exc:
            raise CommandError(exc.message) from None

    def _shown(self, *, batch: Batch, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps(batch_object(batch=batch)))
            return
        for line in batch_text(batch=batch):
            self.stdout.write(line)

    def _results_written(self, *, batch: Batch, output: Path | None, errors: Path | None) -> None:
        """The output lines (to `output`, or standard output) and the error lines (to `errors`, if named), as the
        batch's files hold them; a batch still running gives what is answered so far, and says so."""
        if batch.status not in Batch.ENDED:
            self.stderr.write(f"{batch.id} is {batch.status.replace('_', ' ')}: these are the lines answered so far")
        for kind, path in ((BatchFile.OUTPUT, output), (BatchFile.ERROR, errors)):
            if path is None and kind == BatchFile.ERROR:
                continue
            lines = batch_lines(batch_id=batch.id, kind=kind)
            try:
                count = _lines_written(lines=lines, path=path) if path else self._lines_shown(lines=lines)
            except OSError as exc:
                raise CommandError(f"{path}: {exc.strerror or exc}") from None
            self.stderr.write(f"{count} {kind} line(s) to {path or 'standard output'}")

    def _lines_shown(self, *, lines: Iterator[bytes]) -> int:
        count = 0
        for line in lines:
            self.stdout.write(line.decode(), ending="")
            count += 1
        return count


def _lines_written(*, lines: Iterator[bytes], path: Path) -> int:
    count = 0
    with path.open("wb") as target:
        for line in lines:
            target.write(line)
            count += 1
    return count


def _batch_found(*, batch_id: str) -> Batch:
    found = Batch.objects.filter(pk=batch_id[:64]).first()
    if found is None:
        raise CommandError(f"no batch {batch_id[:64]!r}")
    return found


def _caller_of_key(*, label: str) -> Caller | None:
    """The caller a batch made from the shell runs as: an issued key by its label, the environment's key, or none."""
    if not label:
        return None
    issued = (
        label.startswith(KEY_LABEL_PREFIX)
        and ApiKey.objects.filter(prefix=label.removeprefix(KEY_LABEL_PREFIX)).exists()
    )
    if not issued and label != ENV_KEY:
        raise CommandError(f"--key {label[:40]!r} is no issued key's label (oj_…, as the admin lists them) nor env")
    return caller_of_owner(owner=label)


def _metadata_of(*, pairs: list[str]) -> dict[str, str] | None:
    metadata = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CommandError(f"--metadata {pair[:40]!r} is not KEY=VALUE")
        metadata[key] = value
    return metadata or None
