"""The quality bench's figures from its records: each setting's rows per task and shape (accuracy with a
Wilson interval, Brier, ECE, label mass, seconds per item), the paired comparison with the default, the
fitted calibrations and temperatures, and the tables they print as.

Temperatures are judged cross-validated per shape (`_cross_validated`), as the service serves one per shape.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.quality_records import DEFAULT_SETTING, SETTINGS, Record, Setting, setting_records, settings_for
from inference.calibration import Labelled, scored_at, temperature_fit
from inference.metrics import Scored, ece_if_calibrated, metrics_compute
from inference.questions import Shape
from inference.scoring import label_argmax
from inference.tuning import Tuning
from inference.vector_scaling import calibration_fit

FOLDS = 5

BOOTSTRAP_REPLICATES = 2000

Z95 = 1.959964


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
