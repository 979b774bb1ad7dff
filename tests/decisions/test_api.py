"""`POST /v1/decisions` through the ASGI application on the SGLang stand-in: the same evaluation as System One,
every input kind the SDK can send, and OpenAI's error shape."""

from __future__ import annotations

import base64
import copy
from dataclasses import replace

import pytest

from api.checking.images import ImageLimits
from api.checking.limits import Limits
from api.decisions.parsing import decisions_request_parse
from inference.prompt_text import prompt_split
from testbed.images import png_bytes
from testbed.qwen3 import qwen3_tokenizer
from tests.conftest import README_REQUEST
from tests.decisions.helpers import PATH, assert_openai_error, decision_of, decision_with, question_with

PNG_URL = "data:image/png;base64," + base64.b64encode(png_bytes()).decode()
TOOL_INPUT = [
    {"type": "message", "role": "developer", "content": "You are the support assistant."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Is eu-west-1 down?"}]},
    {"type": "function_call", "call_id": "c1", "name": "status_lookup", "arguments": '{"region": "eu-west-1"}'},
    {"type": "function_call", "call_id": "c2", "name": "incidents", "arguments": "not json"},
    {"type": "function_call_output", "call_id": "c1", "output": "degraded"},
    {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "INC-7 open"}]},
    {"type": "custom_tool_call", "call_id": "c3", "name": "grep", "input": "error 503"},
    {"type": "custom_tool_call_output", "call_id": "c3", "output": "3 matches"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "There is an incident."}]},
]


def _conversation_text(body: dict) -> str:
    """The shared prefix the model reads for `body`, as the Qwen3 chat template renders it."""
    request = decisions_request_parse(
        data=body,
        limits=Limits(max_questions=64, max_answers=255, max_levels=10, images=ImageLimits(4)),
        models=frozenset({"jev-latest"}),
    )
    return prompt_split(tokenizer=qwen3_tokenizer(), conversation=request.evaluation.conversation)[0]


async def test_the_same_questions_get_the_same_probabilities_as_on_systemone(api, fake):
    systemone = (await api.post("/v1/systemone", json=README_REQUEST)).json()["answers"]
    decision = decision_of(await api.post(PATH, json=decision_with()))
    refund, team, anger = decision.answers
    assert refund.type == "predicate" and refund.probability == systemone["refund"]["noul"]
    assert team.type == "choice" and team.choice == systemone["team"]["choice"]
    assert [p.probability for p in team.probabilities] == list(systemone["team"]["probabilities"].values())
    assert team.confidence == systemone["team"]["confidence"]
    assert anger.type == "score" and anger.score == systemone["anger"]["score"]
    assert [(p.value, p.label, p.probability) for p in anger.probabilities] == [
        (int(i), systemone["anger"]["legend"][i], p) for i, p in systemone["anger"]["probabilities"].items()
    ]


async def test_answers_come_in_question_order_with_their_names_and_usage(api, fake):
    questions = [question_with(name="b"), question_with("choice"), question_with("score", name="a")]
    response = await api.post(PATH, json=decision_with(questions=questions))
    decision = decision_of(response)
    assert [(a.type, a.name) for a in decision.answers] == [("predicate", "b"), ("choice", None), ("score", "a")]
    assert decision.model == "jev-latest"
    usage = decision.usage
    assert usage.output_tokens == 4 and usage.total_tokens == usage.input_tokens + 4
    assert usage.input_tokens_details.cached_tokens == int(response.headers["x-openjev-cached-tokens"])
    assert response.headers["x-request-id"] == response.headers["x-typesafe-request-id"]
    assert float(response.headers["x-openjev-label-mass"]) > 0


async def test_a_string_and_a_boolean_with_the_same_text_are_different_choices(api, fake):
    choices = [{"value": "true"}, {"value": True}, {"value": False, "description": "Not at all"}]
    decision = decision_of(
        await api.post(PATH, json=decision_with(questions=[question_with("choice", choices=choices)]))
    )
    (answer,) = decision.answers
    assert answer.type == "choice"
    assert [p.value for p in answer.probabilities] == ["true", True, False]
    assert [type(p.value) for p in answer.probabilities] == [str, bool, bool]
    assert answer.choice in ("true", True, False) and sum(p.probability for p in answer.probabilities) == pytest.approx(
        1
    )


async def test_messages_tool_calls_and_outputs_are_answered(api, fake):
    decision = decision_of(await api.post(PATH, json=decision_with(input=TOOL_INPUT)))
    assert len(decision.answers) == 3


def test_tool_turns_render_as_the_chat_template_renders_tool_use():
    text = _conversation_text(decision_with(input=TOOL_INPUT))
    assert text.index("You are the support assistant.") < text.index("Is eu-west-1 down?")
    # Both calls in one assistant turn; the JSON arguments as an object, the others as sent.
    assert '<tool_call>\n{"name": "status_lookup", "arguments": {"region": "eu-west-1"}}\n</tool_call>' in text
    assert '"name": "incidents", "arguments": not json' in text or '"arguments": "not json"' in text
    assert text.count("<|im_start|>assistant") >= 2
    assert "<tool_response>\ndegraded\n</tool_response>" in text and "INC-7 open" in text
    assert '"name": "grep"' in text and "3 matches" in text and "There is an incident." in text


