"""Storage load test: evaluations at a concurrency above the admission limit, with storage on.

Checks that every response is 200 or 529 and that the stored rows match the responses one for one
(same count, same statuses, every answered request id present: nothing lost, nothing duplicated),
then prints what storage costs per evaluation: p50 latency with storage off and on (serially, where
the difference is the per-evaluation overhead, and under load) and the writer thread's CPU per row.

The real ASGI app runs under uvicorn on loopback against the fake SGLang, in this process (the
writer thread must be drained before counting). Standalone, it creates and drops its own test
database (SQLite file by default, or PostgreSQL):

    .venv/bin/python bench/load_storage.py [--evaluations 200] [--concurrency 32]
    OPENJEV_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python bench/load_storage.py

`tests/storage/test_load.py` runs a short form of `storage_load_check` in CI.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evaluations", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--serial", type=int, default=200, help="evaluations per serial phase (overhead)")
    parser.add_argument("--delay", type=float, default=0.005, help="fake backend delay per call under load (s)")
    parser.add_argument("--level", choices=("full", "metadata"), default="full")
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")
    import django

    django.setup()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per request would dominate the figures
    logging.getLogger("django.request").setLevel(logging.CRITICAL)  # Django logs every 529 as an unknown status
    from django.db import connection

    from audit.storage.writer import writer_stop
    from fake_sglang import FakeSGLang
    from serving.evaluator import evaluator_install
    from testbed.evaluators import fake_evaluator
    from testbed.live_server import LiveServer
    from testbed.storage_load import storage_load_check

    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        with FakeSGLang(served_model_name="Qwen/Qwen3.6-35B-A3B") as fake:
            evaluator_install(fake_evaluator(fake))
            with LiveServer() as server:
                report = storage_load_check(
                    url=server.url,
                    fake=fake,
                    evaluations=args.evaluations,
                    concurrency=args.concurrency,
                    serial=args.serial,
                    delay=args.delay,
                    level=args.level,
                )
            evaluator_install(None)
        writer_stop(timeout=30)
    finally:
        connection.close()
        connection.creation.destroy_test_db(old_name, verbosity=0)
    print(f"database: {connection.vendor}")
    for line in report.lines():
        print(line)
    problems = report.load.problems() + report.serial_full.problems() + report.load_off.problems()
    for problem in problems:
        print(f"FAIL: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
