"""Embedded engine benchmark: prefix reuse against recomputing every branch, on a bundled model.

The spec's target is that 64 questions over a ~1,000-token state run at least 10x faster with the
warm-up's KV prefix reused than with every branch evaluated from scratch. Both modes use the same
engine, the same prompts and the same generations; only `prefix_reuse` differs.

The model is the served default (`OPENJEV_LOCAL_MODEL`'s, the 1.5B unless set; `--source` picks another),
read from the service's model cache, and each question is asked in the option orders the service asks it
in for that model (`inference/tuning.py`: on the 1.5B, three for a 4-option choice), so a figure is what
one evaluation of these questions costs as served once their content-free priors are cached (a question
seen for the first time also pays one prior branch per order, not measured here). The questions are
three yes/no questions to one 4-option choice (`questions_build`). The first lines printed name the
model, the date, the threads and that mix.

    .venv/bin/python bench/embedded.py [--counts 1 8 64] [--repeat 2] [--no-recompute] [--orders served|1]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inference.backends.base import BranchCall
from inference.backends.llamacpp import LlamaCppBackend, llamacpp_backend_create
from inference.labels import labels_build
from inference.prompt_text import prompt_ending
from inference.prompts import Budget, Plan, plan_compile
from inference.questions import Question, question_build
from inference.requests import Message, Role, conversation_of_text
from inference.tuning import tuning_for
from serving.config_reading import config_from_env

TURNS: tuple[tuple[Role, str], ...] = (
    (
        "user",
        "Hi, I ordered the X200 kettle three weeks ago (order 48213) and it still has not arrived. "
        "The tracking page has said 'in transit' since the 4th. Can you tell me what is going on?",
    ),
    (
        "assistant",
        "I'm sorry about the delay. I can see order 48213 left our warehouse on the 3rd. The carrier "
        "reports a sorting backlog in your region. I have opened a trace with them; they usually answer "
        "within two working days.",
    ),
    (
        "user",
        "Two more days? I needed it for my mother's birthday last weekend. This is the second time an "
        "order from you has been late, and last time the box was damaged too.",
    ),
    (
        "assistant",
        "I understand, and I apologise. I can refund the shipping cost right away, and if the trace "
        "shows the parcel is lost I will send a replacement by express delivery at no charge.",
    ),
    (
        "user",
        "Fine, refund the shipping. But if it is not here by Friday I want a full refund instead of a "
        "replacement, and I will probably not order again.",
    ),
)
QUESTION_TEXTS = (
    "Is the customer angry or frustrated?",
    "Has the order been delivered?",
    "Did the agent apologise?",
    "Does the customer ask for a refund?",
    "Is an order number mentioned?",
    "Is the product a kettle?",
    "Did the agent offer a replacement?",
    "Is the customer threatening to stop ordering?",
    "Does the conversation mention a birthday?",
    "Is the customer satisfied?",
    "Was a trace opened with the carrier?",
    "Is this the customer's first problem with the shop?",
    "Is a deadline given by the customer?",
    "Did the agent refuse to help?",
    "Is the conversation about a software bug?",
    "Is express delivery mentioned?",
)
CHOICE = {
    "delivery": "A late or lost delivery",
    "defect": "A broken or defective product",
    "billing": "A billing or payment problem",
    "other": "Something else",
}


def state_build(*, tokens: int, backend: LlamaCppBackend) -> tuple[Message, ...]:
    """A support transcript grown turn by turn until its rendered prefix reaches about `tokens` tokens."""
    messages = [Message(role="system", content="You are a support assistant for a home-goods shop.")]
    tokenizer = backend.tokenizer()
    while len(tokenizer.encode(tokenizer.render_chat([m.chat() for m in messages]))) < tokens:
        role, content = TURNS[(len(messages) - 1) % len(TURNS)]
        messages.append(Message(role=role, content=content))
    return tuple(messages)


def questions_build(*, count: int) -> list[Question]:
    """Three yes/no questions to one 4-option choice (every fourth question); wording varies so suffixes differ."""
    questions = []
    for i in range(count):
        if i % 4 == 3:
            questions.append(
                question_build(
                    id=f"q{i}", type="choice", instructions=f"({i}) What is the main issue?", criteria=CHOICE
                )
            )
        else:
            text = QUESTION_TEXTS[i % len(QUESTION_TEXTS)]
            questions.append(question_build(id=f"q{i}", type="noul", instructions=f"({i}) {text}", criteria=None))
    return questions


async def evaluate(*, backend: LlamaCppBackend, plan: Plan, tag: str) -> tuple[float, int]:
    """One evaluation as the runner does it: warm-up, then every branch; (seconds, cached tokens)."""
    started = time.perf_counter()
    await backend.warm(rid=f"{tag}-warm", prefix=plan.prefix)
    calls = [
        BranchCall(rid=f"{tag}-{i}", prefix=plan.prefix, suffix=b.suffix_ids, label_ids=b.label_ids)
        for i, b in enumerate(plan.branches)
    ]
    generations = await backend.score(calls=calls)
    return time.perf_counter() - started, sum(g.cached_tokens or 0 for g in generations)


def question_orders(*, model: str, orders: str) -> Callable[[Question], int]:
    """Option orders per question: as the service asks them of `model` (`served`), or one (`1`)."""
    tuning = tuning_for(model=model)
    return (lambda question: tuning.of(question).permutations) if orders == "served" else (lambda question: 1)


def question_mix(*, count: int, orders: Callable[[Question], int]) -> str:
    """`count` questions as `questions_build` makes them, in words, with the option orders each is asked in."""
    questions = questions_build(count=count)
    noul = [q for q in questions if q.type == "noul"]
    choices = [q for q in questions if q.type == "choice"]
    parts = [f"{len(noul)} yes/no"] + [f"{len(choices)} four-option choice"] * bool(choices)
    branches = sum(orders(q) for q in questions)
    each = {q.type: orders(q) for q in questions}
    asked = ", ".join(f"{kind} in {n} order{'s' * (n > 1)}" for kind, n in each.items())
    return f"{count}: {' + '.join(parts)} ({asked}; {branches} branch{'es' * (branches > 1)})"


def measure(*, backend: LlamaCppBackend, plan: Plan, reuse: bool, repeat: int, other: Plan) -> tuple[float, int]:
    """Median seconds per evaluation; each run starts after another state so the prefix is not already cached."""
    backend.prefix_reuse = reuse
    times, cached = [], 0
    for r in range(repeat):
        asyncio.run(backend.warm(rid="evict", prefix=other.prefix))
        seconds, cached = asyncio.run(evaluate(backend=backend, plan=plan, tag=f"run{r}"))
        times.append(seconds)
    return statistics.median(times), cached


def arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, its defaults the service's: the served model, from the service's model cache."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    config = config_from_env()
    parser.add_argument(
        "--source",
        default=config.local_model,
        help=f"a bundled model or a .gguf path (default: the served one, {config.local_model})",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=config.model_cache,
        help=f"where bundled models are assembled (default: the service's, {config.model_cache})",
    )
    parser.add_argument(
        "--orders",
        choices=("served", "1"),
        default="served",
        help="option orders per question: the served model's tuning (default), or one for every question",
    )
    parser.add_argument("--state-tokens", type=int, default=1000)
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--repeat", type=int, default=2, help="runs per figure with reuse (median)")
    parser.add_argument("--recompute-repeat", type=int, default=1, help="runs per figure without reuse")
    parser.add_argument("--no-recompute", action="store_true", help="skip the slow runs without prefix reuse")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--flash-attn", action="store_true")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = arguments(argv)

    started = time.perf_counter()
    backend = llamacpp_backend_create(
        source=args.source, cache_dir=args.cache_dir, n_ctx=8192, threads=args.threads, flash_attn=args.flash_attn
    )
    orders = question_orders(model=backend.model, orders=args.orders)
    print(
        f"model {backend.model}: ready in {time.perf_counter() - started:.2f}s (load {backend.load_seconds:.2f}s), "
        f"threads={args.threads or os.cpu_count()}, flash_attn={args.flash_attn}"
    )
    print(f"measured {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} cores")
    source = "as served (inference/tuning.py)" if args.orders == "served" else "one each (--orders 1)"
    print(f"questions, option orders {source}: " + "; ".join(question_mix(count=c, orders=orders) for c in args.counts))
    tokenizer = backend.tokenizer()
    labels = labels_build(tokenizer=tokenizer, count=255, ending=prompt_ending(tokenizer=tokenizer))
    budget = Budget(max_input_tokens=8192, max_total_input_tokens=1 << 20)
    state = state_build(tokens=args.state_tokens, backend=backend)
    other = plan_compile(
        conversation=conversation_of_text(text="An unrelated short state."),
        questions=questions_build(count=1),
        tokenizer=tokenizer,
        labels=labels,
        budget=budget,
    )
    print(
        f"{'questions':>9} {'branches':>8} {'prefix':>6} {'suffix':>6} {'mode':>9} {'s/eval':>8} {'s/question':>10} "
        f"{'cached':>7} {'speed-up':>8}"
    )
    for count in args.counts:
        plan = plan_compile(
            conversation=state,
            questions=questions_build(count=count),
            tokenizer=tokenizer,
            labels=labels,
            budget=budget,
            permutations=orders,
        )
        suffix = statistics.mean(len(b.suffix_ids) for b in plan.branches)
        head = f"{count:>9} {len(plan.branches):>8} {len(plan.prefix.ids):>6} {suffix:>6.0f}"
        reuse, cached = measure(backend=backend, plan=plan, reuse=True, repeat=args.repeat, other=other)
        print(f"{head} {'reuse':>9} {reuse:>8.3f} {reuse / count:>10.3f} {cached:>7}", flush=True)
        if args.no_recompute:
            continue
        full, cached = measure(backend=backend, plan=plan, reuse=False, repeat=args.recompute_repeat, other=other)
        print(
            f"{head} {'recompute':>9} {full:>8.3f} {full / count:>10.3f} {cached:>7} {full / reuse:>7.1f}x", flush=True
        )
    backend.close()


if __name__ == "__main__":
    main()
