"""One response contract: every operation of `/openapi.json` is driven through the real application (the fake
SGLang behind it) into each documented status, and every JSON body is compared with the schema documented for
that status field by field: no undocumented key, every required key present, every value of its documented type
(and the whole body valid JSON Schema), every required response header present and of its documented type.

Optional properties must each be shown by at least one exercised response, or be listed in `NEVER_SHOWN` with
the reason. Each wire format and route family supplies its cases beside its own tests (`tests/<format>/contract.py`,
merged into `CASES`); an operation added to the document without cases fails `test_every_documented_operation_...`;
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
from django.urls import URLPattern, URLResolver
from jsonschema import Draft202012Validator

from api.classify import registry
from api.plumbing import ratelimits_store
from fake_sglang import FakeSGLang
from inference.runner import Evaluator
from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from tests.api.contract import SHARED_ROUTE_CASES, SYSTEMONE_CASES
from tests.batches.contract import BATCH_CASES, BATCH_NEVER_SHOWN
from tests.classify.contract import CLASSIFY_CASES
from tests.decisions.contract import DECISIONS_CASES
from tests.docs.conftest import openapi
from tests.docs.contract import Case, Ctx, Json, Operation, Reply, cases_merged, get_path
from tests.google.contract import GOOGLE_CASES

CASES = cases_merged(SYSTEMONE_CASES, DECISIONS_CASES, GOOGLE_CASES, CLASSIFY_CASES, BATCH_CASES, SHARED_ROUTE_CASES)
"""Every operation's cases, as each wire format and route family supplies them beside its own tests."""

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
