"""One response contract: every operation of `/openapi.json` is driven through the real application (the fake
SGLang behind it) into each documented status, and every JSON body is compared with the schema documented for
that status field by field: no undocumented key, every required key present, every value of its documented type
(and the whole body valid JSON Schema), every required response header present and of its documented type.

Optional properties must each be shown by at least one exercised response, or be listed in `NEVER_SHOWN` with
the reason. An operation added to the document without cases here fails `test_every_documented_operation_...`;
a route served outside the document must be listed in `UNDOCUMENTED_ROUTES` with the reason.
"""

from __future__ import annotations

import asyncio
import json
import re
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
import pytest
from django.db import OperationalError
from django.urls import URLPattern, URLResolver
from jsonschema import Draft202012Validator

from api import feedback, model_views, status_views
from api.classify import answer as classify_answer
from api.classify import registry
from api.classify.openapi import CLASSIFY_REQUEST
from api.decisions import answer as decisions_answer
from api.decisions.openapi_examples import DECISIONS_CHAT_REQUEST, DECISIONS_REQUEST
from api.google.openapi import GOOGLE_REQUEST
from api.plumbing import ratelimits_store
from api.systemone import answer as systemone_answer
from fake_sglang import FakeSGLang
from inference.runner import Evaluator
from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from tests.conftest import README_REQUEST
from tests.docs.conftest import openapi
from tests.docs.contract import (
    BROTLI,
    CORRUPT_GZIP,
    KEY,
    Case,
    Ctx,
    Drive,
    Json,
    Operation,
    Reply,
    backend_dead,
    backend_failing,
    backend_slow,
    bug,
    cross_site_post,
    get_path,
    limits_unreadable,
    ok,
    overloaded,
    rate_limited,
    raw,
    stalled,
    too_large,
    unauthenticated,
)
from tests.docs.contract_batches import BATCH_CASES, BATCH_NEVER_SHOWN
from tests.google.contract_v1beta import V1BETA_CASES
from tests.stored import drained

# -- Cases of the evaluating routes ------------------------------------------------------------------------------


def _evaluating_cases(path: str, body: Json, *, classifiers: bool = False) -> list[Case]:
    """What every evaluating route answers the same way (each in its own shape)."""
    c = classifiers
    return [
        Case("a body that is not the gzip it claims", 400, raw(path, b"not gzip at all", CORRUPT_GZIP)),
        Case("no key while auth is on", 401, unauthenticated(path, body)),
        Case("a browser post from another origin", 403, cross_site_post(path, body)),
        Case("a body that stops arriving", 408, stalled(path)),
        Case("a body over max_body_bytes", 413, too_large(path)),
        Case("an unsupported Content-Encoding", 415, raw(path, json.dumps(body).encode(), BROTLI)),
        Case("over the requests per minute", 429, rate_limited(path, body, classifiers=c)),
        Case("rate limits that cannot be counted", 429, limits_unreadable(path, body, classifiers=c)),
        Case("a bug while rendering", 500, _render_bug(path, body, classifiers=c)),
        Case("the backend answers an error", 502, backend_failing(path, body, classifiers=c)),
        Case("the backend is down", 503, backend_dead(path, body, classifiers=c)),
        Case("the evaluation runs past its deadline", 504, backend_slow(path, body, classifiers=c)),
        Case("more evaluations than max_concurrent_requests", 529, overloaded(path, body, classifiers=c)),
    ]


RENDERERS = {
    "/v1/systemone": (systemone_answer, "served_render"),
    "/v1/decisions": (decisions_answer, "decided_render"),
    "/v1/classify": (classify_answer, "classified_render"),
}
"""Each route's answer module and the renderer it calls."""


def _render_bug(path: str, body: Json, *, classifiers: bool = False) -> Drive:
    module, name = RENDERERS[path]
    return bug(path, body, module, name, classifiers=classifiers)


# -- Drivers of single routes -----------------------------------------------------------------------------------