def test_a_developer_message_reads_as_a_system_message():
    developer = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    system = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert _conversation_text(decision_with(input=developer)) == _conversation_text(decision_with(input=system))


async def test_json_parts_read_as_the_compact_json_system_one_shows(api, fake):
    data = {"order": 1234, "note": "naïve café", "items": [{"sku": "A-1", "qty": 2}]}
    parts = [{"type": "message", "role": "user", "content": [{"type": "input_json", "data": data}]}]
    as_parts = decision_of(await api.post(PATH, json=decision_with(input=parts)))
    as_state = (await api.post("/v1/systemone", json={**README_REQUEST, "state": data})).json()["answers"]
    first = as_parts.answers[0]
    assert first.type == "predicate" and first.probability == as_state["refund"]["noul"]
    assert '{"order":1234,"note":"naïve café","items":[{"sku":"A-1","qty":2}]}' in _conversation_text(
        decision_with(input=parts)
    )


async def test_instructions_as_text_and_json_parts_are_one_question(api, fake):
    parts = [{"type": "input_text", "text": "Is this a refund request?"}, {"type": "input_json", "data": {"k": 1}}]
    text = 'Is this a refund request?\n{"k":1}'
    by_parts = decision_of(await api.post(PATH, json=decision_with(questions=[question_with(instructions=parts)])))
    by_text = decision_of(await api.post(PATH, json=decision_with(questions=[question_with(instructions=text)])))
    (one,), (other,) = by_parts.answers, by_text.answers
    assert one.type == other.type == "predicate" and one.probability == other.probability


async def test_an_http_image_url_is_refused_without_being_fetched(api, fake, settings):
    settings.OPENJEV = replace(settings.OPENJEV, max_images=4)
    content = [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "https://example.com/cat.png"},
    ]
    response = await api.post(PATH, json=decision_with(input=[{"role": "user", "content": content}]))
    error = assert_openai_error(response, 400, code="image_url_not_supported", param="input[0].content[1].image_url")
    assert "data: URL" in error["message"]
    assert fake.generate_calls == 0


async def test_a_data_image_where_the_model_cannot_see_is_a_clear_400(api, fake):
    content = [{"type": "input_image", "image_url": PNG_URL}, {"type": "input_text", "text": "Describe it."}]
    response = await api.post(PATH, json=decision_with(input=[{"role": "user", "content": content}]))
    assert_openai_error(response, 400, code="images_not_supported", param="input[0].content[0].image_url")


async def test_an_image_in_question_instructions_where_the_deployment_takes_none_is_a_clear_400(api, fake):
    """tests/decisions/test_question_images.py has images in instructions where they are taken."""
    instructions = [{"type": "input_image", "image_url": PNG_URL}]
    response = await api.post(PATH, json=decision_with(questions=[question_with(instructions=instructions)]))
    assert_openai_error(response, 400, code="images_not_supported", param="questions[0].instructions[0].image_url")


@pytest.mark.parametrize(
    ("change", "param", "code"),
    [
        (
            {"questions": [question_with("choice", choices=[{"value": "only"}])]},
            "questions[0].choices",
            "array_below_min_length",
        ),
        (
            {"questions": [question_with("choice", choices=[{"value": "a"}, {"value": "a"}])]},
            "questions[0].choices[1].value",
            "duplicate_value",
        ),
        (
            {"questions": [question_with("choice", choices=[{"value": 1}, {"value": "a"}])]},
            "questions[0].choices[0].value",
            "invalid_type",
        ),
        (
            {"questions": [question_with("score", levels=[{"label": str(i)} for i in range(11)])]},
            "questions[0].levels",
            "array_above_max_length",
        ),
        ({"questions": [question_with(type="boolean")]}, "questions[0].type", "invalid_value"),
        ({"questions": [question_with(type=["predicate"])]}, "questions[0].type", "invalid_value"),  # not a 500
        ({"questions": [question_with(criteria={"true": "x"})]}, "questions[0].criteria", "unknown_parameter"),
        ({"questions": [question_with()] * 401}, "questions", "array_above_max_length"),
        ({"questions": []}, "questions", "array_below_min_length"),
        ({"temperature": 0}, "temperature", "unknown_parameter"),
        (
            {"input": [{"type": "function_call_output", "call_id": "nope", "output": "x"}]},
            "input[0].call_id",
            "invalid_value",
        ),
        ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role", "invalid_value"),
        (
            {"input": [{"role": "system", "content": [{"type": "input_json", "data": {}}]}]},
            "input[0].content[0].type",
            "invalid_value",
        ),
        ({"input": []}, "input", "invalid_type"),
        ({"input": None}, "input", "invalid_type"),
        ({"safety_identifier": "u" * 65}, "safety_identifier", "string_above_max_length"),
        ({"prompt_cache_options": {"mode": "never"}}, "prompt_cache_options.mode", "invalid_value"),
    ],
)
async def test_invalid_requests_are_400s_that_name_the_field(api, fake, change, param, code):
    response = await api.post(PATH, json=decision_with(**change))
    assert_openai_error(response, 400, code=code, param=param)
    assert response.headers["x-should-retry"] == "false"
    assert fake.generate_calls == 0


