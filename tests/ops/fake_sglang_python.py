"""A stand-in for "the Python that has SGLang": accepts `-m sglang.launch_server ARGS` and behaves as
the test asks, so `serve --sglang-python` is exercised with real processes, signals and sockets.

Run through a tiny shell wrapper (`fake_python_write` in the tests) as `PATH -m sglang.launch_server ...`.
Controlled by environment variables, which the launched SGLang inherits from `serve`:

- `FAKE_SGLANG_RECORD=FILE`: write the argv, SGLANG_RUST_SERVER, pid, process group and session here;
- `FAKE_SGLANG_EXIT=N`: exit with status N at once, before serving (a bad flag, no GPU);
- `FAKE_SGLANG_EXIT_ON_USR1=N`: serve, and exit with status N when sent SIGUSR1 (a crash while serving);
- `FAKE_SGLANG_START_DELAY=S`: wait S seconds before listening (a slow model load);
- `FAKE_SGLANG_IGNORE_TERM=1`: ignore SIGTERM (a wedged server: only the group SIGKILL ends it);
- `FAKE_SGLANG_CHILD_PIDFILE=FILE`: start a grandchild in the same process group (like SGLang's
  scheduler processes) and write its pid here;
- `FAKE_SGLANG_FAVOR_WORDS=Payments,Yes`: a "model" that reads its prompt and strongly prefers the
  label of the first answer line holding one of these words (see `keyword_model`), so the smoke
  test's semantic checks have a predictable outcome.
Otherwise it serves `fake_sglang.FakeSGLang` on the requested host and port.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def keyword_model(words: Sequence[str], tokenizer_dir: Path | None = None) -> Callable[[Sequence[int], int], float]:
    """Log-probs of a "model" that decodes its prompt, finds the answer lines (`LABEL: text`, as the
    prompt compiler writes them) and is sure of the label of the first line that holds one of `words`
    (in the order given); where none does, the fake's usual spread of log-probs."""
    from fake_sglang import fake_logprob
    from inference.tokenizer import hf_tokenizer_load
    from testbed.qwen3 import qwen3_dir

    tokenizer = hf_tokenizer_load(directory=tokenizer_dir or Path(os.environ.get("OPENJEV_TOKENIZER") or qwen3_dir()))

    @functools.lru_cache(maxsize=64)
    def favored(ids: tuple[int, ...]) -> int | None:
        text = tokenizer.decode(ids)
        for word in words:
            labels = re.findall(rf"^([A-Z]{{1,2}}): [^\n]*\b{re.escape(word)}\b", text, re.MULTILINE)
            if labels:
                return tokenizer.encode(labels[-1])[0]
        return None

    def logprob(ids: Sequence[int], token_id: int) -> float:
        if token_id == favored(tuple(ids)):
            return -0.02
        return -9.0 + fake_logprob(ids, token_id) / 10

    return logprob


def main(argv: list[str]) -> int:
    if argv[:2] != ["-m", "sglang.launch_server"]:
        print(f"fake SGLang python: expected -m sglang.launch_server, got {argv[:2]}", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--served-model-name")
    parser.add_argument("--model-path")
    parser.add_argument("--context-length", type=int, default=32768)
    args, _ = parser.parse_known_args(argv[2:])
    env = os.environ
    if record := env.get("FAKE_SGLANG_RECORD"):
        Path(record).write_text(
            json.dumps(
                {
                    "argv": argv,
                    "SGLANG_RUST_SERVER": env.get("SGLANG_RUST_SERVER"),
                    "pid": os.getpid(),
                    "pgid": os.getpgid(0),
                    "sid": os.getsid(0),
                    "parent_pgid": os.getpgid(os.getppid()),
                }
            )
        )
    if env.get("FAKE_SGLANG_IGNORE_TERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = None
    if pidfile := env.get("FAKE_SGLANG_CHILD_PIDFILE"):
        child = subprocess.Popen(["sleep", "600"])
        Path(pidfile).write_text(str(child.pid))
    if (exit_code := env.get("FAKE_SGLANG_EXIT")) is not None:
        print(f"fake SGLang: exiting with {exit_code} before serving", file=sys.stderr, flush=True)
        return int(exit_code)
    if (crash_code := env.get("FAKE_SGLANG_EXIT_ON_USR1")) is not None:

        def crash(*_: object) -> None:
            print(f"fake SGLang: exiting with {crash_code} while serving", file=sys.stderr, flush=True)
            os._exit(int(crash_code))

        signal.signal(signal.SIGUSR1, crash)
    time.sleep(float(env.get("FAKE_SGLANG_START_DELAY", "0")))

    from fake_sglang import FakeSGLang

    server = FakeSGLang(
        host=args.host,
        port=args.port,
        served_model_name=args.served_model_name,
        model_path=args.model_path or "fake",
        context_length=args.context_length,
        keep_records=False,
    )
    if words := env.get("FAKE_SGLANG_FAVOR_WORDS"):
        server.logprob_fn = keyword_model(words.split(","))
    stopping = threading.Event()
    if env.get("FAKE_SGLANG_IGNORE_TERM") != "1":
        signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    with server:
        print(f"fake SGLang serving at {server.url}", flush=True)
        while not stopping.wait(0.2):
            pass
    if child is not None:  # like SGLang, a clean stop takes its own processes down too
        child.terminate()
        child.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
