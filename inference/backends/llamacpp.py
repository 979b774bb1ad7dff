"""The embedded backend: llama.cpp on the CPU, with real KV prefix reuse across an evaluation.

One llama context holds one token sequence in its KV cache. The warm-up evaluates the shared prefix
from scratch and leaves it there; each branch that continues that prefix drops the previous
branch's cells, keeps the prefix and evaluates only its own suffix. The context is not
thread-safe, so all model work runs on one dedicated worker thread and the event loop only awaits
it. Cancellation is cooperative: a cancelled or aborted call skips its remaining branches (a
branch already inside llama.cpp finishes first, a fraction of a second on the bundled model).
The tokenizer, which reads only the vocabulary, is `inference.backends.llamacpp_tokenizer`.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import llama_cpp
import numpy as np

from inference.backends.base import BranchCall, BranchScored, Generation, Prefix
from inference.backends.llamacpp_tokenizer import LlamaTokenizer
from inference.errors import BackendFailed, BackendUnavailable, StartupError
from inference.gguf import gguf_model_name, gguf_resolve

DEFAULT_N_CTX = 8192
DEFAULT_N_BATCH = 512


class _Aborted(Exception):
    """Raised on the worker thread when a call's flag is set; becomes BackendFailed on the loop."""


class LlamaCppBackend:
    """The `Backend` protocol on an in-process llama.cpp model."""

    kind = "local"

    def __init__(
        self,
        *,
        model_path: Path,
        model: str | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        threads: int | None = None,
        n_batch: int = DEFAULT_N_BATCH,
        prefix_reuse: bool = True,
        flash_attn: bool = False,
    ) -> None:
        self.model = model or model_path.stem
        self.prefix_reuse = prefix_reuse
        """False recomputes each generation from scratch, prefix included (benchmarks compare the two)."""
        started = time.perf_counter()
        threads = threads or os.cpu_count() or 1
        try:
            self._llm = llama_cpp.Llama(
                model_path=str(model_path),
                n_ctx=n_ctx,
                n_batch=n_batch,
                n_threads=threads,
                n_threads_batch=threads,
                flash_attn=flash_attn,
                logits_all=False,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise StartupError(f"llama.cpp cannot load {model_path}: {exc}") from exc
        self.context_tokens = self._llm.n_ctx()
        """The longest prompt the context can hold; budgets above it fail each branch."""
        self._tokenizer = LlamaTokenizer(self._llm)
        self._n_vocab = self._llm.n_vocab()
        # Worker-thread state: the tokens in the KV cache, and how many of them are a prefix that was
        # computed from scratch in one evaluation (the anchor that branches may reuse).
        self._cached: list[int] = []
        self._anchor = 0
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llama")
        self._flags: dict[str, threading.Event] = {}
        self._closed = False
        self.load_seconds = time.perf_counter() - started
        """Seconds spent loading the model (reported by /health as part of startup)."""

    # -- Backend protocol -------------------------------------------------------------------------

    async def warm(self, *, rid: str, prefix: Prefix) -> Generation:
        """The prefix has no images: this engine cannot see, so its evaluator refuses them."""
        results = await self._submit(rids=[rid], job=lambda flag: [self._generate(prefix.ids, (), (), flag)])
        return results[0]

    async def score(self, *, calls: Sequence[BranchCall], scored: BranchScored | None = None) -> list[Generation]:
        """Branch by branch on the worker thread; each one is reported to `scored` on the event loop as it
        finishes (queued before the job's result, so every report is in before this returns)."""
        calls = list(calls)
        loop = asyncio.get_running_loop()

        def job(flag: threading.Event) -> list[Generation]:
            generations = []
            for index, call in enumerate(calls):
                generation = self._generate(call.prefix.ids, call.suffix, call.label_ids, flag)
                if scored is not None:
                    loop.call_soon_threadsafe(scored, index, generation)
                generations.append(generation)
            return generations

        return await self._submit(rids=[c.rid for c in calls], job=job)

    async def abort(self, *, rids: Sequence[str]) -> None:
        for rid in rids:
            flag = self._flags.get(rid)
            if flag is not None:
                flag.set()

    async def health(self) -> bool:
        return not self._closed

    def tokenizer(self) -> LlamaTokenizer:
        return self._tokenizer

    def close(self) -> None:
        """Stop the worker (after its current job) and free the model."""
        if self._closed:
            return
        self._closed = True
        for flag in list(self._flags.values()):
            flag.set()
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._llm.close()

    # -- event loop side --------------------------------------------------------------------------

    async def _submit[R](self, *, rids: Sequence[str], job: Callable[[threading.Event], R]) -> R:
        """Run `job` on the worker; cancelling the awaiting coroutine stops it between branches."""
        if self._closed:
            raise BackendUnavailable("the llama.cpp backend is closed")
        flag = threading.Event()
        for rid in rids:
            self._flags[rid] = flag
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, job, flag)
        except asyncio.CancelledError:
            flag.set()  # a queued job never starts; a running one skips its remaining branches
            raise
        except _Aborted as exc:
            raise BackendFailed("the evaluation was aborted") from exc
        except RuntimeError as exc:
            if self._closed:
                raise BackendUnavailable("the llama.cpp backend is closed") from exc
            raise
        finally:
            for rid in rids:
                if self._flags.get(rid) is flag:
                    del self._flags[rid]

    # -- worker thread side -----------------------------------------------------------------------

    def _generate(
        self, prefix: Sequence[int], suffix: Sequence[int], label_ids: Sequence[int], flag: threading.Event
    ) -> Generation:
        """One generation: `prefix` from the cache (or from scratch), then `suffix`, then the label log-probs."""
        if flag.is_set():
            raise _Aborted
        ids = (*prefix, *suffix)
        self._check(ids, label_ids)
        base = len(prefix)
        if label_ids and not suffix:
            base -= 1  # the logits of the last position must come from this evaluation
        try:
            cached = self._prefix_load(ids, base)
            if len(ids) > base:
                self._llm.eval(ids[base:])
                self._cached = [*self._cached[:base], *ids[base:]]
        except Exception as exc:
            self._cached, self._anchor = [], 0  # the KV cache may be half-written: trust nothing in it
            self._llm.n_tokens = 0
            raise BackendFailed(f"llama.cpp failed to evaluate the prompt: {exc}") from exc
        return Generation(prompt_tokens=len(ids), cached_tokens=cached, label_logprobs=self._label_logprobs(label_ids))

    def _check(self, ids: Sequence[int], label_ids: Sequence[int]) -> None:
        if not ids:
            raise BackendFailed("empty prompt")
        if len(ids) > self.context_tokens:
            raise BackendFailed(
                f"the prompt is {len(ids)} tokens but the llama.cpp context holds "
                f"{self.context_tokens}; lower the input budget or raise the context size"
            )
        if any(not 0 <= t < self._n_vocab for t in (*ids, *label_ids)):
            raise BackendFailed(f"a token id is outside the model's vocabulary of {self._n_vocab}")

    def _prefix_load(self, ids: tuple[int, ...], base: int) -> int:
        """Make the KV cache hold exactly `ids[:base]`, computed as one from-scratch evaluation.

        Returns how many tokens were reused rather than computed. Reuse happens only at the call's
        prefix boundary (the anchor), never at an arbitrary common prefix: llama.cpp's CPU kernels round
        differently for different batch shapes, so a cell's values depend on the batch it was
        computed in. Pinning every branch to "prefix in one evaluation, then the suffix" makes an
        answer a function of its own prompt only, not of the previous question or request, and
        the same with reuse on or off.
        """
        if (
            self.prefix_reuse
            and base
            and self._anchor == base
            and self._cached[:base] == list(ids[:base])
            and self._truncate(base)
        ):
            return base
        self._llm.n_tokens = 0
        self._cached, self._anchor = [], 0
        self._clear()
        if base:
            self._llm.eval(ids[:base])
            self._cached, self._anchor = list(ids[:base]), base
        return 0

    def _truncate(self, keep: int) -> bool:
        """Drop the KV cells after `keep`; False when the model's memory cannot be cut there.

        Attention KV cells can be removed anywhere. Recurrent state (Mamba-style or hybrid models
        from a custom path) cannot be cut mid-sequence, so such a model recomputes the prefix.
        """
        if len(self._cached) > keep and not self._llm._ctx.kv_cache_seq_rm(-1, keep, -1):
            return False
        self._llm.n_tokens = keep
        self._cached = self._cached[:keep]
        return True

    def _clear(self) -> None:
        memory = llama_cpp.llama_get_memory(self._llm._ctx.ctx)
        if memory:
            llama_cpp.llama_memory_clear(memory, True)

    def _label_logprobs(self, label_ids: Sequence[int]) -> tuple[float, ...]:
        """Full-vocabulary log-softmax at the last evaluated position, read at the label ids."""
        if not label_ids:
            return ()
        pointer = llama_cpp.llama_get_logits_ith(self._llm._ctx.ctx, -1)
        if not pointer:
            raise BackendFailed("llama.cpp returned no logits for the last position")
        logits = np.ctypeslib.as_array(pointer, shape=(self._n_vocab,)).astype(np.float64)
        if not np.isfinite(logits).all():
            raise BackendFailed("llama.cpp returned non-finite logits")
        top = logits.max()
        log_total = top + np.log(np.exp(logits - top).sum())
        return tuple(float(logits[t] - log_total) for t in label_ids)


def llamacpp_backend_create(
    *,
    source: str,
    cache_dir: Path,
    n_ctx: int = DEFAULT_N_CTX,
    threads: int | None = None,
    model: str | None = None,
    prefix_reuse: bool = True,
    flash_attn: bool = False,
) -> LlamaCppBackend:
    """Resolve (assembling the bundled weights on first use) and load the model into llama.cpp."""
    path = gguf_resolve(source=source, cache_dir=cache_dir)
    return LlamaCppBackend(
        model_path=path,
        model=model or gguf_model_name(source=source),
        n_ctx=n_ctx,
        threads=threads,
        prefix_reuse=prefix_reuse,
        flash_attn=flash_attn,
    )