async def _feedback_200(ctx: Ctx) -> Reply:
    """Label each question type of a stored evaluation; the last label's response is checked (all must be 200)."""
    ctx.configure(store_evaluations="full")
    evaluated = await ctx.post("/v1/systemone", README_REQUEST)
    assert evaluated.status == 200, evaluated.body
    await drained()
    request_id = evaluated.headers["x-typesafe-request-id"]
    replies = [
        await ctx.post("/v1/feedback", {"request_id": request_id, "question_id": question, "label": label})
        for question, label in (("refund", True), ("anger", 2), ("team", "Billing"))
    ]
    assert [r.status for r in replies] == [200, 200, 200], [r.body for r in replies]
    return replies[-1]


async def _feedback_db_down(ctx: Ctx) -> Reply:
    def unusable(**_: Any) -> Any:
        raise OperationalError("the database is down")

    ctx.patch.setattr(feedback, "answer_find", unusable)
    return await ctx.post("/v1/feedback", FEEDBACK_BODY)


async def _classifiers_unreadable(ctx: Ctx) -> Reply:
    ctx.broken(registry, "_classifiers_fetch")
    registry.classifier_cache_forget()
    return await ctx.post("/v1/classify", CLASSIFY_REQUEST)


async def _health_auth_on_without_key(ctx: Ctx) -> Reply:
    ctx.auth_on()
    return await ctx.get("/health")


async def _health_backend_dead(ctx: Ctx) -> Reply:
    ctx.fake.dead()
    return await ctx.get("/health")


async def _models_with_classifiers(ctx: Ctx) -> Reply:
    ctx.classifiers()
    return await ctx.get("/v1/models")


FEEDBACK_BODY = {"request_id": "req_0123456789abcdef0123456789abcdef", "question_id": "team", "label": "Billing"}
DECISIONS_UNKNOWN_MODEL = {**DECISIONS_REQUEST, "model": "gpt-6-luna"}
DECISIONS_INVALID = {**DECISIONS_REQUEST, "questions": [{"type": "choice", "instructions": "?", "choices": []}]}
GOOGLE_INVALID = {
    **GOOGLE_REQUEST,
    "questions": {"team": {"type": "choice", "instructions": "?", "criteria": {"a": ""}}},
}
GOOGLE_KEY = {"x-goog-api-key": KEY}
"""Google's SDK's key header: what puts the errors before the body is read in Google's shape."""


async def _google_wrong_key(ctx: Ctx) -> Reply:
    ctx.auth_on()
    return await ctx.post("/v1/decisions", GOOGLE_REQUEST, headers={"x-goog-api-key": "not-the-key"})


async def _google_rate_limited(ctx: Ctx) -> Reply:
    ctx.configure(key_requests_per_minute=1)
    first = await ctx.post("/v1/decisions", GOOGLE_REQUEST, headers=GOOGLE_KEY)
    assert first.status == 200, first.body
    return await ctx.post("/v1/decisions", GOOGLE_REQUEST, headers=GOOGLE_KEY)


