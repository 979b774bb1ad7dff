"""The official `typesafe-sdk` (with its zstd extra) against the real server on a socket: sync and async
clients, compressed bodies, all three question types, `models.list()`, and its error and retry paths.

The server sits behind `WireRecorder`, so the tests see the request as the SDK put it on the wire.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from dataclasses import replace
from typing import Any

import pytest
import zstandard
from typesafe_sdk import (
    AsyncTypeSafeClient,
    Choice,
    Noul,
    RetryPolicy,
    Score,
    TypeSafeAuthenticationError,
    TypeSafeClient,
    TypeSafeInternalServerError,
)
from typesafe_sdk._core.compression import MIN_COMPRESSED_BODY_LENGTH

from api.openapi.document import API_DESCRIPTION
from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator

# Over 2 KiB of state, so the whole body is well over the SDK's 1 KiB compression threshold.
LONG_STATE = (
    "Hi, I was charged twice for my March invoice (INV-2031) and the refund still hasn't arrived. "
    "I have written to you three times. "
) * 24
QUESTIONS: dict[str, Noul | Choice | Score] = {
    "refund": Noul(instructions="Is the customer asking for money back?"),
    "team": Choice(
        instructions="Which team should handle this?",
        criteria={"Billing": "Payments, invoices, refunds", "Technical": "Bugs", "Sales": None},
    ),
    "anger": Score(instructions="How frustrated is the customer?", criteria=["Calm", "Annoyed", "Furious"]),
}
NO_RETRY = RetryPolicy(max_retries=0)


def _check_answers(result: Any) -> None:
    assert list(result.answers) == list(QUESTIONS)
    assert 0 <= result.nouls["refund"].noul <= 1
    team = result.choices["team"]
    assert team.choice in {"Billing", "Technical", "Sales"}
    assert list(team.probabilities) == ["Billing", "Technical", "Sales"]
    assert sum(team.probabilities.values()) == pytest.approx(1)
    anger = result.scores["anger"]
    assert 0 <= anger.score <= 2 and anger.legend == {0: "Calm", 1: "Annoyed", 2: "Furious"}
    assert result.usage.output_tokens == len(QUESTIONS) + 1


def _check_compressed(recorder: Any, state: str) -> None:
    """The SDK sent zstd, and what it sent decodes to the request the engine then answered."""
    (wire,) = recorder.to("/v1/systemone")
    assert len(state.encode()) >= 2048 > MIN_COMPRESSED_BODY_LENGTH
    assert wire.headers["content-encoding"] == "zstd"
    decoded = zstandard.ZstdDecompressor().decompressobj().decompress(wire.body)
    assert len(wire.body) < len(decoded) / 4
    sent = json.loads(decoded)
    assert sent["state"] == state and list(sent["questions"]) == list(QUESTIONS)
    assert wire.status == 200


def test_sync_client_sends_a_compressed_body_and_parses_every_type_and_the_model_list(wire_server, fake, settings):
    server, recorder = wire_server
    with TypeSafeClient(api_key="any", base_url=server.url, retry=NO_RETRY) as client:
        result = client.system_one(state=LONG_STATE, questions=QUESTIONS, model="jev-latest")
        models = client.models.list()
    _check_answers(result)
    _check_compressed(recorder, LONG_STATE)
    assert result.model == "jev-latest"
    assert fake.generate_calls == 2
    assert [m.name for m in models.models] == [settings.OPENJEV.model_alias, settings.OPENJEV.model]
    assert all(m.description and m.release_date for m in models.models)


async def test_async_client_sends_a_compressed_body_and_parses_every_type_and_the_model_list(wire_server, settings):
    server, recorder = wire_server
    async with AsyncTypeSafeClient(api_key="any", base_url=server.url, retry=NO_RETRY) as client:
        result = await client.system_one(state=LONG_STATE, questions=QUESTIONS)  # the SDK's default model
        models = await client.models.list()
    _check_answers(result)
    _check_compressed(recorder, LONG_STATE)
    assert result.model == "jev-latest"
    assert models.models[0].name == settings.OPENJEV.model_alias


def test_a_small_body_goes_uncompressed_and_structured_states_round_trip(wire_server):
    server, recorder = wire_server
    state = {"messages": [{"role": "user", "content": "Refund me, please."}]}
    with TypeSafeClient(api_key="any", base_url=server.url, retry=NO_RETRY) as client:
        result = client.system_one(state=state, questions={"refund": Noul(instructions="Refund?")})
    (wire,) = recorder.to("/v1/systemone")
    assert "content-encoding" not in wire.headers and json.loads(wire.body)["state"] == state
    assert 0 <= result.nouls["refund"].noul <= 1


def test_a_wrong_key_is_the_sdks_authentication_error_and_is_not_retried(wire_server, settings):
    server, recorder = wire_server
    settings.OPENJEV = replace(settings.OPENJEV, api_key="s3cret")
    with TypeSafeClient(api_key="wrong", base_url=server.url) as client:  # default retry policy
        with pytest.raises(TypeSafeAuthenticationError) as caught:
            client.system_one(state="x", questions={"q": Noul(instructions="?")})
        assert caught.value.status == 401
        assert caught.value.body["detail"]["error_type"] == "authentication_error"
        assert len(recorder.to("/v1/systemone")) == 1
    with TypeSafeClient(api_key="s3cret", base_url=server.url, retry=NO_RETRY) as client:
        assert client.system_one(state="x", questions={"q": Noul(instructions="?")}).nouls["q"].noul >= 0


def test_an_overload_takes_the_sdks_retry_path_and_succeeds_once_there_is_room(wire_server, fake):
    """The gate is held by the test; it is released when the first 529 leaves the server. The SDK
    waits the `Retry-After` second, retries (saying so in a header) and gets its answer."""
    server, recorder = wire_server
    evaluator = fake_evaluator(fake, max_concurrent_requests=1)
    evaluator_install(evaluator)
    hold = contextlib.ExitStack()
    hold.enter_context(evaluator.gate.admit())
    released = threading.Event()

    def release_on_overload(record: Any) -> None:
        if record.status == 529 and not released.is_set():
            released.set()
            hold.close()

    recorder.on_status = release_on_overload
    with TypeSafeClient(api_key="any", base_url=server.url, retry=RetryPolicy(max_retries=2, timeout=30)) as client:
        result = client.system_one(state="I was charged twice!", questions={"refund": Noul(instructions="Refund?")})
    assert 0 <= result.nouls["refund"].noul <= 1
    first, second = recorder.to("/v1/systemone")
    assert (first.status, second.status) == (529, 200)
    assert "x-typesafe-retry-count" not in first.headers and second.headers["x-typesafe-retry-count"] == "1"


async def test_an_overload_that_lasts_ends_in_the_sdks_server_error_after_its_retries(wire_server, fake):
    server, recorder = wire_server
    evaluator = fake_evaluator(fake, max_concurrent_requests=1)
    evaluator_install(evaluator)
    with evaluator.gate.admit():
        async with AsyncTypeSafeClient(
            api_key="any", base_url=server.url, retry=RetryPolicy(max_retries=1, timeout=30)
        ) as client:
            with pytest.raises(TypeSafeInternalServerError) as caught:
                await client.system_one(state="x", questions={"q": Noul(instructions="?")})
    assert caught.value.status == 529 and caught.value.headers["retry-after"] == "1"
    assert caught.value.body["detail"]["error_type"] == "overloaded"
    assert [r.status for r in recorder.to("/v1/systemone")] == [529, 529]
    assert fake.generate_calls == 0


def test_the_sdk_snippet_in_the_api_description_runs(wire_server):
    server, _ = wire_server
    (code,) = re.findall(r"```python\n(.*?)```", API_DESCRIPTION, re.S)
    code = code.replace("http://127.0.0.1:8000", server.url)
    namespace: dict[str, Any] = {}
    exec(compile(code, "API_DESCRIPTION", "exec"), namespace)  # the documented example, verbatim
    result = namespace["result"]
    assert 0 <= result.nouls["refund"].noul <= 1 and result.choices["team"].choice in {"Billing", "Tech"}


def test_the_default_retry_policy_tries_a_lasting_overload_three_times(wire_server, fake):
    """The SDK's default policy retries a 5xx twice (docs/operations.md says so), each after the 529's
    `Retry-After` second; no backend work is done for any of the three."""
    server, recorder = wire_server
    evaluator = fake_evaluator(fake, max_concurrent_requests=1)
    evaluator_install(evaluator)
    with (
        evaluator.gate.admit(),
        TypeSafeClient(api_key="any", base_url=server.url) as client,
        pytest.raises(TypeSafeInternalServerError) as caught,
    ):
        client.system_one(state="x", questions={"q": Noul(instructions="?")})
    assert caught.value.status == 529
    assert [r.status for r in recorder.to("/v1/systemone")] == [529, 529, 529]
    assert fake.generate_calls == 0
