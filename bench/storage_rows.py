"""The storage writer's own work per evaluation, without the server around it: building the rows of a
stored evaluation (`evaluation_rows_build`) and inserting a batch of them (`rows_insert`), for R3 and R64
answered evaluations, in batches of 16 as the writer takes them under load.

Thread CPU per evaluation, best of five rounds, into a fresh test database (SQLite file by default;
`OPENJEV_DATABASE_URL` for PostgreSQL): steadier than the server benchmark on a shared machine, so it shows
what a change to row building or to the INSERTs saves.

    .venv/bin/python bench/storage_rows.py
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

import django  # noqa: E402

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from api.checking.limits import limits_configured  # noqa: E402
from api.plumbing.recording import received_of_body  # noqa: E402
from api.systemone.parsing import systemone_request_parse  # noqa: E402
from audit.storage.records import StoredEvaluation  # noqa: E402
from audit.storage.rows import evaluation_rows_build  # noqa: E402
from audit.storage.sql import rows_insert  # noqa: E402
from bench.workloads import WORKLOADS  # noqa: E402
from inference.runner import Outcome, Timings, Usage  # noqa: E402
from inference.scoring import BranchScore, answer_compute  # noqa: E402

ROUNDS, BATCHES, BATCH = 5, 10, 16


def records_make(*, name: str, count: int) -> list[StoredEvaluation]:
    """`count` answered evaluations of workload `name`, each with its own made-up label log-probabilities."""
    body = WORKLOADS[name]
    questions = systemone_request_parse(
        data=body, limits=limits_configured(), models=frozenset({body["model"]})
    ).evaluation.questions
    rng = random.Random(13)
    records = []
    for index in range(count):
        answers = tuple(
            answer_compute(
                question=q,
                branches=[
                    BranchScore(
                        order=tuple(range(len(q.options))),
                        label_logprobs=tuple(math.log(rng.uniform(0.01, 1.0) / len(q.options)) for _ in q.options),
                    )
                ],
                temperature=1.0,
                confidence="entropy",
            )
            for q in questions
        )
        outcome = Outcome(
            answers=answers,
            usage=Usage(600, len(answers)),
            prefix_tokens=580,
            cached_tokens=580,
            timings=Timings(prepare_ms=0.4, prefill_ms=3.0, branches_ms=5.0),
            generations=2,
        )
        records.append(
            StoredEvaluation(
                request_id=f"req_bench{name}{index:08d}",
                created_at=timezone.now(),
                level="full",
                caller=None,
                received=received_of_body(data=body, api="systemone", state="state", keyed=True),
                served_model=body["model"],
                backend="sglang",
                total_ms=9.0,
                outcome=outcome,
            )
        )
    return records


def writer_us(name: str) -> tuple[float, float]:
    """(build, insert) thread-CPU µs per evaluation, best round of `ROUNDS`, in batches of `BATCH`."""
    build, insert = [], []
    for _ in range(ROUNDS):
        records = records_make(name=name, count=BATCHES * BATCH)
        build_s = insert_s = 0.0
        for start in range(0, len(records), BATCH):
            began = time.thread_time()
            rows = [evaluation_rows_build(record=r) for r in records[start : start + BATCH]]
            built = time.thread_time()
            rows_insert(rows)
            build_s, insert_s = build_s + built - began, insert_s + time.thread_time() - built
        build.append(build_s / len(records) * 1e6)
        insert.append(insert_s / len(records) * 1e6)
        with transaction.atomic():  # the next round inserts into tables of the same size
            from audit.models import Evaluation

            Evaluation.objects.all().delete()
    return min(build), min(insert)


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        print(f"database: {connection.vendor}")
        for name in ("R3", "R64"):
            build, insert = writer_us(name)
            print(
                f"{name:4s} build {build:6.0f} µs  insert {insert:6.0f} µs  per evaluation "
                f"(thread CPU, best of {ROUNDS} x {BATCHES} batches of {BATCH})",
                flush=True,
            )
    finally:
        connection.close()
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
