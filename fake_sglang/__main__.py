"""`python -m fake_sglang --port 30000 [--delay 0] [--batch-delay S] [--tokenizer DIR]`: the fake served standalone, for
benchmarks."""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Iterable

from fake_sglang.protocol import DEFAULT_VOCAB_SIZE
from fake_sglang.server import FakeSGLang
from fake_sglang.text import text_tokenizer_load


def _parse_args(argv: Iterable[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Fake SGLang server for tests and benchmarks.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before answering /generate")
    parser.add_argument(
        "--batch-delay",
        type=float,
        default=None,
        help="seconds a batched /generate call (a list of prompts) waits, when it differs from --delay",
    )
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE)
    parser.add_argument("--context-length", type=int, default=32768)
    parser.add_argument("--model-path", default="fake/Qwen3-0.6B")
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--no-cached-tokens", action="store_true", help="omit meta_info.cached_tokens")
    parser.add_argument("--tokenizer", help="a model directory whose tokenizer.json tokenizes `text` prompts")
    return parser.parse_args(list(argv) if argv is not None else None)


def main(argv: Iterable[str] | None = None) -> None:
    """Serve until SIGINT/SIGTERM; prints the URL once it accepts connections."""
    args = _parse_args(argv)
    server = FakeSGLang(
        host=args.host,
        port=args.port,
        delay=args.delay,
        batch_delay=args.batch_delay,
        api_key=args.api_key,
        keep_records=False,
        vocab_size=args.vocab_size,
        context_length=args.context_length,
        model_path=args.model_path,
        served_model_name=args.served_model_name,
        tokenizer=None if args.tokenizer is None else text_tokenizer_load(args.tokenizer),
    )
    server.report_cached_tokens = not args.no_cached_tokens
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    with server:
        print(f"fake SGLang serving at {server.url}", flush=True)
        stopping.wait()


if __name__ == "__main__":
    main()