CASES: dict[Operation, list[Case]] = {
    ("post", "/v1/systemone"): [
        Case("the README request: a noul, a choice and a score", 200, ok("/v1/systemone", README_REQUEST)),
        Case(
            "questions that are invalid in several ways",
            422,
            ok("/v1/systemone", {**README_REQUEST, "questions": {"q": {"type": "box"}}, "model": "nope"}),
        ),
        Case("a body that is not JSON", 422, raw("/v1/systemone", b'{"model": ', {"Content-Type": "application/json"})),
        *_evaluating_cases("/v1/systemone", README_REQUEST),
    ],
    ("post", "/v1/decisions"): [
        Case("the README questions: a predicate, a choice and a score", 200, ok("/v1/decisions", DECISIONS_REQUEST)),
        Case("messages and tool calls; boolean choices, no names", 200, ok("/v1/decisions", DECISIONS_CHAT_REQUEST)),
        Case("every answer a refusal", 200, ok("/v1/decisions", DECISIONS_REQUEST, refusal_label_mass=1.0)),
        Case("a choice question without choices", 400, ok("/v1/decisions", DECISIONS_INVALID)),
        Case("a body that is not JSON", 400, raw("/v1/decisions", b'{"model": ', {"Content-Type": "application/json"})),
        Case("a model not served here", 404, ok("/v1/decisions", DECISIONS_UNKNOWN_MODEL)),
        *_evaluating_cases("/v1/decisions", DECISIONS_REQUEST),
        Case("Google's shape: the README questions", 200, ok("/v1/decisions", GOOGLE_REQUEST)),
        Case("Google's shape: a choice with one option", 400, ok("/v1/decisions", GOOGLE_INVALID)),
        Case(
            "Google's shape: a model not served here",
            404,
            ok("/v1/decisions", {**GOOGLE_REQUEST, "model": "models/gemini-decision-1"}),
        ),
        Case("Google's shape: a wrong x-goog-api-key", 401, _google_wrong_key),
        Case("Google's shape: over the requests per minute", 429, _google_rate_limited),
        Case("Google's shape: the backend is down", 503, backend_dead("/v1/decisions", GOOGLE_REQUEST)),
    ],
    ("post", "/v1/classify"): [
        Case("two texts, a choice classifier", 200, ok("/v1/classify", CLASSIFY_REQUEST, classifiers=True)),
        Case(
            "one text, a noul classifier",
            200,
            ok("/v1/classify", {"model": "spam", "input": "Win!"}, classifiers=True),
        ),
        Case("`input` missing", 400, ok("/v1/classify", {"model": "sentiment"}, classifiers=True)),
        Case("no classifier of that name", 404, ok("/v1/classify", {"model": "sentimnet", "input": "x"})),
        Case("the classifier table cannot be read", 503, _classifiers_unreadable),
        *_evaluating_cases("/v1/classify", CLASSIFY_REQUEST, classifiers=True),
    ],
    ("post", "/v1/feedback"): [
        Case("a label for each question type of a stored evaluation", 200, _feedback_200),
        Case("no stored answer of that id", 404, ok("/v1/feedback", FEEDBACK_BODY)),
        Case("a label missing, an unknown field", 422, ok("/v1/feedback", {"request_id": "req_x", "extra": 1})),
        Case("the database cannot be used", 503, _feedback_db_down),
        Case("a bug", 500, bug("/v1/feedback", FEEDBACK_BODY, feedback, "feedback_record")),
        Case("a body that is not the gzip it claims", 400, raw("/v1/feedback", b"not gzip", CORRUPT_GZIP)),
        Case("no key while auth is on", 401, unauthenticated("/v1/feedback", FEEDBACK_BODY)),
        Case("a browser post from another origin", 403, cross_site_post("/v1/feedback", FEEDBACK_BODY)),
        Case("a body that stops arriving", 408, stalled("/v1/feedback")),
        Case("a body over max_body_bytes", 413, too_large("/v1/feedback")),
        Case("a body not declared JSON", 415, raw("/v1/feedback", b"{}", {"Content-Type": "text/plain"})),
    ],
    ("get", "/v1/models"): [
        Case("the model names, and the classifiers", 200, _models_with_classifiers),
        Case("no key while auth is on", 401, unauthenticated("/v1/models")),
        Case("a bug", 500, bug("/v1/models", None, model_views, "wire_formats")),
    ],
    ("get", "/v1/models/{model_id}"): [
        Case("a listed model", 200, get_path("/v1/models/jev-latest")),
        Case("no key while auth is on", 401, unauthenticated("/v1/models/jev-latest")),
        Case("a name not listed", 404, get_path("/v1/models/gpt-6-luna")),
    ],
    ("get", "/v1/limits"): [
        Case("the limits", 200, get_path("/v1/limits")),
        Case("no key while auth is on", 401, unauthenticated("/v1/limits")),
        Case("a bug", 500, bug("/v1/limits", None, status_views, "images_accepted")),
    ],
    ("get", "/health"): [
        Case("ready, auth off: the model and the worker named", 200, get_path("/health")),
        Case("ready, auth on, no key: neither named", 200, _health_auth_on_without_key),
        Case("the backend does not answer", 503, _health_backend_dead),
        Case("a bug", 500, bug("/health", None, status_views, "evaluator_status")),
    ],
    ("get", "/health/live"): [Case("alive", 200, get_path("/health/live"))],
}

