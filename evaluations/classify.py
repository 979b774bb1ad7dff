"""`POST /v1/classify`: saved classifiers, answered by the same core as `POST /v1/systemone`.

SGLang and vLLM serve fine-tuned sequence-classification models at `POST /v1/classify`, and teams
have clients and pipelines for that shape. Here a classifier is a question saved in the admin (a
name, instructions and ordered labels: in effect a saved `choice`, `noul` or `score` question), so
those clients get LLM-backed classification with no fine-tuned model at all. Each input text is the
state of one plan (warm-up + one branch, exactly as a one-question System One call), and all inputs
of a request run concurrently under *one* admission: a 10-input request takes one slot of
`MAX_CONCURRENT_REQUESTS`, not ten, and is bounded instead by `MAX_CLASSIFY_INPUTS` and the token
budgets (summed over its inputs).

Classifiers are read through a small in-process cache (`CACHE_SECONDS`): the hot path makes at most
one database query every few seconds, and a save in the admin drops the cache at once in that
process (other processes see it within `CACHE_SECONDS`). The query runs in a worker thread that
closes its connection afterwards, as API key look-ups do (`evaluations/keys.py`): the lean API
handler has no per-request connection cleanup, and no thread may keep a connection open between
look-ups (PostgreSQL could not drop a test database, and idle connections add up across workers).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connections
from django.utils import timezone

from evaluations.engine import engine_get, engine_ready
from evaluations.errors import ApiError
from evaluations.parsing import document_problems
from evaluations.services import label_mass_check
from evaluations.storage import evaluation_store
from inference.errors import RequestInvalid
from inference.prompts import Plan, plan_compile
from inference.questions import Question, QuestionType, question_build
from inference.runner import OFF_LOOP_CHARACTERS, Engine, Outcome, Timings, Usage, plan_run, text_size

if TYPE_CHECKING:
    from evaluations.models import Classifier

log = logging.getLogger(__name__)

CACHE_SECONDS = 5.0
NOUL_LABELS = ("true", "false")
INVALID_NAME = "(invalid)"  # stored as the classifier of a request whose `model` is missing or not a string
CLASSIFIER_TYPES: tuple[QuestionType, ...] = ("choice", "noul", "score")


# ---------------------------------------------------------------------------------------------------
# Classifiers: definitions, validation, the cached registry
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassifierSpec:
    """A classifier as the API serves it: built from a `Classifier` row and its labels.

    `labels` are the names returned in `probs` order; `question` is what the model is asked;
    `definition` is that question as a System One question object, stored with each classification
    so the audit shows what the model saw even after the classifier changes. A classifier whose
    labels break the rules (possible only outside the admin) has `problem` set and no question.
    """

    id: int | None
    name: str
    type: QuestionType
    description: str
    labels: tuple[str, ...]
    question: Question | None
    definition: dict[str, Any]
    problem: str = ""


def classifier_problems(*, type: str, labels: Sequence[str], max_answers: int) -> list[str]:
    """What makes a label set unservable, in words for the admin form and the logs (empty: fine).

    The limits are the API's: a choice or score needs 2 to `max_answers` labels, as a System One
    question does; a noul classifier always answers `true`/`false`, so its rows may only reword those.
    """
    problems = []
    if type not in CLASSIFIER_TYPES:
        return [f"unknown type {type!r}; use one of {', '.join(CLASSIFIER_TYPES)}"]
    blank = sum(1 for name in labels if not name.strip())
    if blank:
        problems.append("label names must not be blank")
    duplicates = sorted({name for name in labels if labels.count(name) > 1})
    if duplicates:
        problems.append(f"label names must be unique; repeated: {', '.join(duplicates)}")
    if type == "noul":
        others = [name for name in labels if name not in NOUL_LABELS]
        if others:
            problems.append(f"a noul classifier's labels are 'true' and 'false' (rows only reword them); "
                            f"not allowed: {', '.join(others)}")
    elif not 2 <= len(labels) <= max_answers:
        problems.append(f"a {type} classifier needs 2 to {max_answers} labels, got {len(labels)}")
    return problems


def classifier_spec_build(*, id: int | None, name: str, type: str, description: str, instructions: str,
                          labels: Sequence[tuple[str, str]], max_answers: int) -> ClassifierSpec:
    """The served form of a classifier; `labels` are (name, description) pairs in order.

    A blank description shows the label name to the model (a choice's null description); otherwise
    the model reads only the description, as with System One option keys.
    """
    problems = classifier_problems(type=type, labels=[n for n, _ in labels], max_answers=max_answers)
    qtype: QuestionType = type if type in CLASSIFIER_TYPES else "choice"  # type: ignore[assignment]
    if problems:
        return ClassifierSpec(id=id, name=name, type=qtype, description=description,
                              labels=tuple(n for n, _ in labels), question=None, definition={},
                              problem="; ".join(problems))
    text = instructions or None
    criteria: Any
    if qtype == "noul":
        worded = dict(labels)
        criteria = {side: worded.get(side) or None for side in NOUL_LABELS}
        names: tuple[str, ...] = NOUL_LABELS
    elif qtype == "choice":
        criteria = {n: (d or None) for n, d in labels}
        names = tuple(criteria)
    else:
        criteria = [d or n for n, d in labels]
        names = tuple(n for n, _ in labels)
    return ClassifierSpec(
        id=id, name=name, type=qtype, description=description, labels=names,
        question=question_build(id=name, type=qtype, instructions=text, criteria=criteria),
        definition={"type": qtype, "instructions": text, "criteria": criteria})


@dataclass(frozen=True)
class _Snapshot:
    at: float
    classifiers: dict[str, ClassifierSpec]


_snapshot: _Snapshot | None = None
_generation = 0  # bumped by every forget, so a fetch that started before a save cannot install old rows
_lock = threading.Lock()
_fetch_lock = threading.Lock()


def classifier_cache_forget() -> None:
    """Drop the cached classifiers (admin saves and deletes, tests) so the next request reads the database."""
    global _snapshot, _generation
    with _lock:
        _snapshot = None
        _generation += 1


def classifier_spec_of(*, row: Classifier) -> ClassifierSpec:
    """The served form of a saved classifier (its labels prefetched, or one query for them)."""
    return classifier_spec_build(id=row.pk, name=row.name, type=row.type, description=row.description,
                                 instructions=row.instructions,
                                 labels=[(label.name, label.description) for label in row.labels.all()],
                                 max_answers=settings.OPENJEV.max_answers)


def _classifiers_fetch() -> dict[str, ClassifierSpec]:
    """Every classifier with its labels (sync ORM, in a worker thread that closes its connection)."""
    from evaluations.models import Classifier

    try:
        rows = list(Classifier.objects.prefetch_related("labels"))
    finally:
        connections.close_all()
    found = {}
    for row in rows:
        spec = classifier_spec_of(row=row)
        if spec.problem:
            log.warning("classifier %r cannot be served: %s", row.name, spec.problem)
        found[row.name] = spec
    return found


def _snapshot_load() -> dict[str, ClassifierSpec]:
    """One fetch at a time: requests that waited for it find the fresh snapshot instead of querying again."""
    global _snapshot
    with _fetch_lock:
        with _lock:
            snapshot, generation = _snapshot, _generation
        if snapshot is not None and time.monotonic() - snapshot.at < CACHE_SECONDS:
            return snapshot.classifiers
        found = _classifiers_fetch()
        with _lock:
            if generation == _generation:
                _snapshot = _Snapshot(at=time.monotonic(), classifiers=found)
        return found


async def classifiers_get() -> dict[str, ClassifierSpec]:
    """Name → classifier, at most `CACHE_SECONDS` old; raises whatever the database raises."""
    snapshot = _snapshot
    if snapshot is not None and time.monotonic() - snapshot.at < CACHE_SECONDS:
        return snapshot.classifiers
    return await asyncio.to_thread(_snapshot_load)


async def classifier_names_list() -> list[str]:
    """Servable classifier names for `GET /v1/models`; a database outage lists none rather than failing
    the model list, which Jev clients need whatever the state of the classifiers."""
    try:
        classifiers = await classifiers_get()
    except Exception:
        log.warning("could not read classifiers for /v1/models", exc_info=True)
        return []
    return [name for name, spec in classifiers.items() if not spec.problem]


def _is_language_model(name: str) -> bool:
    config = settings.OPENJEV
    return name in (config.model_alias, config.model, config.served_model_name) or name.startswith("jev-")


async def classifier_find(*, name: str) -> ClassifierSpec:
    """The classifier called `name`: 404 when there is none (or it cannot be served), 503 when the
    database cannot be read (retryable, like an API key that cannot be checked)."""
    try:
        classifiers = await classifiers_get()
    except Exception:
        log.exception("could not read classifiers")
        raise ApiError(503, "service_unavailable", "classifiers cannot be read right now; retry shortly",
                       {"Retry-After": "5"}) from None
    spec = classifiers.get(name)
    if spec is None:
        if _is_language_model(name):
            raise ApiError(404, "not_found", f"{name!r} is a language model, not a classifier: POST /v1/classify "
                                             "serves classifiers defined in the admin (GET /v1/models lists them "
                                             "after the model names); use POST /v1/systemone for the model itself")
        raise ApiError(404, "not_found", f"no classifier named {name!r}; GET /v1/models lists them after the "
                                         "model names")
    if spec.problem:
        raise ApiError(404, "not_found", f"classifier {name!r} cannot be served: {spec.problem}; fix it in the admin")
    return spec


# ---------------------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassifyRequest:
    model: str
    inputs: tuple[str, ...]


def _kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def classify_request_parse(*, data: Any, max_inputs: int) -> ClassifyRequest:
    """`{"model": name, "input": text | [texts]}`; every problem found, as one 400. Other fields are
    ignored (clients send `user`, `rid`, `priority`, ...). Token ids as input are not supported: the
    classifier's prompt is built around the text, with the served model's own tokenizer."""
    invalid = document_problems(data=data)
    if invalid:
        raise ApiError(400, "invalid_request", str(RequestInvalid(invalid)))
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_request", f"the body must be a JSON object, got {_kind(data)}")
    problems = []
    model = data.get("model")
    if "model" not in data:
        problems.append("`model` is required: the name of a classifier (GET /v1/models lists them)")
    elif not isinstance(model, str) or not model:
        problems.append(f"`model` must be a non-empty string, got {_kind(model)}")
    texts = data.get("input")
    inputs: tuple[str, ...] = ()
    if "input" not in data:
        problems.append("`input` is required: a text, or a list of texts")
    elif isinstance(texts, str):
        inputs = (texts,)
    elif not isinstance(texts, list):
        problems.append(f"`input` must be a string or a list of strings, got {_kind(texts)}")
    elif not texts:
        problems.append("`input` must not be an empty list")
    elif len(texts) > max_inputs:
        problems.append(f"`input` has {len(texts)} texts; at most {max_inputs} are allowed per request")
    else:
        wrong = [f"input[{i}] is {_kind(t)}" for i, t in enumerate(texts) if not isinstance(t, str)]
        if wrong:
            problems.append("`input` must be a list of strings (token ids are not supported): "
                            + ", ".join(wrong[:5]) + (", …" if len(wrong) > 5 else ""))
        else:
            inputs = tuple(texts)
    if problems:
        raise ApiError(400, "invalid_request", "; ".join(problems))
    return ClassifyRequest(model=str(model), inputs=inputs)


# ---------------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassifyItem:
    index: int
    label: str
    probs: tuple[float, ...]


@dataclass(frozen=True)
class Classified:
    """One answered classification request: per-input results and the merged outcome that is stored."""

    request_id: str
    created: int
    classifier: ClassifierSpec
    served_model: str
    items: tuple[ClassifyItem, ...]
    outcome: Outcome

    def body(self) -> dict[str, Any]:
        """The SGLang / vLLM response: `usage.prompt_tokens` counts every token the backend read
        (warm-ups and branches, cache hits included); no tokens are generated for the caller."""
        tokens = self.outcome.usage.input_tokens
        return {
            "id": self.request_id,
            "object": "list",
            "created": self.created,
            "model": self.classifier.name,
            "data": [{"index": item.index, "label": item.label, "probs": list(item.probs),
                      "num_classes": len(item.probs)} for item in self.items],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0,
                      "prompt_tokens_details": None},
        }


def classify_id_new() -> str:
    """`classify-<hex>` like SGLang's ids; also the stored evaluation's request id."""
    return f"classify-{uuid.uuid4().hex}"


def _plans_compile(*, engine: Engine, question: Question, inputs: Sequence[str]) -> list[tuple[Plan, float]]:
    """One plan per input, with its compile time; every budget problem of every input as one 400,
    before any backend call. The total budget applies to the request, over all its inputs."""
    tokenizer = engine.backend.tokenizer()
    compiled, problems = [], []
    for i, text in enumerate(inputs):
        started = time.perf_counter()
        try:
            plan = plan_compile(state=text, questions=(question,), tokenizer=tokenizer, labels=engine.labels,
                                budget=engine.budget, permutations=engine.scoring.permutations)
        except RequestInvalid as exc:
            problems.append(f"input[{i}] is too long: " + "; ".join(p.msg for p in exc.problems))
            continue
        compiled.append((plan, (time.perf_counter() - started) * 1000.0))
    if problems:
        raise ApiError(400, "invalid_request", "; ".join(problems))
    total = sum(plan.input_tokens for plan, _ in compiled)
    if total > engine.budget.max_total_input_tokens:
        raise ApiError(400, "invalid_request", f"the request needs {total} input tokens over all inputs, over the "
                                               f"limit of {engine.budget.max_total_input_tokens}; send fewer or "
                                               "shorter texts per request")
    return compiled


async def _plans_run(*, engine: Engine, compiled: Sequence[tuple[Plan, float]]) -> list[Outcome]:
    """Every plan concurrently; the first failure (or the client hanging up) cancels the others, and
    each cancelled plan aborts its own backend requests (`plan_run`)."""
    tasks = [asyncio.ensure_future(plan_run(plan=plan, backend=engine.backend, scoring=engine.scoring,
                                            timeout=engine.timeout, priors=engine.priors, prepare_ms=prepare_ms))
             for plan, prepare_ms in compiled]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    failed = next((t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None), None)
    if failed is not None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        error = failed.exception()
        assert error is not None
        raise error
    return [task.result() for task in tasks]


def _outcomes_merge(outcomes: Sequence[Outcome]) -> Outcome:
    """One outcome for the request, as stored: answers in input order, tokens summed (prefix tokens too:
    each input has its own prefix), prefill and branch times the slowest input's (they overlap)."""
    cached = [o.cached_tokens for o in outcomes]
    return Outcome(
        answers=tuple(o.answers[0] for o in outcomes),
        usage=Usage(input_tokens=sum(o.usage.input_tokens for o in outcomes),
                    output_tokens=sum(o.usage.output_tokens for o in outcomes)),
        prefix_tokens=sum(o.prefix_tokens for o in outcomes),
        cached_tokens=None if any(c is None for c in cached) else sum(c for c in cached if c is not None),
        timings=Timings(prepare_ms=sum(o.timings.prepare_ms for o in outcomes),
                        prefill_ms=max(o.timings.prefill_ms for o in outcomes),
                        branches_ms=max(o.timings.branches_ms for o in outcomes)),
        generations=sum(o.generations for o in outcomes),
    )


async def classifier_evaluate(*, engine: Engine, classifier: ClassifierSpec, inputs: Sequence[str]) -> Outcome:
    """Admit once (529), compile (400 on budgets; off the event loop when the inputs are long), run every
    input concurrently (504/502/503)."""
    question = classifier.question
    assert question is not None, "classifier_find never returns an unservable classifier"
    with engine.gate.admit():
        if text_size(value=list(inputs), limit=OFF_LOOP_CHARACTERS) > OFF_LOOP_CHARACTERS:
            compiled = await asyncio.to_thread(_plans_compile, engine=engine, question=question, inputs=inputs)
        else:
            compiled = _plans_compile(engine=engine, question=question, inputs=inputs)
        outcomes = await _plans_run(engine=engine, compiled=compiled)
    return _outcomes_merge(outcomes)


def _stored_data(data: Any, classifier: ClassifierSpec | None) -> Any:
    """The request as storage keeps it: the input(s) as the state and the classifier's question as it
    was asked (so the audit shows what the model saw even after the classifier is edited)."""
    if not isinstance(data, dict):
        return data
    stored: dict[str, Any] = {"model": data.get("model"), "state": data.get("input")}
    if classifier is not None:
        stored["questions"] = {classifier.name: classifier.definition}
    return stored


async def classify_run(*, data: Any, request_id: str, api_key: str | None,
                       classifier: ClassifierSpec | None = None) -> Classified:
    """Validate (400), find the classifier (404), evaluate every input on the process's engine.

    Like `systemone_evaluate`, every call is handed to `evaluation_store`, answered or failed, linked
    to its classifier; storing never raises and never waits for the database. The admin's "try it"
    passes the `classifier` it shows (read fresh from the database) instead of the cached one.
    """
    config = settings.OPENJEV
    created_at = timezone.now()
    started = time.perf_counter()
    engine: Engine | None = None
    given, classifier = classifier, None
    # Recorded even for a request without a usable name, so the row still reads as a classification.
    name: str = data["model"] if isinstance(data, dict) and isinstance(data.get("model"), str) else ""
    name = name or INVALID_NAME
    try:
        request = classify_request_parse(data=data, max_inputs=config.max_classify_inputs)
        if given is not None and given.problem:
            raise ApiError(404, "not_found", f"classifier {given.name!r} cannot be served: {given.problem}")
        classifier = given if given is not None else await classifier_find(name=request.model)
        engine = await engine_get()
        outcome = await classifier_evaluate(engine=engine, classifier=classifier, inputs=request.inputs)
    except (Exception, asyncio.CancelledError) as exc:
        engine = engine or engine_ready()
        evaluation_store(request_id=request_id, created_at=created_at, api_key=api_key,
                         data=_stored_data(data, classifier), served_model=engine.backend.model if engine else "",
                         backend=engine.backend.kind if engine else config.backend,
                         total_ms=(time.perf_counter() - started) * 1000.0, error=exc,
                         classifier_id=classifier.id if classifier else None, classifier_name=name)
        raise
    evaluation_store(request_id=request_id, created_at=created_at, api_key=api_key,
                     data=_stored_data(data, classifier), served_model=engine.backend.model,
                     backend=engine.backend.kind, total_ms=(time.perf_counter() - started) * 1000.0,
                     outcome=outcome, classifier_id=classifier.id, classifier_name=name)
    label_mass_check(outcome=outcome, request_id=request_id)
    items = tuple(ClassifyItem(index=i, label=classifier.labels[answer.choice_index],
                               probs=answer.probabilities)
                  for i, answer in enumerate(outcome.answers))
    return Classified(request_id=request_id, created=int(created_at.timestamp()), classifier=classifier,
                      served_model=engine.backend.model, items=items, outcome=outcome)
