"""The quality bench's records: each item answered through the service's own engine into one record per
question (its branches, priors and cost), the settings that rescore them, and a run saved as JSON lines
(resumed only by the same code and model).

A record keeps every option order's label log-probs and content-free prior, so any setting (one order or
all, with or without a prior) is computed afterwards from one run that asked them all (`setting_apply`):
the run is the slow part, and the figures (`bench/quality_scores.py`) are recomputed from it at will.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from api.systemone.examples import README_REQUEST
from api.systemone.parsing import Limits, systemone_request_parse
from api.systemone.render import answer_render
from bench.datasets import Item
from inference.gguf import BUNDLED
from inference.questions import Option, Question
from inference.runner import Evaluator, evaluation_run
from inference.scoring import BranchScore, probabilities_compute
from inference.tuning import tuning_uniform
from serving.config import OpenJevConfig
from serving.evaluator import evaluator_build

DEFAULT_SETTING = "debiased"

RESUMED_KEYS = ("model", "backend", "cue", "permutations", "seed", "code")
"""What a saved run must share with the command that extends it."""

ROOT = Path(__file__).resolve().parent.parent

CODE_FILES = (
    "inference/prompts.py",
    "inference/prompt_text.py",
    "inference/prompt_tokens.py",
    "inference/labels.py",
    "inference/questions.py",
    "inference/debias.py",
    "inference/scoring.py",
    "inference/chat_template.py",
    "inference/runner.py",
    "inference/requests.py",
    "serving/evaluator.py",
    "api/systemone/parsing.py",
    "api/checking/checker.py",
    "bench/datasets.py",
)
"""The source files that decide what a saved item holds: the items and their questions, the prompt, the
labels, the priors and the log-probs read. `inference/tuning.py` is not one: the bench asks every item
debiased in all its orders at temperature 1 and applies settings when it scores, so a tuning it wrote
and the service then loaded does not make its own saved run stale."""

BACKEND_FILES: dict[str, tuple[str, ...]] = {
    "local": ("inference/backends/llamacpp.py", "inference/backends/llamacpp_tokenizer.py"),
    "sglang": ("inference/backends/sglang.py",),
}

META_DEFAULTS = {"backend": "local"}
"""What a run saved before the key existed meant by leaving it out."""

PRIDE_ITEMS = 10
"""Items whose permuted answers estimate a task's label-position prior (PriDe): a few, as in the paper."""


@dataclass(frozen=True)
class Cost:
    """What one item's evaluation took, split so the cost of a setting that needs fewer backend calls
    (one option order, no prior) can be estimated from a run that made them all."""

    fixed_s: float
    """Preparing the plan and the warm-up (the prefix prefill): paid whatever the setting."""
    calls_s: float
    """Every branch and content-free prior the item asked."""
    branches: int
    priors: int
    """Content-free priors measured (0 once a repeated question's prior is cached)."""


@dataclass(frozen=True)
class Record:
    """One answered question of the bench: enough to recompute its answer under any setting."""

    task: str
    item: int
    """The item's position in its task's seeded order (`bench.datasets.sample_load`)."""
    question: Question
    branches: tuple[BranchScore, ...]
    label: int
    label_mass: float
    cost: Cost
    """The item's evaluation, shared by its questions."""


@dataclass(frozen=True)
class Setting:
    """A way of scoring the saved branches: which option orders and which prior."""

    name: str
    all_orders: bool
    prior: str
    """"none", "content-free" (the question asked of "N/A") or "pride" (from permuted answers)."""


SETTINGS = (
    Setting(name="raw", all_orders=False, prior="none"),
    Setting(name=DEFAULT_SETTING, all_orders=False, prior="content-free"),
    Setting(name="PriDe", all_orders=False, prior="pride"),
    Setting(name="raw ×k", all_orders=True, prior="none"),
    Setting(name="debiased ×k", all_orders=True, prior="content-free"),
)


def model_identity(*, config: OpenJevConfig) -> str:
    """The model file a run reads: a bundled model's sha256, a .gguf file's path, size and time, or on
    SGLang the served name and the tokenizer directory."""
    if config.backend == "sglang":
        return f"{config.served_model_name} tokenizer={config.tokenizer or config.model}"
    bundled = BUNDLED.get(config.local_model)
    if bundled is not None:
        return f"{bundled.name} sha256={bundled.sha256}"
    stat = Path(config.local_model).expanduser().stat()
    return f"{config.local_model} size={stat.st_size} mtime_ns={stat.st_mtime_ns}"


def code_version(*, config: OpenJevConfig, root: Path = ROOT) -> dict[str, str]:
    """What decides a saved item besides the run's settings: each of `CODE_FILES` and the backend's modules
    (sha256, 12 hex digits) and the model (`model_identity`)."""
    files = [*CODE_FILES, *BACKEND_FILES[config.backend]]
    version = {name: hashlib.sha256((root / name).read_bytes()).hexdigest()[:12] for name in files}
    return {**version, "model": model_identity(config=config)}


