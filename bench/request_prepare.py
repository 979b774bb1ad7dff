"""Preparing one request on the event loop, without the server around it: validating the body into typed
questions (`systemone_request_parse`) and compiling the prompt (`plan_compile`: render, tokenize the
state, one suffix per question) for R3 and R64, with the bundled Qwen3 tokenizer and labels.

Thread CPU, best of five rounds: steadier than the server benchmark on a shared machine, so it shows
what the per-question caches save.

    .venv/bin/python bench/request_prepare.py
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

import django  # noqa: E402

django.setup()

from api.checking.limits import limits_configured  # noqa: E402
from api.decisions.parsing import decisions_request_parse  # noqa: E402
from api.decisions.service import decisions_limits  # noqa: E402
from api.systemone.parsing import systemone_request_parse  # noqa: E402
from bench.workloads import BODIES  # noqa: E402
from inference.prompts import Budget, plan_compile  # noqa: E402
from testbed.qwen3 import qwen3_labels, qwen3_tokenizer  # noqa: E402

ROUNDS, CALLS = 5, 200


PARSERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "systemone": lambda body: systemone_request_parse(
        data=body, limits=limits_configured(), models=frozenset({body["model"]})
    ),
    "decisions": lambda body: decisions_request_parse(
        data=body, limits=decisions_limits(), models=frozenset({body["model"]})
    ),
}


def prepare_us(body: dict[str, Any], *, api: str) -> tuple[float, float]:
    """(parse, compile) thread-CPU µs per request, best round of `ROUNDS`."""
    tokenizer, labels, parse_body = qwen3_tokenizer(), qwen3_labels(), PARSERS[api]
    budget = Budget(max_input_tokens=32768, max_total_input_tokens=10**7)
    parse, compile_ = [], []
    for round_ in range(ROUNDS + 1):
        parse_s = compile_s = 0.0
        for _ in range(CALLS):
            start = time.thread_time()
            request = parse_body(body)
            parsed = time.thread_time()
            plan_compile(
                conversation=request.evaluation.conversation,
                questions=request.evaluation.questions,
                tokenizer=tokenizer,
                labels=labels,
                budget=budget,
            )
            parse_s, compile_s = parse_s + parsed - start, compile_s + time.thread_time() - parsed
        if round_:  # the first round warms the caches
            parse.append(parse_s / CALLS * 1e6)
            compile_.append(compile_s / CALLS * 1e6)
    return min(parse), min(compile_)


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    for name in ("R3", "R64"):
        for api, bodies in BODIES.items():
            parse, compile_ = prepare_us(bodies[name], api=api)
            print(
                f"{api:9s} {name:4s} parse {parse:6.0f} µs  compile {compile_:6.0f} µs  per request "
                f"(thread CPU, best of {ROUNDS} x {CALLS})",
                flush=True,
            )


if __name__ == "__main__":
    main()