CASES.update(BATCH_CASES)
CASES.update(V1BETA_CASES)

NEEDS_DATABASE: set[Operation] = {("post", "/v1/feedback"), *BATCH_CASES}
"""Operations whose success needs stored evaluations: their cases run on the test database."""

UNEXERCISED: dict[Operation, dict[str, str]] = {}
"""Documented statuses no case produces, per operation, with the reason."""

NEVER_SHOWN: dict[Operation, dict[str, str]] = {**BATCH_NEVER_SHOWN}
"""Documented properties (`Component.property`) no exercised response shows, per operation, with the reason."""

UNDOCUMENTED_ROUTES = {
    "admin/": "the Django admin: HTML pages for operators, behind its own login",
    "openapi.json": "the OpenAPI document itself",
    "docs": "Swagger UI: an HTML page",
    "static/{path}": "the pages' scripts and styles",
    "": "the API reference: an HTML page",
    "v1/systemone/stream": "the System One WebSocket stream: no HTTP operation, so not in OpenAPI 3.1",
    "admin/evaluations/evaluation/dashboard/live": "the admin dashboard's live feed: a WebSocket for operators",
    "metrics": "Prometheus' text format for scrapers, not JSON (docs/observability.md; tests/observability/)",
}
"""Routes served outside the OpenAPI document, with the reason they are not in it."""


# -- The comparison --------------------------------------------------------------------------------------------

