"""`bench/quality.py --backend sglang --write-tuning` against the protocol-faithful SGLang stand-in: the
production model tuned with one command, and the file it writes served as it says.

The bench runs on three small synthetic tasks (one per measured shape) instead of the dataset wheel,
which tests never download; everything else is the command an operator runs: the service's own
SGLang backend and tokenizer directory, the saved run, the per-shape choice and the file."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.systemone.parsing import systemone_request_parse
from bench import quality
from bench.datasets import Item
from fake_sglang import FakeSGLang
from inference.prompts import option_orders
from inference.runner import Evaluator, evaluation_run
from inference.scoring import answer_compute
from inference.tuning import TuningFile, tuning_file_load
from serving.evaluator import evaluator_install
from testbed.evaluators import MODEL, url_evaluator
from testbed.qwen3 import qwen3_dir, qwen3_tokenizer

TEAMS = {"Billing": "Payments, invoices, refunds", "Technical": "Bugs, outages"}
TOPICS = {"Payments": None, "Bugs": None, "Pricing": None}


def _synthetic(*, task: str, n: int, seed: int) -> list[Item]:
    """A few items of each measured shape: a yes/no question, a 2-option and a 3-option choice."""
    questions: dict[str, dict[str, Any]] = {
        "yn": {"type": "noul", "instructions": "Does the customer ask for money back?"},
        "two": {"type": "choice", "instructions": "Which team should answer?", "criteria": TEAMS},
        "three": {"type": "choice", "instructions": "What is the ticket about?", "criteria": TOPICS},
    }
    options = {"yn": 2, "two": 2, "three": 3}[task]
    return [
        Item(
            state=f"Ticket {seed}-{i}: my invoice {i} was charged {i % 3 + 1} times.",
            questions={"answer": questions[task]},
            labels={"answer": i % options},
        )
        for i in range(n)
    ]


@dataclass(frozen=True)
class BenchRun:
    tuning: Path
    save: Path
    requests: list[Any]


@pytest.fixture(scope="module")
def bench_run(fake_server: FakeSGLang, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BenchRun]:
    """The operator's one command, run once for the module on the stand-in."""
    fake_server.reset()
    directory = tmp_path_factory.mktemp("bench")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(quality, "sample_load", _synthetic)
        quality.main(
            [
                "--backend",
                "sglang",
                "--url",
                fake_server.url,
                "--tokenizer",
                str(qwen3_dir()),
                "--tasks",
                "yn,two,three",
                "--n",
                "9",
                "--permutations",
                "2",
                "--save",
                str(directory / "run.jsonl"),
                "--write-tuning",
                str(directory / "tuning.json"),
            ]
        )
    yield BenchRun(tuning=directory / "tuning.json", save=directory / "run.jsonl", requests=list(fake_server.requests))


def test_the_bench_tunes_each_measured_shape_of_the_served_model_from_its_own_items(bench_run: BenchRun) -> None:
    tuning = tuning_file_load(path=bench_run.tuning)
    assert tuning.model == MODEL  # the service's name for the model on SGLang
    # No score task: the built-in values stay. No task of six options or more: the 3-5 setting, one order.
    assert set(tuning.shapes) == {"noul", "choice 2", "choice 3-5", "choice 6+"}
    meta, records, _ = quality.records_load(bench_run.save)
    assert meta["backend"] == "sglang" and len(records) == 27
    settings = {s.name: s for s in quality.settings_for(records)}
    chosen = dict(tuning.bench["chosen"])
    unmeasured = chosen.pop("choice 6+").removesuffix(" (choice 3-5's, one order)")
    assert not settings[unmeasured].all_orders and tuning.shapes["choice 6+"].permutations == 1
    measured = quality.setting_records(records=records, setting=settings[unmeasured])
    assert tuning.shapes["choice 6+"].temperature == pytest.approx(quality.shape_temperatures(measured)["choice 3-5"])
    assert tuning.shapes["choice 6+"].debias == tuning.shapes["choice 3-5"].debias
    for shape, name in chosen.items():
        measured = quality.setting_records(records=records, setting=settings[name])
        assert tuning.shapes[shape].temperature == pytest.approx(quality.shape_temperatures(measured)[shape])
        assert tuning.shapes[shape].debias == (name.startswith("debiased"))
    assert {r["task"] for r in tuning.bench["rows"]} >= {"yn", "two", "three", "all noul (1)"}
    assert "--backend sglang" in tuning.bench["command"]