def resume_refusal(*, path: Path, saved: dict[str, Any], meta: dict[str, Any]) -> str | None:
    """Why the run saved in `path` (its first line `saved`) cannot be extended by this one (`meta`), if so."""
    if saved.get("code") is not None and saved["code"] != meta["code"]:
        changed = sorted(k for k in {*saved["code"], *meta["code"]} if saved["code"].get(k) != meta["code"].get(k))
        return (
            f"{path} was saved by other code or another model (changed since: {', '.join(changed)}): its items "
            "are not what this code answers; choose another --save file, or --load it to recompute its tables"
        )
    if any(saved.get(k) != meta[k] for k in RESUMED_KEYS):
        mismatched = {k: saved.get(k) for k in RESUMED_KEYS if saved.get(k) != meta[k]}
        return (
            f"{path} holds a run with {mismatched} (a run saved before the code was recorded has no 'code'), "
            f"not { ({k: meta[k] for k in mismatched}) }; choose another --save file"
        )
    return None


def item_dump(*, task: str, index: int, records: Sequence[Record]) -> dict[str, Any]:
    """One saved line: an item's questions with their branches, priors and the item's cost."""
    cost = records[0].cost
    return {
        "task": task,
        "item": index,
        "fixed_s": cost.fixed_s,
        "calls_s": cost.calls_s,
        "branches": cost.branches,
        "priors": cost.priors,
        "answers": [
            {
                "task": r.task,
                "label": r.label,
                "label_mass": r.label_mass,
                "question": {
                    "id": r.question.id,
                    "type": r.question.type,
                    "instructions": r.question.instructions,
                    "options": [[o.key, o.text] for o in r.question.options],
                },
                "branches": [[b.order, b.label_logprobs, b.prior_logprobs] for b in r.branches],
            }
            for r in records
        ],
    }


def _item_records(d: dict[str, Any]) -> list[Record]:
    cost = Cost(fixed_s=d["fixed_s"], calls_s=d["calls_s"], branches=d["branches"], priors=d["priors"])
    records = []
    for a in d["answers"]:
        q = a["question"]
        question = Question(
            id=q["id"],
            type=q["type"],
            instructions=q["instructions"],
            options=tuple(Option(key=k, text=t) for k, t in q["options"]),
        )
        branches = tuple(
            BranchScore(order=tuple(o), label_logprobs=tuple(lp), prior_logprobs=None if pr is None else tuple(pr))
            for o, lp, pr in a["branches"]
        )
        records.append(
            Record(
                task=a["task"],
                item=d["item"],
                question=question,
                branches=branches,
                label=a["label"],
                label_mass=a["label_mass"],
                cost=cost,
            )
        )
    return records


def records_load(path: Path) -> tuple[dict[str, Any], list[Record], set[tuple[str, int]]]:
    """(the run's settings, its records, the (task, position) of every item in it). A last line cut off
    by a run that was killed mid-write is dropped from the file, so appending goes on cleanly."""
    text = path.read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
        path.write_text(text, encoding="utf-8")
    lines = text.splitlines()
    meta, records, done = {**META_DEFAULTS, **json.loads(lines[0])}, [], set()
    for line in lines[1:]:
        d = json.loads(line)
        records += _item_records(d)
        done.add((d["task"], d["item"]))
    return meta, records, done


def _label_mass(branches: Sequence[BranchScore]) -> float:
    return min(1.0, statistics.fmean(math.fsum(math.exp(x) for x in b.label_logprobs) for b in branches))


def _position_logprior(records: Sequence[Record]) -> tuple[float, ...]:
    """PriDe's label-position prior: per record, the mean over its option orders of each position's
    renormalised log-prob (the options' own merit cancels across the orders), softmaxed; then the
    records' priors averaged."""
    priors = []
    for r in records:
        rows = [
            [math.log(max(p, 1e-300)) for p in probabilities_compute(logprobs=b.label_logprobs, temperature=1.0)]
            for b in r.branches
        ]
        priors.append(
            probabilities_compute(logprobs=[statistics.fmean(c) for c in zip(*rows, strict=True)], temperature=1.0)
        )
    return tuple(math.log(max(statistics.fmean(c), 1e-300)) for c in zip(*priors, strict=True))


def setting_apply(*, records: Sequence[Record], setting: Setting) -> list[Record]:
    """The records of one task as `setting` scores them. PriDe's prior for an item comes from the
    `PRIDE_ITEMS` items after it in the task's order (wrapping around), never from the item itself."""
    if setting.prior == "pride":
        n = len(records)
        others = [[records[(i + j) % n] for j in range(1, min(PRIDE_ITEMS, n - 1) + 1)] for i in range(n)]
        priors = [_position_logprior(o) if o else None for o in others]
        scored = [replace(r.branches[0], prior_logprobs=p) for r, p in zip(records, priors, strict=True)]
        return [replace(r, branches=(b,), label_mass=_label_mass([b])) for r, b in zip(records, scored, strict=True)]
    out = []
    for r in records:
        branches = r.branches if setting.all_orders else r.branches[:1]
        if setting.prior == "none":
            branches = tuple(replace(b, prior_logprobs=None) for b in branches)
        out.append(replace(r, branches=branches, label_mass=_label_mass(branches)))
    return out