async def test_every_problem_is_listed_and_the_first_is_named(api, fake):
    body = decision_with(model=None, questions=[question_with("choice", choices=[])], extra=1)
    error = assert_openai_error(await api.post(PATH, json=body), 400)
    assert error["param"] == "extra"
    assert "model" in error["message"] and "questions[0].choices" in error["message"]


async def test_a_budget_only_the_core_can_check_is_a_400_at_the_question(api, fake, evaluator):
    from inference.prompts import Budget
    from serving.evaluator import evaluator_install

    evaluator_install(replace(evaluator, budget=Budget(max_input_tokens=150, max_total_input_tokens=10_000)))
    long = question_with(name="long", instructions="Is it? " * 40)
    response = await api.post(PATH, json=decision_with(input="Hi", questions=[question_with(), long]))
    assert_openai_error(response, 400, param="questions[1]")


async def test_an_unknown_model_is_a_404_naming_the_model(api, fake):
    response = await api.post(PATH, json=decision_with(model="gpt-6-luna"))
    assert_openai_error(response, 404, code="model_not_found", param="model")


async def test_a_body_that_is_not_json_is_a_400(api, fake):
    response = await api.post(PATH, content=b'{"model": ', headers={"content-type": "application/json"})
    assert_openai_error(response, 400, code="invalid_json")


async def test_a_body_over_the_limit_is_a_413_in_openai_shape(api, fake, settings):
    body = decision_with(input="x" * (settings.OPENJEV.max_body_bytes + 10))
    assert_openai_error(await api.post(PATH, json=body), 413, code="request_too_large")


async def test_other_methods_and_a_missing_key_answer_in_openai_shape(api, fake, settings):
    assert_openai_error(await api.get(PATH), 405, code="method_not_allowed")
    settings.OPENJEV = replace(settings.OPENJEV, api_key="sk-test-123")
    response = await api.post(PATH, json=decision_with())
    assert_openai_error(response, 401, code="invalid_api_key")
    assert response.json()["error"]["type"] == "invalid_request_error"
    ok = await api.post(PATH, json=decision_with(), headers={"Authorization": "Bearer sk-test-123"})
    assert ok.status_code == 200


async def test_overload_is_retryable_and_says_when(api, fake, evaluator, monkeypatch):
    from inference.errors import Overloaded

    def full() -> None:
        raise Overloaded("16 evaluations are active (limit 16); retry shortly")

    monkeypatch.setattr(evaluator.gate, "admit", full)
    response = await api.post(PATH, json=decision_with())
    assert_openai_error(response, 529, code="overloaded")
    assert response.headers["x-should-retry"] == "true" and response.headers["retry-after"] == "1"


async def test_a_backend_that_is_down_is_retryable_and_a_deadline_is_not(api, fake, evaluator):
    fake.dead()
    response = await api.post(PATH, json=decision_with())
    assert_openai_error(response, 503, code="backend_unavailable")
    assert response.headers["x-should-retry"] == "true" and "retry-after" in response.headers
    fake.revive()
    from serving.evaluator import evaluator_install

    evaluator_install(replace(evaluator, timeout=0.05))
    fake.delay = 1.0
    response = await api.post(PATH, json=decision_with())
    assert_openai_error(response, 504, code="timeout")
    assert response.headers["x-should-retry"] == "false"


async def test_answers_under_the_refusal_label_mass_are_refusals_and_the_rest_answer(api, fake, settings):
    plain = decision_of(await api.post(PATH, json=decision_with()))
    settings.OPENJEV = replace(settings.OPENJEV, refusal_label_mass=0.1)
    response = await api.post(PATH, json=decision_with())
    decision = decision_of(response)
    masses = [float(x) for x in [response.headers["x-openjev-label-mass"]]]
    assert masses[0] < 0.1  # the stand-in's lowest answer is under the threshold
    kinds = [a.type for a in decision.answers]
    assert "refusal" in kinds and kinds != ["refusal"] * 3
    for before, after in zip(plain.answers, decision.answers, strict=True):
        assert after.type in ("refusal", before.type) and after.name == before.name


async def test_the_request_as_sent_is_not_changed_by_parsing(api, fake):
    body = decision_with(input=TOOL_INPUT)
    sent = copy.deepcopy(body)
    decision_of(await api.post(PATH, json=body))
    assert body == sent
