"""POST /v1/systemone against the fake SGLang: the wire contract of SPEC section 2.1."""

from __future__ import annotations

import copy
import math

import pytest

from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from tests.api.helpers import answer_vector, assert_answers_expected, close, expected_probabilities, plan_for
from tests.conftest import README_REQUEST


async def test_readme_request_answers_all_three_types_with_the_documented_shape(api, fake):
    response = await api.post("/v1/systemone", json=README_REQUEST)
    assert response.status_code == 200, response.text
    body = response.json()
    assert list(body) == ["model", "answers", "usage"]
    assert body["model"] == "jev-latest"
    answers = body["answers"]
    assert list(answers) == ["refund", "team", "anger"]
    assert set(answers["refund"]) == {"type", "noul"} and 0 <= answers["refund"]["noul"] <= 1
    team = answers["team"]
    assert team["type"] == "choice" and list(team["probabilities"]) == ["Billing", "Technical", "Sales"]
    assert team["choice"] == max(team["probabilities"], key=team["probabilities"].get)
    assert math.isclose(sum(team["probabilities"].values()), 1.0)
    anger = answers["anger"]
    assert anger["legend"] == {"0": "Calm", "1": "Frustrated", "2": "Very angry"}
    assert list(anger["probabilities"]) == ["0", "1", "2"]
    assert anger["score"] == pytest.approx(sum(int(k) * p for k, p in anger["probabilities"].items()))
    assert 0 <= anger["confidence"] <= 1 and 0 <= team["confidence"] <= 1


async def test_answers_are_the_renormalised_label_logprobs_of_each_branch(api, fake):
    response = await api.post("/v1/systemone", json=README_REQUEST)
    expected = expected_probabilities(fake, README_REQUEST)
    assert list(expected) == list(README_REQUEST["questions"])
    assert_answers_expected(response.json()["answers"], expected)


async def test_usage_counts_backend_prompt_tokens_and_n_plus_one_outputs(api, fake):
    response = await api.post("/v1/systemone", json=README_REQUEST)
    usage = response.json()["usage"]
    plan = plan_for(README_REQUEST)
    assert usage == {"input_tokens": plan.input_tokens, "output_tokens": 4}


async def test_response_headers_report_request_id_model_tokens_and_timings(api, fake):
    response = await api.post("/v1/systemone", json=README_REQUEST)
    plan = plan_for(README_REQUEST)
    assert response.headers["x-typesafe-request-id"].startswith("req_")
    assert response.headers["x-openjev-model"] == "Qwen/Qwen3.6-35B-A3B"
    assert response.headers["x-openjev-prefix-tokens"] == str(len(plan.prefix.ids))
    # Every branch shares the warmed prefix, so each one hits the cache for at least the prefix.
    assert int(response.headers["x-openjev-cached-tokens"]) >= 3 * len(plan.prefix.ids)
    timing = response.headers["server-timing"]
    assert [part.split(";")[0] for part in timing.split(", ")] == ["prepare", "prefill", "branches"]
    assert response.headers["content-type"] == "application/json"


async def test_cached_tokens_header_is_omitted_when_the_backend_does_not_report_it(api, fake):
    fake.report_cached_tokens = False
    response = await api.post("/v1/systemone", json=README_REQUEST)
    assert response.status_code == 200
    assert "x-openjev-cached-tokens" not in response.headers


async def test_request_ids_are_fresh_per_request(api, fake):
    first = await api.post("/v1/systemone", json=README_REQUEST)
    second = await api.post("/v1/systemone", json=README_REQUEST)
    assert first.headers["x-typesafe-request-id"] != second.headers["x-typesafe-request-id"]


async def test_warm_up_finishes_strictly_before_any_branch_starts(api, fake, branch_mode):
    evaluator_install(fake_evaluator(fake, branch_mode=branch_mode))
    await api.post("/v1/systemone", json=README_REQUEST)
    warm, *branches = fake.requests
    plan = plan_for(README_REQUEST)
    assert warm["body"]["input_ids"] == list(plan.prefix.ids)
    assert warm["body"]["sampling_params"]["max_new_tokens"] == 1
    assert "token_ids_logprob" in warm["body"]
    assert branches and all(b["t_start"] >= warm["t_end"] for b in branches)
    assert len(fake.requests) == (2 if branch_mode == "batched" else 4)


async def test_both_branch_modes_give_identical_answers(api, fake):
    evaluator_install(fake_evaluator(fake, branch_mode="batched"))
    batched = (await api.post("/v1/systemone", json=README_REQUEST)).json()
    evaluator_install(fake_evaluator(fake, branch_mode="parallel"))
    parallel = (await api.post("/v1/systemone", json=README_REQUEST)).json()
    assert batched["answers"] == parallel["answers"]


