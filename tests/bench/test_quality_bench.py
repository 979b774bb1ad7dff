"""The quality bench's own arithmetic: balanced samples, intervals, PriDe, save and resume.

The bench's figures decide served defaults, so a wrong interval or a prior that peeks at the item it
scores would mislead quietly; these run on synthetic records, without a model or the dataset wheel.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from bench.datasets import Item, items_balance
from bench.quality import (
    SETTINGS,
    Cost,
    Record,
    delta_bootstrap,
    item_dump,
    records_load,
    setting_apply,
    wilson_interval,
)
from inference.questions import Option, Question
from inference.scoring import BranchScore, answer_compute, label_argmax

COST = Cost(fixed_s=1.0, calls_s=2.0, branches=3, priors=3)
QUESTION = Question(id="answer", type="choice", instructions="Which?",
                    options=tuple(Option(key=k, text=k.lower()) for k in "ABC"))
ORDERS = ((0, 1, 2), (1, 2, 0), (2, 0, 1))


def _biased_record(*, item: int, label: int) -> Record:
    """A model that adds 2 to whatever stands first and 1 to the true option, in three cyclic orders."""
    branches = tuple(BranchScore(order=order, label_logprobs=tuple(
        2.0 * (position == 0) + 1.0 * (option == label) - 5.0 for position, option in enumerate(order)))
        for order in ORDERS)
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
        return sum(label_argmax(answer_compute(question=r.question, branches=r.branches, temperature=1.0,
                                               confidence="entropy").probabilities) == r.label
                   for r in setting_records)

    assert hits(setting_apply(records=records, setting=raw)) == 4  # only the items whose answer stands first
    scored = setting_apply(records=records, setting=pride)
    assert hits(scored) == 12
    assert all(len(r.branches) == 1 and r.branches[0].order == ORDERS[0] for r in scored)


def test_pride_never_estimates_an_items_prior_from_the_item_itself() -> None:
    records = [_biased_record(item=0, label=0), _biased_record(item=1, label=1)]
    odd = Record(task="t", item=1, question=QUESTION, label=1, label_mass=0.9, cost=COST,
                 branches=tuple(BranchScore(order=o, label_logprobs=(-9.0, -9.0, -0.1)) for o in ORDERS))
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
    lines = [json.dumps(meta), *(json.dumps(item_dump(task="t", index=i, records=[_biased_record(item=i, label=1)]))
                                 for i in range(2))]
    path.write_text("\n".join(lines) + "\n" + lines[-1][:40], encoding="utf-8")
    loaded_meta, records, done = records_load(path)
    assert loaded_meta == meta and done == {("t", 0), ("t", 1)}
    assert records[1] == _biased_record(item=1, label=1)
    assert path.read_text(encoding="utf-8").endswith("\n")