def settings_for(records: Sequence[Record]) -> list[Setting]:
    """The settings a run's records can score: those with several orders need a run that asked them."""
    orders = max(len(r.branches) for r in records)
    return [
        replace(s, name=s.name.replace("×k", f"×{orders}"))
        for s in SETTINGS
        if orders > 1 or not (s.all_orders or s.prior == "pride")
    ]


def setting_records(*, records: Sequence[Record], setting: Setting) -> list[Record]:
    """Every task's records as `setting` scores them (PriDe's prior is per task)."""
    tasks = sorted({r.task for r in records})
    return [a for task in tasks for a in setting_apply(records=[r for r in records if r.task == task], setting=setting)]


LIMITS = Limits(max_questions=64, max_answers=255)


def evaluator_for(*, config: OpenJevConfig, threads: int | None) -> Evaluator:
    """The service's evaluator on the measured backend, at temperature 1 (fitted afterwards). On the
    embedded model, `threads` other than the served default (every core) is for a machine shared with
    other work, where one thread at the lowest priority is not held up waiting at each step for a
    second one that another process has the core of."""
    if config.backend == "sglang":
        evaluator = evaluator_build(config=config)  # the service's own backend and tokenizer
    else:
        from inference.backends.llamacpp import llamacpp_backend_create  # --load and the tests need no llama.cpp

        backend = llamacpp_backend_create(
            source=config.local_model, cache_dir=config.model_cache, n_ctx=config.local_context, threads=threads
        )
        evaluator = evaluator_build(config=config, backend=backend)
    # One evaluation at a time, however long the slowest one takes on a busy machine.
    return replace(
        evaluator,
        timeout=3600.0,
        scoring=replace(
            evaluator.scoring,
            tuning=tuning_uniform(temperature=1.0, debias=True, permutations=config.permutations or 1),
        ),
    )


async def item_run(*, evaluator: Evaluator, task: str, index: int, item: Item) -> list[Record]:
    """One item through the engine: a record per question, all sharing the item's cost."""
    request = systemone_request_parse(
        data={"model": "jev-latest", "state": item.state, "questions": item.questions},
        limits=LIMITS,
        models=frozenset({"jev-latest"}),
    )
    started = time.perf_counter()
    outcome = await evaluation_run(evaluator=evaluator, request=request.evaluation)
    seconds = time.perf_counter() - started
    branches = sum(len(a.branches) for a in outcome.answers)
    calls_s = outcome.timings.branches_ms / 1000.0
    cost = Cost(
        fixed_s=seconds - calls_s, calls_s=calls_s, branches=branches, priors=outcome.generations - 1 - branches
    )
    return [
        Record(
            task=task if len(item.questions) == 1 else f"{task}_{answer.question_id}",
            item=index,
            question=answer.question,
            branches=answer.branches,
            label=item.labels[answer.question_id],
            label_mass=answer.label_mass,
            cost=cost,
        )
        for answer in outcome.answers
    ]


async def items_run(
    *, evaluator: Evaluator, queue: Sequence[tuple[str, int, Item]], save: TextIO | None
) -> list[Record]:
    """Every queued item, each appended to `save` (flushed) as soon as it is answered."""
    records: list[Record] = []
    for done, (task, index, item) in enumerate(queue, 1):
        answered = await item_run(evaluator=evaluator, task=task, index=index, item=item)
        records += answered
        if save is not None:
            save.write(json.dumps(item_dump(task=task, index=index, records=answered)) + "\n")
            save.flush()
        print(f"\r{done}/{len(queue)} ({task} #{index})   ", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return records


async def readme_answers(*, evaluator: Evaluator) -> str:
    """The README's "Try it" request as the engine answers it (refund, team, anger)."""
    request = systemone_request_parse(data=README_REQUEST, limits=LIMITS, models=frozenset({README_REQUEST["model"]}))
    outcome = await evaluation_run(evaluator=evaluator, request=request.evaluation)
    return ", ".join(f"{a.question_id}: {answer_render(answer=a)}" for a in outcome.answers)


async def bench_items(
    *, evaluator: Evaluator, queue: Sequence[tuple[str, int, Item]], save: TextIO | None, model: str
) -> list[Record]:
    """The README example, then the queued items, in one event loop: an SGLang backend's client
    belongs to the loop it was made on, and is closed on it."""
    orders = evaluator.scoring.tuning.shapes["choice 3-5"].permutations  # the bench's uniform tuning: one count
    answers = await readme_answers(evaluator=evaluator)
    print(f"README example ({model}, debiased, {orders} option order(s), temperature 1): {answers}", flush=True)
    try:
        return await items_run(evaluator=evaluator, queue=queue, save=save)
    finally:
        closed = evaluator.backend.close()  # type: ignore[attr-defined]  # both engines have one; SGLang's awaits
        if inspect.isawaitable(closed):
            await closed
