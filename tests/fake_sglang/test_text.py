"""`text` prompts: tokenized in the fake by the real Qwen3 tokenizer, as SGLang tokenizes them server-side, so
`prompt_tokens`, `cached_tokens` and the log-probs are those of the same prompt sent as `input_ids`."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from tokenizers import Tokenizer

from fake_sglang import FakeSGLang, text_tokenizer_load
from testbed.qwen3 import qwen3_dir
from tests.fake_sglang.helpers import SAMPLING, error_message, label_logprobs

PREFIX = "<|im_start|>user\nThe customer reports that order #4401 arrived late.<|im_end|>\n<|im_start|>user\n"
QUESTIONS = [PREFIX + f"Question {i}: was it late?<|im_end|>\n<|im_start|>assistant\nAnswer:" for i in range(3)]
LABELS = [32, 33]


def text_body(text: object, **extra: object) -> dict[str, object]:
    """What llm2jev's SGLang backend sends: text, one generated token, the labels' log-probs."""
    return {
        "text": text,
        "sampling_params": SAMPLING,
        "return_logprob": True,
        "logprob_start_len": -1,
        "token_ids_logprob": LABELS,
        **extra,
    }


@pytest.fixture(scope="module")
def reference() -> Tokenizer:
    return Tokenizer.from_file(str(qwen3_dir() / "tokenizer.json"))


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with (
        FakeSGLang(tokenizer=text_tokenizer_load(qwen3_dir()), keep_records=False) as fake,
        httpx.Client(base_url=fake.url, timeout=10) as http,
    ):
        yield http


def test_text_is_tokenized_by_the_real_tokenizer(client: httpx.Client, reference: Tokenizer) -> None:
    ids = reference.encode(QUESTIONS[0]).ids
    assert 151644 in ids  # <|im_start|> parsed as the special token, not spelled out
    by_text = client.post("/generate", json=text_body(QUESTIONS[0])).json()
    by_ids = client.post("/generate", json={**text_body(QUESTIONS[0]), "text": None, "input_ids": ids}).json()
    assert by_text["meta_info"]["prompt_tokens"] == len(ids)
    assert label_logprobs(by_text) == label_logprobs(by_ids)  # the same prompt, so the same answer


def test_a_batch_of_texts_is_a_batch_and_shares_the_prefix_cache(client: httpx.Client, reference: Tokenizer) -> None:
    warm = client.post("/generate", json=text_body(PREFIX + "warm"))
    answers = client.post("/generate", json=text_body(QUESTIONS)).json()
    assert warm.status_code == 200 and isinstance(answers, list) and len(answers) == len(QUESTIONS)
    shared = len(reference.encode(PREFIX).ids)
    for question, answer in zip(QUESTIONS, answers, strict=True):
        meta = answer["meta_info"]
        assert meta["prompt_tokens"] == len(reference.encode(question).ids)
        assert meta["cached_tokens"] >= shared  # the real prefix's tokens, matched in the radix cache


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (text_body([]), "text must be"),
        (text_body(["a", 3]), "text must be"),
        (text_body("x", input_ids=[1, 2]), "not both"),
    ],
    ids=["empty-batch", "non-string", "text-and-ids"],
)
def test_malformed_text_is_refused(client: httpx.Client, payload: dict[str, object], message: str) -> None:
    response = client.post("/generate", json=payload)
    assert response.status_code == 400 and message in error_message(response)


def test_without_a_tokenizer_text_is_refused_as_by_skip_tokenizer_init() -> None:
    with FakeSGLang() as fake, httpx.Client(base_url=fake.url, timeout=10) as http:
        response = http.post("/generate", json=text_body("hello"))
    assert response.status_code == 400 and "skip_tokenizer_init" in error_message(response)
