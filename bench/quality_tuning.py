"""The tuning-file writer of the quality bench (`--write-tuning`, the file the service loads as
`OPENJEV_TUNING_FILE`): per measured shape, the servable setting that scored best; and what the service
serves the run's model with now, named as the bench's settings.

Apart from the run and the figures because this is the one part of the bench whose output changes what
the service serves: its rule (which settings are servable, how a tie and an unmeasured shape are decided)
stays small enough to read whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.quality_records import Record, settings_for
from inference.gguf import gguf_model_name
from inference.questions import SHAPES, Shape
from inference.tuning import ShapeTuning, Tuning, tuning_file_write, tuning_for


def served_tuning(*, meta: dict[str, Any]) -> Tuning:
    """The built-in tuning the service serves the run's model with (an SGLang run names the model as served)."""
    model = meta["model"] if meta.get("backend", "local") == "sglang" else gguf_model_name(source=meta["model"])
    return tuning_for(model=model)


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