JSON_TYPES: dict[str, Callable[[Json], bool]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


@dataclass
class Contract:
    """Compares JSON values with schemas of one OpenAPI document; remembers which documented properties it saw."""

    document: dict[str, Any]
    seen: set[str] = field(default_factory=set)

    def resolve(self, schema: dict[str, Any], node: str) -> tuple[dict[str, Any], str]:
        while "$ref" in schema:
            ref = schema["$ref"]
            assert ref.startswith("#/components/schemas/"), ref
            node = ref.removeprefix("#/components/schemas/")
            schema = self.document["components"]["schemas"][node]
        return schema, node

    def validator(self, schema: dict[str, Any]) -> Draft202012Validator:
        return Draft202012Validator({**schema, "components": self.document["components"]})

    def mismatches(self, value: Json, schema: dict[str, Any], *, node: str, at: str = "body") -> list[str]:
        """Every way `value` differs from `schema`: JSON Schema errors, then field by field."""
        found = [f"{at}{_where(e.absolute_path)}: {e.message}" for e in self.validator(schema).iter_errors(value)]
        return found + self.walk(value, schema, node=node, at=at)

    def walk(
        self, value: Json, schema: dict[str, Any], *, node: str, at: str, also: frozenset[str] = frozenset()
    ) -> list[str]:
        schema, node = self.resolve(schema, node)
        found: list[str] = []
        members = schema.get("allOf", [])
        names = also | {name for member in members for name in self.resolve(member, node)[0].get("properties", {})}
        for member in members:
            found += self.walk(value, member, node=node, at=at, also=names | set(schema.get("properties", {})))
        for union in ("oneOf", "anyOf"):
            if union in schema:
                chosen = self.member(value, schema, union, node=node, at=at)
                if isinstance(chosen, str):
                    return [*found, chosen]
                found += self.walk(value, chosen[0], node=chosen[1], at=at, also=also)
        types = schema.get("type")
        if types is not None:
            allowed = [types] if isinstance(types, str) else list(types)
            if not any(JSON_TYPES[t](value) for t in allowed):
                return [*found, f"{at}: {_json_type(value)} where the schema says {'/'.join(allowed)}"]
        if schema.get("format") == "date-time" and isinstance(value, str) and not _is_datetime(value):
            found.append(f"{at}: {value!r} is not a date-time with its offset")
        if isinstance(value, dict):
            found += self.walk_object(value, schema, node=node, at=at, also=also)
        if isinstance(value, list) and "items" in schema:
            for index, item in enumerate(value):
                found += self.walk(item, schema["items"], node=f"{node}[]", at=f"{at}[{index}]")
        return found

    def walk_object(
        self, value: dict[str, Any], schema: dict[str, Any], *, node: str, at: str, also: frozenset[str]
    ) -> list[str]:
        found: list[str] = []
        properties: dict[str, Any] = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        for name in schema.get("required", []):
            if name not in value:
                found.append(f"{at}: the required field {name!r} is missing")
        for name, item in value.items():
            if name in properties:
                self.seen.add(f"{node}.{name}")
                found += self.walk(item, properties[name], node=f"{node}.{name}", at=f"{at}.{name}")
            elif isinstance(additional, dict):
                found += self.walk(item, additional, node=f"{node}{{}}", at=f"{at}[{name!r}]")
            elif (properties or also or additional is False) and name not in also:
                found.append(f"{at}: the field {name!r} is not documented")
        return found

    def member(
        self, value: Json, schema: dict[str, Any], union: str, *, node: str, at: str
    ) -> tuple[dict[str, Any], str] | str:
        """The union member `value` is (by the discriminator when there is one), or what is wrong."""
        discriminator = schema.get("discriminator")
        if discriminator and isinstance(value, dict):
            kind = value.get(discriminator["propertyName"])
            target = discriminator.get("mapping", {}).get(kind)
            if target is None:
                return f"{at}: {discriminator['propertyName']}={kind!r} is none of the documented kinds"
            return self.resolve({"$ref": target}, node)
        fitting = [m for m in schema[union] if self.validator(m).is_valid(value)]
        if not fitting or (union == "oneOf" and len(fitting) > 1):
            return f"{at}: {len(fitting)} of the {union} members fit"
        return self.resolve(fitting[0], node)

    def properties(self, schema: dict[str, Any], *, node: str, visited: set[str] | None = None) -> set[str]:
        """Every property reachable from `schema` (union members, items and maps included), as `node.name`."""
        visited = set() if visited is None else visited
        schema, node = self.resolve(schema, node)
        if node in visited:
            return set()
        visited.add(node)
        found: set[str] = set()
        for key in ("allOf", "oneOf", "anyOf"):
            for member in schema.get(key, []):
                found |= self.properties(member, node=node, visited=visited)
        for name, item in schema.get("properties", {}).items():
            found.add(f"{node}.{name}")
            found |= self.properties(item, node=f"{node}.{name}", visited=visited)
        if isinstance(schema.get("items"), dict):
            found |= self.properties(schema["items"], node=f"{node}[]", visited=visited)
        if isinstance(schema.get("additionalProperties"), dict):
            found |= self.properties(schema["additionalProperties"], node=f"{node}{{}}", visited=visited)
        return found


def _where(path: Any) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _json_type(value: Json) -> str:
    return next(
        name
        for name in ("null", "boolean", "integer", "number", "string", "array", "object")
        if JSON_TYPES[name](value)
    )


def _is_datetime(text: str) -> bool:
    try:
        return datetime.fromisoformat(text).tzinfo is not None
    except ValueError:
        return False


def header_mismatches(contract: Contract, reply: Reply, documented: dict[str, Any]) -> list[str]:
    """Required headers missing, and documented headers whose value is not of the documented type."""
    found: list[str] = []
    for name, header in documented.items():
        value = reply.headers.get(name)
        if value is None:
            if header.get("required"):
                found.append(f"header {name}: required, missing")
            continue
        schema = header.get("schema", {})
        typed: Json = value
        if schema.get("type") == "integer":
            try:
                typed = int(value)
            except ValueError:
                found.append(f"header {name}: {value!r} is not an integer")
                continue
        found += contract.mismatches(typed, schema, node=f"header {name}", at=f"header {name}")
    return found


JSONL = "application/jsonl"


def _body_read(body: bytes, *, media: str) -> Json:
    """The body as its documented media type says: JSON, or JSONL (a text whose every line is JSON)."""
    if media != JSONL:
        return json.loads(body)
    text = body.decode()
    for line in text.splitlines():
        json.loads(line)
    return text


def reply_mismatches(contract: Contract, operation: dict[str, Any], case: Case, reply: Reply) -> list[str]:
    """How `reply` differs from what `operation` documents for `case`'s status."""
    if reply.status != case.status:
        return [f"answered {reply.status}, not {case.status}: {reply.body[:300]!r}"]
    response = operation["responses"].get(str(reply.status))
    if response is None:
        return [f"{reply.status} is not documented for this operation"]
    media = reply.headers.get("content-type", "").partition(";")[0].strip()
    if media not in response.get("content", {}):
        return [f"content type {media!r}, documented: {sorted(response.get('content', {}))}"]
    try:
        body = _body_read(reply.body, media=media)
    except ValueError as exc:
        return [f"the body is not {media} ({exc}): {reply.body[:300]!r}"]
    schema = response["content"][media]["schema"]
    return contract.mismatches(body, schema, node="response") + header_mismatches(
        contract, reply, response.get("headers", {})
    )


# -- The tests -------------------------------------------------------------------------------------------------


def _operations(document: dict[str, Any]) -> set[Operation]:
    methods = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
    return {(method, path) for path, item in document["paths"].items() for method in item if method in methods}


def _patterns_of(patterns: Iterable[Any], prefix: str = "") -> Iterator[str]:
    """Every route's path, with Django's converters as OpenAPI's parameters; an included list's routes under its
    prefix (the admin's stays one route)."""
    for pattern in patterns:
        assert isinstance(pattern, URLPattern | URLResolver)
        path = prefix + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", str(pattern.pattern))
        if isinstance(pattern, URLResolver) and not path:
            yield from _patterns_of(pattern.url_patterns, path)
        else:
            yield path


def _route_patterns() -> Iterator[str]:
    from openjev_site import sockets, urls

    yield from _patterns_of(urls.urlpatterns)
    for name in ("STREAM_PATH", "DASHBOARD_LIVE_PATH"):
        yield str(getattr(sockets, name))


async def test_every_documented_operation_has_contract_cases_and_every_route_is_documented_or_excused(
    api: httpx.AsyncClient,
) -> None:
    document = await openapi(api)
    assert _operations(document) == set(CASES), "each operation of /openapi.json needs its cases in CASES"
    documented = {path.removeprefix("/") for path in document["paths"]}
    routes = set(_route_patterns())
    assert routes - documented == set(UNDOCUMENTED_ROUTES), "a route neither documented nor in UNDOCUMENTED_ROUTES"
    assert documented <= routes


def _operation_params() -> list[Any]:
    return [
        pytest.param(
            operation,
            id=f"{operation[0].upper()} {operation[1]}",
            marks=[pytest.mark.django_db(transaction=True)] if operation in NEEDS_DATABASE else [],
        )
        for operation in CASES
    ]


async def _isolated(case: Case, *, api: httpx.AsyncClient, fake: FakeSGLang, settings: Any) -> Reply:
    """Run one case with the deployment as configured, fresh rate-limit counts and classifiers, then undo it."""
    saved = settings.OPENJEV
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ratelimits_store, "_loops", weakref.WeakKeyDictionary())
        patch.setattr(ratelimits_store, "_outage", {"logged": False, "until": 0.0})
        registry.classifier_cache_forget()
        evaluator_install(fake_evaluator(fake))
        try:
            return await case.drive(Ctx(api=api, fake=fake, patch=patch, settings=settings))
        finally:
            settings.OPENJEV = saved
            if fake.listening:
                await asyncio.to_thread(fake.wait_idle, 5)
            else:
                fake.revive()
            fake.reset()
            registry.classifier_cache_forget()
            evaluator_install(fake_evaluator(fake))