async def test_question_ids_and_option_keys_round_trip_byte_for_byte(api, fake):
    body = {
        "model": "jev-latest",
        "state": "배송이 안 와요 😡",
        "questions": {
            "Q 🙂 ünï\u0301": {
                "type": "choice",
                "instructions": "유형?",
                "criteria": {"환불 요청": None, " spaced key ": "x"},
            },
            'x_y.z/\\"': {"type": "noul"},
        },
    }
    response = await api.post("/v1/systemone", json=body)
    answers = response.json()["answers"]
    assert list(answers) == list(body["questions"])
    assert list(answers["Q 🙂 ünï\u0301"]["probabilities"]) == ["환불 요청", " spaced key "]


async def test_answer_does_not_depend_on_question_id_other_questions_or_order(api, fake):
    base = (await api.post("/v1/systemone", json=README_REQUEST)).json()["answers"]
    renamed = copy.deepcopy(README_REQUEST)
    renamed["questions"] = {f"other-{k}": v for k, v in reversed(README_REQUEST["questions"].items())}
    renamed["questions"]["extra"] = {"type": "noul", "instructions": "Is it urgent?"}
    moved = (await api.post("/v1/systemone", json=renamed)).json()["answers"]
    assert list(base) == list(README_REQUEST["questions"])
    assert sorted(moved) == sorted([*(f"other-{qid}" for qid in base), "extra"])
    for qid, answer in base.items():
        assert answer_vector(answer) and close(answer_vector(answer), answer_vector(moved[f"other-{qid}"])), qid


@pytest.mark.parametrize("model", ["jev-latest", "jev-2025-01", "Qwen/Qwen3.6-35B-A3B"])
async def test_alias_any_jev_alias_and_public_id_are_accepted(api, fake, model, settings):
    settings.OPENJEV = settings.OPENJEV.__class__(**{**settings.OPENJEV.__dict__, "model": "Qwen/Qwen3.6-35B-A3B"})
    response = await api.post("/v1/systemone", json={**README_REQUEST, "model": model})
    assert response.status_code == 200
    assert response.json()["model"] == model
    assert list(response.json()["answers"]) == list(README_REQUEST["questions"])


async def test_unknown_top_level_fields_are_ignored(api, fake):
    response = await api.post("/v1/systemone", json={**README_REQUEST, "x_trace_id": "t", "seed": 7, "x_nonce": "n"})
    assert response.status_code == 200
    assert list(response.json()["answers"]) == list(README_REQUEST["questions"])


async def test_structured_state_chat_transcript_and_structured_text_are_accepted(api, fake):
    states = [
        {"ticket": 1, "text": "refund"},
        ["a", 1],
        [{"role": "system", "content": "desk"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        {"messages": [{"role": "user", "content": "hi"}]},
    ]
    for state in states:
        body = {
            "model": "jev-latest",
            "state": state,
            "questions": {
                "n": {"type": "noul", "instructions": {"ask": "refund?"}, "criteria": {"true": ["yes"], "false": None}},
                "c": {"type": "choice", "instructions": ["pick"], "criteria": {"a": {"d": 1}, "b": ["x"]}},
                "s": {"type": "score", "criteria": [{"level": "low"}, ["mid"], "high"]},
            },
        }
        response = await api.post("/v1/systemone", json=body)
        assert response.status_code == 200, (state, response.text)
        answers = response.json()["answers"]
        assert list(answers) == ["n", "c", "s"], state
        assert [len(answers[q]["probabilities"]) for q in ("c", "s")] == [2, 3], state


async def test_choice_with_maximum_options_is_answered(api, fake):
    criteria = {f"opt {i}": None for i in range(255)}
    body = {"model": "jev-latest", "state": "s", "questions": {"q": {"type": "choice", "criteria": criteria}}}
    response = await api.post("/v1/systemone", json=body)
    assert response.status_code == 200
    assert list(response.json()["answers"]["q"]["probabilities"]) == list(criteria)


async def test_typesafe_confidence_setting_switches_the_formula(api, fake, settings):
    settings.OPENJEV = settings.OPENJEV.__class__(**{**settings.OPENJEV.__dict__, "confidence": "typesafe"})
    evaluator_install(fake_evaluator(fake, confidence="typesafe"))
    team = (await api.post("/v1/systemone", json=README_REQUEST)).json()["answers"]["team"]
    p = list(team["probabilities"].values())
    assert team["confidence"] == pytest.approx((3 * max(p) - 1) / 2)
