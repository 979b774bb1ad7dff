"""What the metrics cost one evaluating request, in the process that serves it: the meter opened and closed, eight
phases recorded, the evaluation's questions, answers, label mass and tokens counted (`api/plumbing/metering.py`),
on the outcomes of a real R3 and R64 evaluation (the SGLang stand-in in this process). CPU of this thread per
request, best of 5 rounds; with prometheus_client's multiprocess files (as `serve --workers N` writes them) and in
memory (a single process).

    .venv/bin/python bench/metering.py                  # 20,000 requests per workload and mode
    .venv/bin/python bench/metering.py --requests 50000

Tracing's cost is the server's, measured by `bench/server.py --otel` against the same run without it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

CHILD = "--child"


def child(requests: int) -> None:
    """One mode (multiprocess files or memory, decided by the environment before prometheus_client is imported)."""
    import django

    django.setup()
    from api.plumbing.metering import meter_close, meter_evaluated, meter_open, phase_timed
    from api.systemone.parsing import systemone_request_parse
    from bench.workloads import WORKLOADS
    from fake_sglang import FakeSGLang
    from inference.runner import evaluation_run
    from testbed.evaluators import fake_evaluator

    with FakeSGLang(served_model_name="Qwen/Qwen3.6-35B-A3B") as fake:
        evaluator = fake_evaluator(fake)
        for name, body in WORKLOADS.items():
            parsed = systemone_request_parse(data=body, limits=_limits(), models=frozenset({"jev-latest"}))
            outcome = asyncio.run(evaluation_run(evaluator=evaluator, request=parsed.evaluation))
            questions = len(parsed.evaluation.questions)

            def one_request(outcome=outcome, questions=questions) -> None:  # type: ignore[no-untyped-def]
                with meter_open(api="systemone", route="/v1/systemone", name="POST /v1/systemone") as meter:
                    for phase in ("admission", "parse", "validate", "render", "store"):
                        with phase_timed(phase):
                            pass
                    meter_evaluated(
                        outcome=outcome,
                        requested_model="jev-latest",
                        served_model="Qwen/Qwen3.6-35B-A3B",
                        questions=questions,
                        refusal_below=0.0,
                    )
                    meter_close(meter=meter, status=200)

            best = min(_cpu(one_request, requests) for _ in range(5))
            print(f"{name}: {best * 1e6:.1f} µs per request", flush=True)


def _limits():  # type: ignore[no-untyped-def]
    from api.checking.limits import limits_configured

    return limits_configured()


def _cpu(work, requests: int) -> float:  # type: ignore[no-untyped-def]
    start = time.thread_time()
    for _ in range(requests):
        work()
    return (time.thread_time() - start) / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument(CHILD, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.requests)
        return
    for mode in ("multiprocess files (serve --workers N)", "in memory (one process)"):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with tempfile.TemporaryDirectory(prefix="openjev-metering-") as directory:
            if mode.startswith("multiprocess"):
                env["PROMETHEUS_MULTIPROC_DIR"] = directory
            else:
                env.pop("PROMETHEUS_MULTIPROC_DIR", None)
            print(f"-- metrics {mode}", flush=True)
            subprocess.run(
                [sys.executable, __file__, CHILD, "--requests", str(args.requests)], env=env, cwd=ROOT, check=True
            )


if __name__ == "__main__":
    main()
