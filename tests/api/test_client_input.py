"""Client input that JSON's grammar allows but no prompt, answer or database can hold: wherever it is in
the body, it gets a located 4xx in the spec's shape, never a 5xx, and nothing reaches the backend.

Bodies are sent as raw JSON text, the way a client's encoder writes them (`json.dumps` escapes a lone
surrogate as `\\ud800`; `1e400` is a valid JSON number).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.checking.json_body import NESTING_MAX, BodyNotJson, body_parse, document_problems
from api.plumbing.api_error import problems_render
from tests.api.helpers import NOUL, assert_validation, body_with

HIGH, LOW = "\ud800", "\udfff"
REPLACED = "\ufffd"

SURROGATES: dict[str, tuple[dict[str, Any], list[str | int]]] = {
    "question id": (body_with(questions={f"q{HIGH}": NOUL}), ["body", "questions", f"q{REPLACED}"]),
    "id of an invalid question": (
        body_with(questions={f"q{LOW}": {"type": "box"}}),
        ["body", "questions", f"q{REPLACED}"],
    ),
    "option key": (
        body_with(questions={"q": {"type": "choice", "criteria": {f"a{HIGH}": None, "b": None}}}),
        ["body", "questions", "q", "criteria", f"a{REPLACED}"],
    ),
    "option description": (
        body_with(questions={"q": {"type": "choice", "criteria": {"a": HIGH, "b": None}}}),
        ["body", "questions", "q", "criteria", "a"],
    ),
    "instructions": (
        body_with(questions={"q": {"type": "noul", "instructions": f"Refund{LOW}?"}}),
        ["body", "questions", "q", "instructions"],
    ),
    "state text": (body_with(state=f"I want my money back {HIGH}"), ["body", "state"]),
    "deep in a structured state": (
        body_with(state={"ticket": {"lines": ["ok", f"x{LOW}y"]}}),
        ["body", "state", "ticket", "lines", 1],
    ),
    "chat message": (body_with(state=[{"role": "user", "content": HIGH}]), ["body", "state", 0, "content"]),
    "model": (body_with(model=f"jev-{HIGH}"), ["body", "model"]),
    "a field nobody reads": (body_with(x_note=HIGH), ["body", "x_note"]),
}

OVERFLOWS: dict[str, tuple[str, list[str | int]]] = {
    "score level": (
        '{"model": "jev-latest", "state": "x", "questions": {"q": {"type": "score", '
        '"criteria": ["low", {"at": 1e400}]}}}',
        ["body", "questions", "q", "criteria", 1, "at"],
    ),
    "negative, in the state": (
        '{"model": "jev-latest", "state": {"t": -1e999}, "questions": {"q": {"type": "noul"}}}',
        ["body", "state", "t"],
    ),
    "no exponent": (
        '{"model": "jev-latest", "state": [' + "9" * 400 + '.0], "questions": {"q": {"type": "noul"}}}',
        ["body", "state", 0],
    ),
    "top-level field": (
        '{"model": "jev-latest", "state": "x", "x_weight": 1e400, "questions": {"q": {"type": "noul"}}}',
        ["body", "x_weight"],
    ),
}


def nested(depth: int) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def assert_utf8_json(response) -> None:
    """The answer is valid UTF-8 JSON (a surrogate echoed raw would make it neither)."""
    json.loads(response.content.decode("utf-8"))


@pytest.mark.parametrize("case", list(SURROGATES))
async def test_a_lone_surrogate_anywhere_gets_a_located_422_and_no_backend_call(api, fake, case):
    body, loc = SURROGATES[case]
    response = await api.post(
        "/v1/systemone", content=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    assert_utf8_json(response)
    assert_validation(response, loc)
    problem = next(d for d in response.json()["detail"] if d["loc"] == loc)
    assert problem["type"] == "string_unicode" and "\\ud" in problem["msg"]
    assert fake.requests == []


@pytest.mark.parametrize("case", list(OVERFLOWS))
async def test_a_number_that_overflows_to_infinity_anywhere_gets_a_located_422(api, fake, case):
    text, loc = OVERFLOWS[case]
    response = await api.post("/v1/systemone", content=text.encode(), headers={"Content-Type": "application/json"})
    assert_validation(response, loc)
    assert next(d for d in response.json()["detail"] if d["loc"] == loc)["type"] == "finite_number"
    assert fake.requests == []


async def test_nesting_deeper_than_the_limit_gets_a_422_and_the_limit_itself_is_accepted(api, fake):
    too_deep = await api.post("/v1/systemone", json=body_with(state={"x": nested(NESTING_MAX)}))
    assert_validation(too_deep, ["body", "state", "x"])
    assert too_deep.json()["detail"][0]["type"] == "nesting_too_deep"
    assert fake.requests == []
    # The body object, `state` and NESTING_MAX - 2 arrays: exactly the limit.
    deepest = await api.post("/v1/systemone", json=body_with(state={"x": nested(NESTING_MAX - 2)}))
    assert deepest.status_code == 200, deepest.text


async def test_surrogate_pairs_are_text_and_evaluate(api, fake):
    body = body_with(state="Refund please \U0001f600", questions={"q\U0001f600": NOUL})
    response = await api.post(
        "/v1/systemone",
        content=json.dumps(body).encode(),  # sent as \ud83d\ude00
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 200, response.text
    assert list(response.json()["answers"]) == ["q\U0001f600"]


async def test_an_integer_too_long_to_convert_gets_json_invalid_without_python_advice(api, fake):
    response = await api.post(
        "/v1/systemone",
        content=b'{"model": "jev-latest", "state": ' + b"7" * 5000 + b"}",
        headers={"Content-Type": "application/json"},
    )
    assert_validation(response, ["body"])
    (problem,) = response.json()["detail"]
    assert problem["type"] == "json_invalid" and "digits" in problem["msg"] and "sys." not in response.text


@pytest.mark.parametrize("tool_calls", [[1], "abc", {"name": "x"}, [None], [{"function": 5}]])
async def test_a_transcript_the_chat_template_cannot_render_is_the_clients_422(api, fake, tool_calls):
    state = [
        {"role": "user", "content": "Refund?"},
        {"role": "assistant", "content": "", "tool_calls": tool_calls},
        {"role": "user", "content": "Well?"},
    ]
    response = await api.post("/v1/systemone", json=body_with(state=state))
    assert_validation(response, ["body", "state"])
    assert response.json()["detail"][0]["type"] == "chat_template"
    assert fake.requests == []


@pytest.mark.parametrize(
    "text",
    ['{"model": "sentiment", "input": ["ok", "\\ud800"]}', '{"model": "sentiment", "input": "x", "x_weight": 1e400}'],
)
async def test_classify_refuses_the_same_input_with_a_400_in_its_shape(api, fake, text):
    response = await api.post("/v1/classify", content=text.encode(), headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["type"] == "invalid_request" and body["code"] == 400 and "body." in body["error"]
    assert fake.requests == []


def test_the_document_check_stops_after_a_bounded_number_of_problems():
    data = body_parse(json.dumps({"state": [HIGH] * 1000}).encode())
    problems = document_problems(data=data)
    assert 0 < len(problems) <= 20
    assert [d["loc"] for d in problems_render(problems[:2])] == [["body", "state", 0], ["body", "state", 1]]


def _encodable(value: object) -> bool:
    """The ground truth: what a strict UTF-8 JSON encoder (every database, every answer) accepts."""
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        return False
    return True


_text = st.text(alphabet=st.sampled_from(["a", "é", "\U0001f600", HIGH, LOW, "\x00"]), max_size=4)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
    max_leaves=20,
)


@given(_json)
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
def test_the_document_check_refuses_exactly_what_a_strict_utf8_encoder_refuses(value):
    problems = document_problems(data=value)
    assert (problems == []) == _encodable(value)
    assert all(_encodable(list(p.loc)) and _encodable(p.msg) for p in problems)  # echoable in an answer


def _read_by_the_standard_library(raw: bytes) -> object:
    """What the body reader promises to read: the standard library's strict reading (UTF-8, no NaN/Infinity)."""

    def refused(name: str) -> object:
        raise ValueError(name)

    return json.loads(raw.decode("utf-8"), parse_constant=refused)


_numbers = st.integers(min_value=-(10**40), max_value=10**40) | st.floats() | st.sampled_from([2**63, -(2**63) - 1])


@given(
    st.recursive(
        st.none() | st.booleans() | _numbers | _text,
        lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
        max_leaves=20,
    ),
    st.booleans(),
    st.binary(max_size=3),
    st.integers(min_value=0, max_value=200),
)
@settings(max_examples=500, deadline=None, derandomize=True, database=None)
def test_a_body_is_read_exactly_as_the_standard_library_reads_it_or_refused_as_it_refuses(value, ascii, noise, cut):
    """orjson reads most bodies (faster); what it would read otherwise (an integer beyond 64 bits becomes a float)
    or refuses goes to the standard library: every document, mangled or not, is read to the same value and type."""
    text = json.dumps(value, ensure_ascii=ascii).encode("utf-8", "surrogatepass")
    for raw in (text, text[:cut] + noise + text[cut:], text[:cut]):
        try:
            expected: object = _read_by_the_standard_library(raw)
        except ValueError:
            with pytest.raises(BodyNotJson):
                body_parse(raw)
        else:
            assert repr(body_parse(raw)) == repr(expected)
