"""Aborts (by rid and by disconnect), auth and health, and the failures a test can inject."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

from fake_sglang import FakeSGLang
from tests.fake_sglang.helpers import PREFIX, batch_body, body, cached, error_message

# ---- aborts -------------------------------------------------------------------------------------


def post_in_thread(url: str, payload: dict[str, Any]) -> tuple[threading.Thread, list[httpx.Response]]:
    responses: list[httpx.Response] = []

    def run() -> None:
        responses.append(httpx.post(f"{url}/generate", json=payload, timeout=30))

    thread = threading.Thread(target=run)
    thread.start()
    return thread, responses


def test_abort_finishes_a_slow_request_early(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.delay = 20
    started = time.monotonic()
    thread, responses = post_in_thread(fake.url, body(PREFIX, [1, 2], rid="slow"))
    fake.wait_in_flight(1)
    assert client.post("/abort_request", json={"rid": "slow"}).status_code == 200
    thread.join(timeout=10)
    assert time.monotonic() - started < 5
    assert responses[0].status_code == 200
    meta = responses[0].json()["meta_info"]
    assert meta["finish_reason"] == {"type": "abort", "message": "Abort before prefill"}
    assert meta["id"] == "slow" and meta["output_token_ids_logprobs"] == []
    assert fake.aborted == ["slow"]
    fake.delay = 0
    assert cached(client, PREFIX) == 0  # an aborted prompt was never computed


def test_abort_of_an_unknown_rid_is_recorded_and_harmless(fake: FakeSGLang, client: httpx.Client) -> None:
    assert client.post("/abort_request", json={"rid": "nobody"}).status_code == 200
    assert fake.aborted == ["nobody"]
    assert (
        client.post("/generate", json=body(PREFIX, [1], rid="nobody")).json()["meta_info"]["finish_reason"]["type"]
        == "length"
    )


def test_abort_all_ends_every_in_flight_call(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.delay = 20
    calls = [post_in_thread(fake.url, body([*PREFIX, i], [1], rid=f"r{i}")) for i in range(3)]
    fake.wait_in_flight(3)
    client.post("/abort_request", json={"abort_all": True})
    for thread, responses in calls:
        thread.join(timeout=10)
        assert responses[0].json()["meta_info"]["finish_reason"]["type"] == "abort"
    assert sorted(fake.aborted) == ["r0", "r1", "r2"]


def test_aborting_one_batch_item_leaves_the_others(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.delay = 0.5
    thread, responses = post_in_thread(fake.url, batch_body([[1, 2], [3, 4]], [[1], [2]], ["keep", "drop"]))
    fake.wait_in_flight(1)
    client.post("/abort_request", json={"rid": "drop"})
    thread.join(timeout=10)
    kinds = [r["meta_info"]["finish_reason"]["type"] for r in responses[0].json()]
    assert kinds == ["length", "abort"]


@pytest.mark.parametrize("payload", [{"rid": ["a", "b"]}, {"rid": 7}, {"abort_all": "yes"}, []])
def test_abort_takes_one_string_rid_or_abort_all(fake: FakeSGLang, client: httpx.Client, payload: Any) -> None:
    assert client.post("/abort_request", json=payload).status_code == 400
    assert fake.aborted == []


def test_aborting_a_batchs_base_rid_leaves_its_items_running(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.delay = 0.5
    payload = {**batch_body([[1, 2], [3, 4]], [], []), "token_ids_logprob": [1], "rid": "base"}
    thread, responses = post_in_thread(fake.url, payload)
    fake.wait_in_flight(1)
    client.post("/abort_request", json={"rid": "base"})
    thread.join(timeout=10)
    assert [r["meta_info"]["finish_reason"]["type"] for r in responses[0].json()] == ["length", "length"]


def test_client_disconnect_aborts_every_item_of_a_batch(fake: FakeSGLang) -> None:
    fake.delay = 20
    payload = {**batch_body([[1, 2], [3, 4]], [], []), "token_ids_logprob": [1], "rid": "gone"}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{fake.url}/generate", json=payload, timeout=0.3)
    deadline = time.monotonic() + 5
    while fake.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake.disconnected == ["gone_0", "gone_1"] and fake.in_flight == 0


def test_client_disconnect_aborts_a_slow_request(fake: FakeSGLang) -> None:
    fake.delay = 20
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{fake.url}/generate", json=body(PREFIX, [1], rid="gone"), timeout=0.3)
    deadline = time.monotonic() + 5
    while fake.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake.disconnected == ["gone"] and fake.in_flight == 0


# ---- auth, health, model info -------------------------------------------------------------------


def test_bearer_key_is_required_except_for_health(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.api_key = "sekrit"
    assert client.post("/generate", json=body(PREFIX, [1])).status_code == 401
    wrong = client.post("/generate", json=body(PREFIX, [1]), headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json() == {"error": "Unauthorized"}
    assert client.get("/v1/models").status_code == 401
    assert client.post("/abort_request", json={"rid": "x"}).status_code == 401
    assert client.get("/health").status_code == 200
    right = client.post("/generate", json=body(PREFIX, [1]), headers={"Authorization": "Bearer sekrit"})
    assert right.status_code == 200


def test_health_follows_the_healthy_flag(fake: FakeSGLang, client: httpx.Client) -> None:
    response = client.get("/health")
    assert response.status_code == 200 and response.content == b""
    assert client.get("/health_generate").status_code == 200
    fake.healthy = False
    assert client.get("/health").status_code == 503
    assert client.get("/health_generate").status_code == 503


def test_model_info_and_openai_model_list(fake: FakeSGLang, client: httpx.Client) -> None:
    for path in ("/model_info", "/get_model_info"):
        info = client.get(path).json()
        assert info["model_path"] == fake.model_path and info["is_generation"] is True and "tokenizer_path" in info
    models = client.get("/v1/models").json()
    assert models["object"] == "list" and models["data"][0]["id"] == fake.served_model_name
    assert models["data"][0]["owned_by"] == "sglang"  # how the gateway recognises an SGLang worker


def test_server_info_names_the_model_like_sglang(fake: FakeSGLang, client: httpx.Client) -> None:
    for path in ("/server_info", "/get_server_info"):
        info = client.get(path).json()
        assert info["model_path"] == fake.model_path and info["served_model_name"] == fake.served_model_name
        assert info["context_length"] == fake.context_length and "version" in info and "internal_states" in info


def test_unknown_paths_and_methods_are_404_and_405(client: httpx.Client) -> None:
    assert client.get("/nope").status_code == 404
    assert client.get("/generate").status_code == 405


# ---- failure injection --------------------------------------------------------------------------


def test_fail_status_answers_every_generate_with_that_status(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.fail_status = 503
    response = client.post("/generate", json=body(PREFIX, [1]))
    assert response.status_code == 503 and error_message(response)


def test_fail_after_answers_the_first_calls_then_fails(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.fail_after = 2
    statuses = [client.post("/generate", json=body(PREFIX, [1])).status_code for _ in range(4)]
    assert statuses == [200, 200, 500, 500]
    assert [r["status"] for r in fake.requests] == statuses


@pytest.mark.parametrize("mode", ["missing_logprobs", "missing_meta", "not_json"])
def test_malformed_mode_damages_successful_answers(fake: FakeSGLang, client: httpx.Client, mode: Any) -> None:
    fake.malformed = mode
    response = client.post("/generate", json=body(PREFIX, [1]))
    assert response.status_code == 200
    if mode == "not_json":
        with pytest.raises(ValueError):
            response.json()
    elif mode == "missing_meta":
        assert "meta_info" not in response.json()
    else:
        assert "output_token_ids_logprobs" not in response.json()["meta_info"]


def test_duplicate_logprob_mode_repeats_a_label_entry(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.malformed = "duplicate_logprob"
    entries = client.post("/generate", json=body(PREFIX, [1, 2])).json()["meta_info"]["output_token_ids_logprobs"][0]
    assert len(entries) == 3 and entries[2] == entries[0]


def test_reversed_batch_mode_answers_the_items_out_of_order(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.malformed = "reversed_batch"
    results = client.post("/generate", json=batch_body([[1, 2], [3, 4]], [[1], [2]], ["a", "b"])).json()
    assert [r["meta_info"]["id"] for r in results] == ["b", "a"]


def test_dead_server_refuses_connections_until_revived() -> None:
    with FakeSGLang() as server, httpx.Client(base_url=server.url, timeout=5) as http:
        assert http.post("/generate", json=body(PREFIX, [1])).status_code == 200  # keep-alive connection open
        server.dead()
        with pytest.raises(httpx.TransportError):
            http.post("/generate", json=body(PREFIX, [1]))
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{server.url}/health", timeout=5)
        server.revive()
        assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/health", timeout=5)
