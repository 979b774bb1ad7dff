"""A protocol-faithful fake of SGLang 0.5.23's native HTTP API, served for real on loopback: the stand-in
for SGLang in the tests and the benchmarks.

Why a fake and not mocks: the backend client must be exercised over real HTTP (keep-alive pools,
connection refusals, slow answers, aborts, concurrency limits) and against SGLang's exact wire
format, including its awkward parts (selected-token log-probs in any order, a possibly absent
``cached_tokens``, batched answers as a JSON list, 400s for unknown sampling keys).

Log-probs are a pure function of the prompt ids and the token id (`fake_logprob`), so tests can
predict every answer without a model. The prefix cache is a real radix tree, so ``cached_tokens``
tells the truth about which prompts were seen before. Prompts come as ``input_ids``, or as ``text`` when the
fake is given a real tokenizer (`fake_sglang/text.py`), which then runs in the fake's process as it runs in
SGLang's.

Run standalone for benchmarks: ``python -m fake_sglang --port 30000 [--delay 0] [--tokenizer DIR]``.
"""

from fake_sglang.answers import Malformed
from fake_sglang.calls import RequestRecord
from fake_sglang.logprobs import CLAMPED_LOGPROB, LOGPROB_MAX, LOGPROB_MIN, LogprobFn, fake_logprob, fake_token_text
from fake_sglang.prefix_cache import PrefixCache
from fake_sglang.protocol import DEFAULT_VOCAB_SIZE
from fake_sglang.server import FakeSGLang
from fake_sglang.text import TextTokenizer, text_tokenizer_load

__all__ = [
    "CLAMPED_LOGPROB",
    "DEFAULT_VOCAB_SIZE",
    "LOGPROB_MAX",
    "LOGPROB_MIN",
    "FakeSGLang",
    "LogprobFn",
    "Malformed",
    "PrefixCache",
    "RequestRecord",
    "TextTokenizer",
    "fake_logprob",
    "fake_token_text",
    "text_tokenizer_load",
]