@pytest.mark.parametrize("operation", _operation_params())
async def test_each_documented_status_answers_exactly_its_documented_body_and_headers(
    operation: Operation, api: httpx.AsyncClient, fake: FakeSGLang, evaluator: Evaluator, settings: Any
) -> None:
    document = await openapi(api)
    method, path = operation
    documented = document["paths"][path][method]
    contract = Contract(document)
    problems: list[str] = []
    for case in CASES[operation]:
        reply = await _isolated(case, api=api, fake=fake, settings=settings)
        problems += [f"{case.status} {case.name}: {p}" for p in reply_mismatches(contract, documented, case, reply)]

    exercised = {str(case.status) for case in CASES[operation]}
    excused = UNEXERCISED.get(operation, {})
    problems += [
        f"{s}: documented, never produced, not in UNEXERCISED"
        for s in set(documented["responses"]) - exercised - set(excused)
    ]
    problems += [f"{s}: in UNEXERCISED but produced or not documented" for s in set(excused) & exercised]
    reachable: set[str] = set()
    for status in exercised & set(documented["responses"]):
        for media in documented["responses"][status]["content"].values():
            reachable |= contract.properties(media["schema"], node="response")
    never = NEVER_SHOWN.get(operation, {})
    problems += [
        f"{p}: documented, shown by no response, not in NEVER_SHOWN"
        for p in sorted(reachable - contract.seen - set(never))
    ]
    problems += [f"{p}: in NEVER_SHOWN but shown" for p in sorted(set(never) & contract.seen)]
    assert not problems, "\n".join(problems)


