"""Scoring per question shape and the tuning file: each shape gets its own temperature, debiasing and
option orders, and a file measured by the bench replaces the built-in values of the model it names.

A wrong shape lookup would serve one shape's settings to another without any error, and a tuning file
mistake must stop the start with the file and the field named, never be half applied."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from inference.backends.sglang import SGLangBackend
from inference.debias import Priors
from inference.prompt_text import content_free_prefix
from inference.prompts import Budget, plan_compile
from inference.questions import Question, Shape, question_build
from inference.requests import conversation_of_text
from inference.runner import plan_run
from inference.scoring import Scoring, answer_compute, probabilities_served
from inference.tuning import (
    TUNINGS,
    ShapeTuning,
    Tuning,
    TuningFileError,
    tuning_file_load,
    tuning_file_write,
    tuning_for,
    tuning_override,
    tuning_uniform,
)
from serving.config import BASE_DIR
from serving.config_reading import config_from_env
from serving.setting_rules import ConfigError
from testbed.qwen3 import qwen3_labels, qwen3_tokenizer

BUNDLED = "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF:q4_k_m"


def _choice(n: int) -> Question:
    return question_build(id=f"c{n}", type="choice", instructions="Which?", criteria={f"k{i}": None for i in range(n)})


def test_a_question_shape_follows_its_type_and_option_count() -> None:
    noul = question_build(id="n", type="noul", instructions="Is it?", criteria=None)
    score = question_build(id="s", type="score", instructions="How much?", criteria=["low", "mid", "high"])
    assert [noul.shape, score.shape] == ["noul", "score"]
    assert [_choice(n).shape for n in (2, 3, 5, 6, 255)] == [
        "choice 2",
        "choice 3-5",
        "choice 3-5",
        "choice 6+",
        "choice 6+",
    ]


def test_the_bundled_model_asks_three_to_five_options_in_three_orders_and_more_in_one() -> None:
    """Three orders were measured to help on 3-5 options; on 255 they would triple a long prompt's cost
    unmeasured (past the request timeout on the embedded engine)."""
    tuning = TUNINGS[BUNDLED]
    assert [tuning.of(_choice(n)).permutations for n in (2, 3, 5, 6, 255)] == [1, 3, 3, 1, 1]
    assert tuning.of(_choice(255)).debias and tuning.of(_choice(255)).temperature > tuning.of(_choice(5)).temperature


async def test_each_shape_is_scored_with_its_own_temperature_debiasing_and_option_orders(fake) -> None:
    shapes = dict(tuning_uniform(temperature=1.0, debias=False).shapes)
    shapes["choice 3-5"] = ShapeTuning(temperature=0.5, debias=True, permutations=3)
    scoring = Scoring(confidence="entropy", tuning=Tuning(shapes=shapes))
    noul = question_build(id="n", type="noul", instructions="Is it urgent?", criteria=None)
    plan = plan_compile(
        conversation=conversation_of_text(text="A ticket."),
        questions=[noul, _choice(3)],
        tokenizer=qwen3_tokenizer(),
        labels=qwen3_labels(),
        budget=Budget(32768, 262144),
        permutations=scoring.permutations,
    )
    assert [b.question.id for b in plan.branches] == ["n", "c3", "c3", "c3"]
    backend = SGLangBackend(url=fake.url, model="m", tokenizer=qwen3_tokenizer())
    outcome = await plan_run(
        plan=plan,
        backend=backend,
        scoring=scoring,
        timeout=30,
        priors=Priors(prefix_ids=content_free_prefix(tokenizer=qwen3_tokenizer())),
    )
    assert outcome.generations == 1 + 4 + 3  # the warm-up, four branches, the three choice orders' priors
    served_noul, served_choice = outcome.answers
    assert all(b.prior_logprobs is None for b in served_noul.branches)
    assert served_noul.probabilities == probabilities_served(served_noul.raw_probabilities)  # temperature 1, no prior
    assert all(b.prior_logprobs is not None for b in served_choice.branches)
    expected = answer_compute(
        question=served_choice.question, branches=served_choice.branches, temperature=0.5, confidence="entropy"
    )
    assert served_choice.probabilities == expected.probabilities


def test_explicit_settings_win_over_every_shape_of_a_tuning() -> None:
    tuned = tuning_override(tuning=TUNINGS[BUNDLED], temperature=2.0, debias=False, permutations=4)
    assert set(tuned.shapes.values()) == {ShapeTuning(temperature=2.0, debias=False, permutations=4)}
    assert tuning_override(tuning=TUNINGS[BUNDLED]) == TUNINGS[BUNDLED]


def test_a_written_tuning_file_loads_back_and_replaces_only_the_shapes_it_measured(tmp_path: Path) -> None:
    path = tmp_path / "tuning.json"
    measured: dict[Shape, ShapeTuning] = {
        "choice 3-5": ShapeTuning(temperature=0.3, debias=False, permutations=3),
        "noul": ShapeTuning(temperature=0.8, debias=True),
    }
    tuning_file_write(path=path, model=BUNDLED, shapes=measured, bench={"command": "bench/quality.py", "rows": []})
    loaded = tuning_file_load(path=path)
    assert loaded.model == BUNDLED and dict(loaded.shapes) == measured
    assert loaded.bench == {"command": "bench/quality.py", "rows": []}
    tuning = tuning_for(model=BUNDLED, file=loaded)
    assert tuning.shapes["choice 3-5"] == measured["choice 3-5"] and tuning.shapes["noul"] == measured["noul"]
    assert tuning.shapes["score"] == TUNINGS[BUNDLED].shapes["score"]
    assert tuning.shapes["choice 2"] == TUNINGS[BUNDLED].shapes["choice 2"]


def test_a_tuning_file_measured_on_another_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tuning.json"
    tuning_file_write(path=path, model="some/other-model", shapes={"noul": ShapeTuning(1.0, True)}, bench={})
    with pytest.raises(TuningFileError, match="field 'model' is 'some/other-model', but the served model is"):
        tuning_for(model=BUNDLED, file=tuning_file_load(path=path))


GOOD_SHAPE = {"temperature": 0.5, "debias": True, "permutations": 1}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{not json", "not JSON"),
        ([], "the file must be a JSON object"),
        ({"model": "m", "shapes": {"noul": GOOD_SHAPE}, "tuning": {}}, "unknown field 'tuning'"),
        ({"shapes": {"noul": GOOD_SHAPE}}, "field 'model' must be the served model's name"),
        ({"model": "m", "shapes": {}}, "field 'shapes' holds no shape"),
        ({"model": "m", "shapes": {"choice 3+": GOOD_SHAPE}}, "unknown field 'shapes.choice 3+'"),
        (
            {"model": "m", "shapes": {"noul": {"debias": True, "permutations": 1}}},
            "field 'shapes.noul.temperature' is missing",
        ),
        (
            {"model": "m", "shapes": {"noul": {**GOOD_SHAPE, "temperature": -1}}},
            "field 'shapes.noul.temperature' is -1, not a positive number",
        ),
        (
            {"model": "m", "shapes": {"noul": {**GOOD_SHAPE, "debias": "yes"}}},
            "field 'shapes.noul.debias' is 'yes', not true or false",
        ),
        (
            {"model": "m", "shapes": {"noul": {**GOOD_SHAPE, "permutations": True}}},
            "field 'shapes.noul.permutations' is True, not an integer from 1 to 16",
        ),
        ({"model": "m", "shapes": {"noul": {**GOOD_SHAPE, "temprature": 1}}}, "unknown field 'shapes.noul.temprature'"),
    ],
)
def test_a_bad_tuning_file_names_the_file_and_the_field(tmp_path: Path, body: Any, message: str) -> None:
    path = tmp_path / "tuning.json"
    path.write_text(body if isinstance(body, str) else json.dumps(body), encoding="utf-8")
    with pytest.raises(TuningFileError) as caught:
        tuning_file_load(path=path)
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)


def test_the_setting_loads_the_file_and_a_missing_one_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "tuning.json"
    tuning_file_write(path=path, model=BUNDLED, shapes={"noul": ShapeTuning(0.7, True)}, bench={})
    config = config_from_env({"OPENJEV_TUNING_FILE": str(path)})
    assert config.tuning_file is not None and config.tuning_file.shapes["noul"].temperature == 0.7
    with pytest.raises(ConfigError, match=f"OPENJEV_TUNING_FILE: {tmp_path / 'gone.json'}: cannot read it"):
        config_from_env({"OPENJEV_TUNING_FILE": str(tmp_path / "gone.json")})


def test_a_bad_tuning_file_stops_the_start_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps({"model": "m", "shapes": {"noul": {**GOOD_SHAPE, "temperature": 0}}}), encoding="utf-8")
    started = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "OPENJEV_TUNING_FILE": str(path)},
    )
    assert started.returncode == 1
    assert started.stderr.strip() == (
        f"OPENJEV_TUNING_FILE: {path}: field 'shapes.noul.temperature' is 0, not a positive number"
    )
