"""The process's one Evaluator: built from settings once, in a worker thread, shared by all requests.

Building can take seconds (loading a model, validating 255 labels against its tokenizer), so it
never runs on the event loop: requests wait for it, while `/health` answers 503 until it is ready.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass

from django.conf import settings

from inference.backends.base import Backend
from inference.debias import Priors
from inference.errors import BackendUnavailable, StartupError
from inference.labels import labels_build
from inference.priority import INTERACTIVE_PRIORITY
from inference.prompt_text import content_free_prefix, prompt_ending
from inference.prompts import Budget
from inference.runner import AdmissionGate, Evaluator
from inference.scoring import Scoring
from inference.tuning import tuning_for, tuning_override
from inference.vision import Vision, vision_probe
from serving.config import OpenJevConfig

log = logging.getLogger(__name__)


@dataclass
class _Slot:
    evaluator: Evaluator | None = None
    error: BaseException | None = None
    started: float | None = None
    startup_seconds: float | None = None
    thread: threading.Thread | None = None


_slot = _Slot()
_lock = threading.Lock()


def backend_create(*, config: OpenJevConfig) -> Backend:
    """The configured backend; imports stay local so the web app never loads what it does not use."""
    if config.backend == "sglang":
        from inference.backends.sglang import SGLangBackend
        from inference.tokenizer import hf_tokenizer_resolve

        try:
            tokenizer = hf_tokenizer_resolve(source=config.tokenizer or config.model, revision=config.revision)
        except StartupError as exc:
            raise StartupError(f"{exc} (OPENJEV_TOKENIZER names the tokenizer's directory)") from exc
        return SGLangBackend(
            url=config.backend_url or "",
            model=config.served_model_name,
            tokenizer=tokenizer,
            api_key=config.backend_api_key,
            branch_mode=config.branch_mode,
            max_in_flight=config.max_concurrent_branches,
            timeout=config.request_timeout,
            priority=None if config.batch_priority is None else INTERACTIVE_PRIORITY,
        )
    from inference.backends.llamacpp import llamacpp_backend_create

    return llamacpp_backend_create(
        source=config.local_model, cache_dir=config.model_cache, n_ctx=config.local_context, threads=None
    )


def evaluator_build(*, config: OpenJevConfig, backend: Backend | None = None) -> Evaluator:
    """The evaluator for `config`: labels validated against the served tokenizer, the model's measured
    scoring per question shape (`inference.tuning`, or `OPENJEV_TUNING_FILE`'s) where the configuration
    leaves it to `auto`."""
    backend = backend or backend_create(config=config)
    tokenizer = backend.tokenizer()
    tuning = tuning_override(
        tuning=tuning_for(model=backend.model, file=config.tuning_file),
        temperature=config.temperature,
        permutations=config.permutations,
        debias=None if config.debias == "auto" else config.debias == "on",
    )
    return Evaluator(
        backend=backend,
        labels=labels_build(tokenizer=tokenizer, count=config.max_answers, ending=prompt_ending(tokenizer=tokenizer)),
        budget=Budget(
            max_input_tokens=min(config.max_input_tokens, backend.context_tokens or config.max_input_tokens),
            max_total_input_tokens=config.max_total_input_tokens,
        ),
        scoring=Scoring(confidence=config.confidence, tuning=tuning),
        gate=AdmissionGate(config.max_concurrent_requests),
        timeout=config.request_timeout,
        priors=Priors(prefix_ids=content_free_prefix(tokenizer=tokenizer)) if tuning.debiases else None,
        vision=_vision_decide(config=config, backend=backend),
    )


def _vision_decide(*, config: OpenJevConfig, backend: Backend) -> Vision | None:
    """Images are seen only when enabled (`OPENJEV_MAX_IMAGES`), on SGLang, by a tokenizer with the vision
    markers; otherwise every image is refused with `images_not_supported`, and the log says why."""
    if not config.max_images:
        return None
    vision = vision_probe(tokenizer=backend.tokenizer()) if backend.kind == "sglang" else None
    if vision is None:
        reason = "no vision tokens in its tokenizer" if backend.kind == "sglang" else "the llama.cpp engine"
        log.warning(
            "OPENJEV_MAX_IMAGES=%d, but %s cannot see images (%s): images are refused",
            config.max_images,
            backend.model,
            reason,
        )
    return vision


def _load() -> None:
    try:
        evaluator = evaluator_build(config=settings.OPENJEV)
    except BaseException as exc:  # recorded and reported by every request, never lost in a thread
        log.exception("engine startup failed")
        _slot.error = exc
        return
    _slot.startup_seconds = time.perf_counter() - (_slot.started or time.perf_counter())
    _slot.evaluator = evaluator
    log.info(
        "evaluator ready: %s backend, model %s, %.2f s",
        evaluator.backend.kind,
        evaluator.backend.model,
        _slot.startup_seconds,
    )


def evaluator_start() -> None:
    """Start building in the background (idempotent)."""
    with _lock:
        if _slot.thread is None and _slot.evaluator is None:
            _slot.started = time.perf_counter()
            _slot.thread = threading.Thread(target=_load, name="openjev-evaluator", daemon=True)
            _slot.thread.start()


def evaluator_current() -> Evaluator | None:
    """The evaluator if it is ready, without waiting (health checks)."""
    if _slot.evaluator is None:
        evaluator_start()
    return _slot.evaluator


def evaluator_ready() -> Evaluator | None:
    """The evaluator if it is built, without starting a build (bookkeeping, e.g. storing a 422)."""
    return _slot.evaluator


def evaluator_status() -> tuple[Evaluator | None, float | None, BaseException | None]:
    return evaluator_current(), _slot.startup_seconds, _slot.error


async def evaluator_get() -> Evaluator:
    """The evaluator, waiting for it to finish building; a failed startup is a 503 for every request."""
    evaluator = evaluator_current()
    if evaluator is not None:
        return evaluator
    thread = _slot.thread
    if thread is not None:
        await asyncio.to_thread(thread.join, settings.OPENJEV.request_timeout)
    if _slot.evaluator is not None:
        return _slot.evaluator
    if _slot.error is not None:
        raise BackendUnavailable(f"the engine failed to start: {_slot.error}")
    raise BackendUnavailable("the engine is still starting")


def evaluator_install(evaluator: Evaluator | None, *, startup_seconds: float = 0.0) -> None:
    """Use an evaluator built elsewhere (tests, `serve --connect`); None resets the process to unbuilt."""
    with _lock:
        _slot.evaluator, _slot.error, _slot.thread = evaluator, None, None
        _slot.startup_seconds = startup_seconds if evaluator else None


STARTUP_FAILED = "the engine failed to start; the server log has the reason"
"""What `/health` (open to anyone) says about a failed start: the reason may name paths or URLs."""


def startup_error_message(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, StartupError) else f"{type(exc).__name__}: {exc}"