def test_the_bench_reads_prompts_with_the_served_tokenizer(bench_run: BenchRun) -> None:
    batches = [
        r["body"]["input_ids"]
        for r in bench_run.requests
        if r["path"] == "/generate" and isinstance(r["body"]["input_ids"][0], list)
    ]
    assert batches, "the bench sent no batched branches"
    text = qwen3_tokenizer().decode(batches[-1][0])
    assert "Options:" in text and "Reply with the letter of the correct option only." in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "the served model's tokenizer directory"),
        (["--tokenizer", "/tokenizer", "--model", "qwen2.5-coder-1.5b"], "--model names a local model"),
    ],
)
def test_the_bench_refuses_sglang_without_a_local_tokenizer_or_with_a_local_model(
    monkeypatch: pytest.MonkeyPatch, extra: list[str], message: str
) -> None:
    monkeypatch.delenv("OPENJEV_TOKENIZER", raising=False)
    with pytest.raises(SystemExit, match=message):
        quality.main(["--backend", "sglang", "--url", "http://127.0.0.1:9", *extra])


async def _served(evaluator: Evaluator, body: dict[str, Any]) -> dict[str, Any]:
    """The answers `POST /v1/systemone` serves with `evaluator` installed."""
    from openjev_site.asgi import application

    evaluator_install(evaluator)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=application), base_url="http://t") as client:
            response = await client.post("/v1/systemone", json=body)
    finally:
        evaluator_install(None)
    assert response.status_code == 200, response.text
    return dict(response.json()["answers"])


def _probabilities(answer: dict[str, Any]) -> list[float]:
    return [answer["noul"], 1 - answer["noul"]] if answer["type"] == "noul" else list(answer["probabilities"].values())


async def test_served_answers_follow_the_tuning_file_shape_by_shape(bench_run: BenchRun, fake: FakeSGLang) -> None:
    tuning: TuningFile = tuning_file_load(path=bench_run.tuning)
    body = {
        "model": "jev-latest",
        "state": "I was charged twice for my March invoice.",
        "questions": {
            "refund": {"type": "noul", "instructions": "Does the customer ask for money back?"},
            "team": {"type": "choice", "instructions": "Which team should answer?", "criteria": TEAMS},
            "topic": {"type": "choice", "instructions": "What is the ticket about?", "criteria": TOPICS},
        },
    }
    untuned = await _served(url_evaluator(fake.url), body)  # a model never measured: T = 1, raw, one order
    tuned_evaluator = url_evaluator(fake.url, tuning_file=tuning)
    tuned = await _served(tuned_evaluator, body)
    request = systemone_request_parse(data=body, limits=quality.LIMITS, models=frozenset({"jev-latest"}))
    outcome = await evaluation_run(evaluator=tuned_evaluator, request=request.evaluation)
    for answer in outcome.answers:
        shape = tuning.shapes[answer.question.shape]
        orders = option_orders(count=len(answer.question.options), permutations=shape.permutations)
        assert [b.order for b in answer.branches] == list(orders)
        assert all((b.prior_logprobs is not None) == shape.debias for b in answer.branches)
        expected = answer_compute(
            question=answer.question,
            branches=answer.branches,
            temperature=shape.temperature,
            confidence=tuned_evaluator.scoring.confidence,
        )
        assert _probabilities(tuned[answer.question_id]) == pytest.approx(list(expected.probabilities))
        assert _probabilities(tuned[answer.question_id]) != pytest.approx(_probabilities(untuned[answer.question_id]))
