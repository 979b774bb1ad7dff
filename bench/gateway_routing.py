"""Where the SGLang model gateway (smg, cache-aware, deploy/compose.yaml's command) places an
evaluation's requests, measured with two fake SGLang workers: the figures in docs/scale-out.md.

Per scenario and branch mode it prints how many evaluations ran every branch on their warm-up's worker
(the branches' `cached_tokens` cover the whole prefix) and how the warm-ups split over the workers.

    .venv/bin/python bench/gateway_routing.py [--evaluations 24]

Scenarios: distinct short states (the README ticket with a different first line each time) at the
default `--cache-threshold` (0.3) and at 0.01; one long shared system prompt (every state starts with
the same ~1,500 tokens) at 0.3 and at a threshold above its share; and which worker a batch goes to
when its items start with prefixes held by different workers.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fake_sglang import FakeSGLang  # noqa: E402
from inference.backends.sglang import SGLangBackend  # noqa: E402
from inference.prompts import Budget, Plan, plan_compile  # noqa: E402
from inference.questions import question_build  # noqa: E402
from inference.requests import conversation_of_text  # noqa: E402
from inference.runner import plan_run  # noqa: E402
from inference.scoring import Scoring  # noqa: E402
from inference.tuning import tuning_uniform  # noqa: E402
from testbed.qwen3 import qwen3_labels, qwen3_tokenizer  # noqa: E402
from testbed.smg import Gateway  # noqa: E402

QUESTIONS = [
    question_build(id="refund", type="noul", instructions="Is the customer asking for money back?", criteria=None),
    question_build(
        id="team",
        type="choice",
        instructions="Which team should handle this ticket?",
        criteria={"Billing": "Payments, invoices, refunds", "Technical": "Bugs, outages", "Sales": "Pricing, upgrades"},
    ),
    question_build(
        id="anger",
        type="score",
        instructions="How frustrated is the customer?",
        criteria=["Calm", "Frustrated", "Very angry"],
    ),
]
SYSTEM_PROMPT = " ".join(
    f"Support policy rule {i}: answer politely, cite the order number, never promise refunds "
    f"before billing confirms, escalate outages to on-call."
    for i in range(60)
)
SCORING = Scoring(confidence="entropy", tuning=tuning_uniform(temperature=1.0, debias=False))


def plan_of(state: str) -> Plan:
    return plan_compile(
        conversation=conversation_of_text(text=state),
        questions=QUESTIONS,
        tokenizer=qwen3_tokenizer(),
        labels=qwen3_labels(count=26),
        budget=Budget(32768, 262144),
    )


def state_of(i: int, *, shared: bool) -> str:
    ticket = f"Ticket {i}: my order #{1000 + i} arrived broken and I was charged twice. Fix it today!"
    return f"{SYSTEM_PROMPT}\n\n{ticket}" if shared else ticket


async def evaluations_place(
    *, gateway: Gateway, workers: list[FakeSGLang], mode: str, shared: bool, count: int
) -> tuple[int, Counter[int]]:
    """(evaluations whose branches all hit the warm-up's prefix in cache, warm-ups per worker)."""
    backend = SGLangBackend(url=gateway.url, model="m", tokenizer=qwen3_tokenizer(), branch_mode=mode)  # type: ignore[arg-type]
    together = 0
    split: Counter[int] = Counter()
    for i in range(count):
        plan = plan_of(state_of(i, shared=shared))
        before = [w.generate_calls for w in workers]
        outcome = await plan_run(plan=plan, backend=backend, scoring=SCORING, timeout=60)
        together += (outcome.cached_tokens or 0) >= len(plan.branches) * len(plan.prefix.ids)
        split[next(n for n, w in enumerate(workers) if w.generate_calls > before[n])] += 1
    await backend.close()
    return together, split


def first_item_routing(*, gateway: Gateway, workers: list[FakeSGLang]) -> str:
    """Warm one prefix on each worker, then send batches whose items start with each of them."""
    body = {
        "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
        "return_logprob": True,
        "token_ids_logprob": [32],
        "logprob_start_len": -1,
    }
    holders: dict[int, Plan] = {}
    for i in range(9000, 9100):  # new states go where the cache is emptiest: soon one lands on each worker
        plan = plan_of(state_of(i, shared=False))
        before = [w.generate_calls for w in workers]
        httpx.post(
            gateway.url + "/generate", json={**body, "input_ids": list(plan.prefix.ids), "rid": f"w{i}"}, timeout=30
        ).raise_for_status()
        holders.setdefault(next(n for n, w in enumerate(workers) if w.generate_calls > before[n]), plan)
        if len(holders) == len(workers):
            break
    lines = []
    for order in ((0, 1), (1, 0)):
        items = [list(holders[n].branch_ids(holders[n].branches[0])) for n in order]
        before = [w.generate_calls for w in workers]
        httpx.post(
            gateway.url + "/generate", json={**body, "input_ids": items, "rid": f"b{order[0]}"}, timeout=30
        ).raise_for_status()
        went = next(n for n, w in enumerate(workers) if w.generate_calls > before[n])
        lines.append(
            f"a batch whose first item continues worker {order[0]}'s prefix and second worker "
            f"{order[1]}'s went to worker {went}"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--evaluations", type=int, default=24)
    args = parser.parse_args()
    shared_plan = plan_of(state_of(0, shared=True))
    share = 1 - (len(shared_plan.prefix.ids) - len(plan_of(state_of(0, shared=False)).prefix.ids)) / len(
        shared_plan.prefix.ids
    )
    print(
        f"shared system prompt: warm-up {len(shared_plan.prefix.ids)} tokens, "
        f"~{1 - share:.0%} of it common to all traffic"
    )
    scenarios = [
        ("distinct states", False, None),
        ("distinct states", False, "0.01"),
        ("one shared system prompt", True, None),
        ("one shared system prompt", True, "0.97"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for title, shared, threshold in scenarios:
            for mode in ("batched", "parallel"):
                workers = [FakeSGLang(served_model_name="m").start() for _ in range(2)]
                flags = {"--cache-threshold": threshold} if threshold else {}
                with Gateway(workers=[w.url for w in workers], log_path=Path(tmp) / "smg.log", flags=flags) as gw:
                    together, split = await evaluations_place(
                        gateway=gw, workers=workers, mode=mode, shared=shared, count=args.evaluations
                    )
                    print(
                        f"{title:26} threshold {threshold or '0.3 (default)':13} {mode:8}: "
                        f"branches on the warm-up's worker {together}/{args.evaluations}, "
                        f"warm-ups per worker {split[0]}/{split[1]}"
                    )
                for worker in workers:
                    worker.stop()
        workers = [FakeSGLang(served_model_name="m").start() for _ in range(2)]
        with Gateway(workers=[w.url for w in workers], log_path=Path(tmp) / "smg.log") as gw:
            print(first_item_routing(gateway=gw, workers=workers))
        for worker in workers:
            worker.stop()


if __name__ == "__main__":
    asyncio.run(main())
