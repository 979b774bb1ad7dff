"""The API's JSON, byte for byte: each body below is written exactly as it was before rendering moved to
`api/plumbing/json_render.py` and was encoded once (the bytes were recorded from the old two-pass `json_bytes`)."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
from typing import Any

import pytest

from api.plumbing.json_render import body_encode, text_encode


class Kind(enum.StrEnum):
    A = "a"


@dataclasses.dataclass
class Row:
    x: int


BODIES: dict[str, tuple[Any, bytes]] = {
    "answers, orjson's small floats": (
        {
            "model": "m",
            "answers": {
                "q1": {
                    "type": "choice",
                    "choice": "ja",
                    "probabilities": {"ja": 0.99998, "nein": 1e-05, "vielleicht": 3.1e-07},
                    "confidence": 0.9,
                },
                "q2": {"type": "noul", "noul": 0.5},
            },
            "usage": {"input_tokens": 12, "output_tokens": 3},
        },
        b'{"model":"m","answers":{"q1":{"type":"choice","choice":"ja","probabilities":{"ja":0.99998,"nein":0.00001,'
        b'"vielleicht":3.1e-7},"confidence":0.9},"q2":{"type":"noul","noul":0.5}},'
        b'"usage":{"input_tokens":12,"output_tokens":3}}',
    ),
    "classify, with a null: the standard library's floats": (
        {
            "id": "r",
            "object": "list",
            "created": 1700000000,
            "model": "sentiment",
            "data": [{"index": 0, "label": "négatif", "probs": [0.99998, 1e-05, 3.1e-07], "num_classes": 3}],
            "usage": {"prompt_tokens": 9, "total_tokens": 9, "completion_tokens": 0, "prompt_tokens_details": None},
        },
        b'{"id":"r","object":"list","created":1700000000,"model":"sentiment","data":[{"index":0,'
        b'"label":"n\xc3\xa9gatif","probs":[0.99998,1e-05,3.1e-07],"num_classes":3}],"usage":{"prompt_tokens":9,'
        b'"total_tokens":9,"completion_tokens":0,"prompt_tokens_details":null}}',
    ),
    "OpenAI's error, param null": (
        {"error": {"message": "zu groß: 😀", "type": "invalid_request_error", "param": None, "code": "invalid_value"}},
        b'{"error":{"message":"zu gro\xc3\x9f: \xf0\x9f\x98\x80","type":"invalid_request_error","param":null,'
        b'"code":"invalid_value"}}',
    ),
    "non-ASCII, escapes, large floats, a tuple": (
        {
            "s": 'é 😀 \u2028 \x7f \x1f "q" \\ /',
            "n": [1, -0.0, 2.5e16, 1e16, 0.1, 123456789012345680.0, 5e-324],
            "t": (1, 2),
            "b": [True, False],
        },
        b'{"s":"\xc3\xa9 \xf0\x9f\x98\x80 \xe2\x80\xa8 \x7f \\u001f \\"q\\" \\\\ /",'
        b'"n":[1,-0.0,2.5e+16,1e+16,0.1,1.2345678901234568e+17,5e-324],"t":[1,2],"b":[true,false]}',
    ),
    "the word null in a string, no null: orjson's floats": (
        {"instructions": "Is the field nullable?", "p": [0.99999, 1e-05]},
        b'{"instructions":"Is the field nullable?","p":[0.99999,0.00001]}',
    ),
    "an integer over 64 bits": ({"n": 2**70}, b'{"n":1180591620717411303424}'),
    "a key that is not a string": ({1: "one", "2": 2}, b'{"1":"one","2":2}'),
    "a str subclass": ({"k": Kind.A}, b'{"k":"a"}'),
}


@pytest.mark.parametrize("body, expected", BODIES.values(), ids=BODIES.keys())
def test_bodies_are_written_as_before(body: Any, expected: bytes) -> None:
    assert body_encode(body=body) == expected


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_are_refused_not_written_as_null(bad: float) -> None:
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        body_encode(body={"p": [0.5, {"deep": bad}]})


@pytest.mark.parametrize("odd", [Row(1), datetime.date(2026, 1, 1)])
def test_what_json_cannot_hold_is_refused(odd: object) -> None:
    with pytest.raises(TypeError, match="is not JSON serializable"):
        body_encode(body={"v": odd})


def test_stream_messages_are_the_standard_librarys_compact_strict_json() -> None:
    message = {"type": "answer", "p": [1e-05, 0.5], "reason": None, "text": "naïve 東京"}
    assert text_encode(value=message) == '{"type":"answer","p":[1e-05,0.5],"reason":null,"text":"naïve 東京"}'
    assert json.loads(text_encode(value=message)) == message
    with pytest.raises(ValueError):
        text_encode(value={"p": math.nan})
