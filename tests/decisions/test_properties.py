"""Random requests against the real server: every valid one is answered in the SDK's types, every invalid
one is a 400 (404 for a model) in OpenAI's shape, never a 5xx."""

from __future__ import annotations

from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types import Decision

TEXT = st.text(min_size=1, max_size=40).filter(lambda s: s.strip())
JSON_LEAF = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=10)
JSON_OBJECT = st.dictionaries(
    st.text(max_size=8),
    st.recursive(
        JSON_LEAF,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
        max_leaves=8,
    ),
    max_size=4,
)
PART = st.one_of(
    st.builds(lambda t: {"type": "input_text", "text": t}, TEXT),
    st.builds(lambda d: {"type": "input_json", "data": d}, JSON_OBJECT),
)
MESSAGE = st.one_of(
    st.builds(
        lambda role, content: {"type": "message", "role": role, "content": content},
        st.sampled_from(["user", "developer", "system"]),
        TEXT | st.lists(PART.filter(lambda p: p["type"] == "input_text"), min_size=1, max_size=3),
    ),
    st.builds(lambda content: {"role": "user", "content": content}, st.lists(PART, min_size=1, max_size=3)),
    st.builds(lambda text: {"type": "message", "role": "assistant", "content": text}, TEXT),
)
INPUT = TEXT | st.lists(MESSAGE, min_size=1, max_size=4)
VALUE = st.booleans() | st.text(min_size=1, max_size=12)


def _unique(values: list[Any]) -> list[Any]:
    seen: list[Any] = []
    for value in values:
        if not any(type(v) is type(value) and v == value for v in seen):
            seen.append(value)
    return seen


CHOICES = (
    st.lists(VALUE, min_size=2, max_size=6)
    .map(_unique)
    .filter(lambda v: len(v) >= 2)
    .flatmap(
        lambda values: st.tuples(
            *[
                st.one_of(st.just({"value": v}), st.builds(lambda d, v=v: {"value": v, "description": d}, TEXT))
                for v in values
            ]
        ).map(list)
    )
)
LEVELS = st.lists(st.builds(lambda label: {"label": label}, TEXT), min_size=2, max_size=10)


def _question(kind: str, instructions: Any, name: str | None, options: Any) -> dict[str, Any]:
    question: dict[str, Any] = {"type": kind, "instructions": instructions}
    if name is not None:
        question["name"] = name
    if kind == "choice":
        question["choices"] = options
    elif kind == "score":
        question["levels"] = options
    return question


QUESTION = st.sampled_from(["predicate", "choice", "score"]).flatmap(
    lambda kind: st.builds(
        _question,
        st.just(kind),
        TEXT | st.lists(PART, min_size=1, max_size=2),
        st.none() | TEXT,
        CHOICES if kind == "choice" else LEVELS,
    )
)
VALID = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["jev-latest", "jev-2"]),
        "input": INPUT,
        # Names unique, as the API requires (unnamed questions are told apart by position).
        "questions": st.lists(
            QUESTION, min_size=1, max_size=4, unique_by=lambda q: ("name", q["name"]) if "name" in q else id(q)
        ),
    },
    optional={"safety_identifier": st.text(max_size=64), "prompt_cache_key": st.text(max_size=30)},
)
ANY_JSON = JSON_LEAF | st.lists(JSON_LEAF, max_size=2) | st.dictionaries(st.text(max_size=4), JSON_LEAF, max_size=2)


def _broken(body: dict[str, Any], how: str, junk: Any) -> dict[str, Any]:
    """`body` made invalid in one way."""
    question = dict(body["questions"][0])
    if how == "drop":
        return {k: v for k, v in body.items() if k != "questions"}
    if how == "unknown":
        return {**body, "temperature": junk}
    if how == "input":
        return {**body, "input": junk if not isinstance(junk, str) else [junk]}
    if how == "type":
        question["type"] = junk if junk not in ("predicate", "choice", "score") else None
    elif how == "instructions":
        question["instructions"] = junk if not isinstance(junk, str) else [junk]  # any string, "" too, is valid
    elif how == "options":
        question["type"] = "choice"
        question["choices"] = junk if not isinstance(junk, list) or len(junk) < 2 else [junk]
    elif how == "role":
        return {**body, "input": [{"role": "tool", "content": "x"}]}
    return {**body, "questions": [question, *body["questions"][1:]]}


INVALID = st.builds(
    _broken, VALID, st.sampled_from(["drop", "unknown", "input", "type", "instructions", "options", "role"]), ANY_JSON
)
PROPERTY_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(body=VALID)
def test_every_valid_request_is_answered_in_the_sdks_types(asgi_server, fake, body):
    response = httpx.post(f"{asgi_server.url}/v1/decisions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    decision = Decision.model_validate(response.json(), strict=True)
    assert [(a.type, a.name) for a in decision.answers] == [(q["type"], q.get("name")) for q in body["questions"]]
    for answer, question in zip(decision.answers, body["questions"], strict=True):
        if answer.type == "choice":
            assert [p.value for p in answer.probabilities] == [c["value"] for c in question["choices"]]
            assert [type(p.value) for p in answer.probabilities] == [type(c["value"]) for c in question["choices"]]


@PROPERTY_SETTINGS
@given(body=INVALID)
def test_every_invalid_request_is_a_400_in_openai_shape(asgi_server, fake, body):
    response = httpx.post(f"{asgi_server.url}/v1/decisions", json=body, timeout=30)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert error["param"] is None or isinstance(error["param"], str)
    assert fake.generate_calls == 0
