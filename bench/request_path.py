"""The request path's own Python, piece by piece, without the server, the network or the backend around it:
what one R3 or R64 evaluation costs the API process in each step it takes between reading the body and
writing the answer (the storage writer's rows are `bench/storage_rows.py`'s).

Steps: validate the body (`systemone_request_parse`), size its text (`request_characters`: whether to compile off the
event loop), compile the prompt (`plan_compile`, with the option orders the service asks on the SGLang
stand-in's model), write the batched `/generate` body, read SGLang's answer (JSON, then each item), score the
answers, render them as System One's JSON. The backend's answer is the SGLang stand-in's own (`fake_sglang`)
for the compiled prompts. The garbage collector is set up as `serve` sets it (`serving.collector`). Thread CPU
µs per evaluation, best of five rounds: steadier than the server
benchmark on a shared machine, so it shows what a change to one step saves.

    .venv/bin/python bench/request_path.py
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

import orjson  # noqa: E402

from api.checking.limits import limits_configured  # noqa: E402
from api.plumbing.json_render import body_encode  # noqa: E402
from api.systemone.parsing import systemone_request_parse  # noqa: E402
from api.systemone.render import served_render  # noqa: E402
from api.systemone.service import Served  # noqa: E402
from bench.workloads import WORKLOADS  # noqa: E402
from fake_sglang.answers import Overrides, completion  # noqa: E402
from fake_sglang.protocol import generate_parse  # noqa: E402
from inference.backends.base import BranchCall, Generation  # noqa: E402
from inference.backends.sglang_wire import call_ids_text, generation_parse, request_body, response_json_read  # noqa: E402
from inference.prompts import Budget, plan_compile  # noqa: E402
from inference.request_size import request_characters  # noqa: E402
from inference.runner import Outcome, Timings, Usage, answers_compute  # noqa: E402
from inference.scoring import Scoring  # noqa: E402
from inference.tuning import tuning_for  # noqa: E402
from serving.collector import collector_tune  # noqa: E402
from testbed.qwen3 import qwen3_labels, qwen3_tokenizer  # noqa: E402

ROUNDS, CALLS = 5, 100
MODEL = "Qwen/Qwen3.6-35B-A3B"
"""The model the SGLang stand-in serves in bench/server.py and bench/peer.py (its tuning decides the orders)."""


def best_us(step: Callable[[], Any]) -> float:
    """Thread CPU µs per call of `step`, best round of `ROUNDS` (after one that warms the caches)."""
    rounds = []
    for _ in range(ROUNDS + 1):
        start = time.thread_time()
        for _ in range(CALLS):
            step()
        rounds.append((time.thread_time() - start) / CALLS * 1e6)
    return min(rounds[1:])


def steps(name: str) -> dict[str, Callable[[], Any]]:
    """Each step of one evaluation of workload `name`, as a call that repeats it on the same inputs."""
    body = WORKLOADS[name]
    tokenizer, labels = qwen3_tokenizer(), qwen3_labels()
    scoring = Scoring(confidence="entropy", tuning=tuning_for(model=MODEL))
    budget = Budget(max_input_tokens=32768, max_total_input_tokens=10**7)

    def parse() -> Any:
        return systemone_request_parse(data=body, limits=limits_configured(), models=frozenset({body["model"]}))

    request = parse()

    def compile_() -> Any:
        return plan_compile(
            conversation=request.evaluation.conversation,
            questions=request.evaluation.questions,
            tokenizer=tokenizer,
            labels=labels,
            budget=budget,
            permutations=scoring.permutations,
        )

    plan = compile_()
    calls = [
        BranchCall(rid=f"r-{i}", prefix=plan.prefix, suffix=b.suffix_ids, label_ids=b.label_ids)
        for i, b in enumerate(plan.branches)
    ]

    def generate_body() -> str:
        ids_json = ",".join(f"[{call_ids_text(call=c)}]" for c in calls)
        union = list(dict.fromkeys(t for c in calls for t in c.label_ids))
        return request_body(rid=calls[0].rid, ids_json=f"[{ids_json}]", label_ids=union)

    items, _ = generate_parse(orjson.loads(generate_body()), 151936, 10**6)
    overrides = Overrides(vocab_size=151936, logprob_fn=None, clamped=frozenset(), report_cached_tokens=True)
    answer = orjson.dumps([completion(item, len(plan.prefix.ids), time.monotonic(), overrides) for item in items])

    def read() -> list[Generation]:
        results = response_json_read(answer)
        rid = calls[0].rid
        return [
            generation_parse(item, label_ids=call.label_ids, rid=f"{rid}_{i}")
            for i, (item, call) in enumerate(zip(results, calls, strict=True))
        ]

    generations = read()

    def score() -> Any:
        return answers_compute(plan=plan, generations=generations, priors=None, scoring=scoring)

    outcome = Outcome(
        answers=score(),
        usage=Usage(input_tokens=plan.input_tokens, output_tokens=len(request.evaluation.questions) + 1),
        prefix_tokens=len(plan.prefix.ids),
        cached_tokens=0,
        timings=Timings(prepare_ms=0.0, prefill_ms=0.0, branches_ms=0.0),
        generations=1 + len(generations),
    )
    served = Served(request_id="req_bench", request=request, model=MODEL, outcome=outcome)
    return {
        "parse": parse,
        "text size": lambda: request_characters(request=request.evaluation, limit=16_384),
        "compile": compile_,
        "/generate body": generate_body,
        "read answer": read,
        "score": score,
        "render": lambda: body_encode(body=served_render(served=served)),
    }


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    collector_tune()  # the garbage collector as `serve` sets it up
    for name in WORKLOADS:
        figures = {step: best_us(run) for step, run in steps(name).items()}
        listed = "  ".join(f"{step} {us:.0f}" for step, us in figures.items())
        print(
            f"{name:4s} {listed}  total {sum(figures.values()):.0f} µs per evaluation "
            f"(thread CPU, best of {ROUNDS} x {CALLS})",
            flush=True,
        )


if __name__ == "__main__":
    main()