# -- The comparison catches what it is for ------------------------------------------------------------------------

HEALTH = {"status": "ok", "backend": "sglang", "startup_seconds": 1.5}


@pytest.mark.parametrize(
    "body, mismatch",
    [
        ({**HEALTH, "extra": 1}, "the field 'extra' is not documented"),
        ({"status": "ok", "backend": "sglang"}, "the required field 'startup_seconds' is missing"),
        ({**HEALTH, "worker_pid": "4242"}, "body.worker_pid: string where the schema says integer"),
        ({**HEALTH, "startup_seconds": True}, "body.startup_seconds: boolean where the schema says number/null"),
        ({**HEALTH, "status": "fine"}, "'fine' is not one of"),
    ],
)
async def test_the_comparison_reports_an_undocumented_missing_or_mistyped_field(
    api: httpx.AsyncClient, body: dict[str, Any], mismatch: str
) -> None:
    contract = Contract(await openapi(api))
    found = contract.mismatches(body, {"$ref": "#/components/schemas/Health"}, node="response")
    assert any(mismatch in line for line in found), found
    assert contract.mismatches(HEALTH, {"$ref": "#/components/schemas/Health"}, node="response") == []


async def test_the_comparison_follows_refs_allof_and_discriminated_unions_into_nested_fields(
    api: httpx.AsyncClient,
) -> None:
    contract = Contract(await openapi(api))
    body = {
        "model": "jev-latest",
        "answers": {"q": {"type": "noul", "noul": 0.5, "confidence": 0.1}},
        "usage": {"input_tokens": 3, "output_tokens": 2, "cost": 0},
    }
    found = contract.mismatches(body, {"$ref": "#/components/schemas/SystemOneResponse"}, node="response")
    assert "body.answers['q']: the field 'confidence' is not documented" in found
    assert "body.usage: the field 'cost' is not documented" in found
    assert {"NoulAnswer.noul", "Usage.input_tokens"} <= contract.seen


async def test_a_reply_missing_a_required_header_or_in_an_undocumented_status_is_reported(
    api: httpx.AsyncClient,
) -> None:
    document = await openapi(api)
    contract = Contract(document)
    operation = document["paths"]["/health"]["get"]
    body = json.dumps({**HEALTH, "status": "unavailable", "message": "starting"}).encode()
    json_headers = {"content-type": "application/json"}
    no_retry_after = Reply(503, httpx.Headers({**json_headers, "x-typesafe-request-id": "req_1"}), body)
    assert reply_mismatches(contract, operation, Case("x", 503, get_path("/health")), no_retry_after) == [
        "header Retry-After: required, missing"
    ]
    teapot = Reply(418, httpx.Headers(json_headers), body)
    assert reply_mismatches(contract, operation, Case("x", 418, get_path("/health")), teapot) == [
        "418 is not documented for this operation"
    ]
