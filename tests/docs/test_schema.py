"""`/openapi.json`: what it documents, and that what it documents is true (examples evaluate, shapes match)."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema

from api.openapi import document as openapi_document
from api.openapi.fields import ERROR_TYPES
from api.systemone.examples import README_REQUEST
from tests.conftest import README_REQUEST as TESTS_README_REQUEST
from tests.docs.conftest import component_validator, openapi

ENDPOINTS = {
    ("/v1/systemone", "post"),
    ("/v1/decisions", "post"),
    ("/v1beta/decisions", "post"),
    ("/v1/classify", "post"),
    ("/v1/feedback", "post"),
    ("/v1/models", "get"),
    ("/v1/models/{model_id}", "get"),
    ("/v1/limits", "get"),
    ("/health", "get"),
    ("/health/live", "get"),
    ("/v1/files", "post"),
    ("/v1/files", "get"),
    ("/v1/files/{file_id}", "get"),
    ("/v1/files/{file_id}", "delete"),
    ("/v1/files/{file_id}/content", "get"),
    ("/v1/batches", "post"),
    ("/v1/batches", "get"),
    ("/v1/batches/{batch_id}", "get"),
    ("/v1/batches/{batch_id}/cancel", "post"),
}
DOWNLOADS = {("/v1/files/{file_id}/content", "get")}
"""Operations whose 200 is a file (JSONL), not JSON."""
ID = "x-typesafe-request-id"
SYSTEMONE_STATUSES = {"200", "400", "401", "403", "408", "413", "415", "422", "429", "500", "502", "503", "504", "529"}
NAMED_REQUESTS = {"ReadmeRequest", "ChatTranscriptState", "Score10Levels", "StructuredState"}


def _operation(document: dict[str, Any], path: str = "/v1/systemone", method: str = "post") -> dict[str, Any]:
    operation: dict[str, Any] = document["paths"][path][method]
    return operation


async def test_the_document_is_valid_openapi_31_with_every_endpoint_and_nothing_else(api):
    document = await openapi(api)
    validate_schema(document)
    assert document["openapi"] == "3.1.0"
    assert {(path, method) for path, item in document["paths"].items() for method in item} == ENDPOINTS
    assert document["servers"] == [{"url": "/", "description": "This server"}]
    for path, method in ENDPOINTS:
        operation = _operation(document, path, method)
        assert operation["summary"] and operation["description"] and operation["tags"], (path, method)
        for status, response in operation["responses"].items():
            assert response["description"], (path, status)
            media = "application/jsonl" if status == "200" and (path, method) in DOWNLOADS else "application/json"
            assert list(response["content"]) == [media], (path, status)


async def test_questions_are_a_map_of_caller_ids_to_a_union_discriminated_by_type(api, settings):
    schemas = (await openapi(api))["components"]["schemas"]
    request = schemas["SystemOneRequest"]
    assert set(request["required"]) == {"model", "state", "questions"}
    questions = request["properties"]["questions"]
    assert questions["type"] == "object"
    assert questions["additionalProperties"] == {"$ref": "#/components/schemas/Question"}
    assert questions["propertyNames"] == {"minLength": 1}
    assert (questions["minProperties"], questions["maxProperties"]) == (1, settings.OPENJEV.max_questions)
    for union, members in (
        ("Question", ("NoulQuestion", "ChoiceQuestion", "ScoreQuestion")),
        ("Answer", ("NoulAnswer", "ChoiceAnswer", "ScoreAnswer")),
    ):
        assert schemas[union]["discriminator"] == {
            "propertyName": "type",
            "mapping": {name.removesuffix(union).lower(): f"#/components/schemas/{name}" for name in members},
        }
        assert schemas[union]["oneOf"] == [{"$ref": f"#/components/schemas/{name}"} for name in members]
        for name in members:
            assert "type" in schemas[name]["required"]
            assert schemas[name]["properties"]["type"]["const"] == name.removesuffix(union).lower()
    choice = schemas["ChoiceQuestion"]["properties"]["criteria"]
    assert (choice["minProperties"], choice["maxProperties"]) == (2, settings.OPENJEV.max_answers)
    score = schemas["ScoreQuestion"]["properties"]["criteria"]
    assert (score["type"], score["minItems"], score["maxItems"]) == ("array", 2, settings.OPENJEV.max_answers)
    assert schemas["NoulCriteria"]["additionalProperties"] is False
    answers = schemas["SystemOneResponse"]["properties"]["answers"]
    assert answers["additionalProperties"] == {"$ref": "#/components/schemas/Answer"}


async def test_fields_are_described_and_confidence_is_not_sold_as_calibrated(api):
    schemas = (await openapi(api))["components"]["schemas"]
    undocumented = [
        f"{name}.{field}"
        for name, schema in schemas.items()
        for field, spec in schema.get("properties", {}).items()
        if not spec.get("description")
    ]
    assert undocumented == []
    for name in ("ChoiceAnswer", "ScoreAnswer"):
        assert "not** a calibrated" in schemas[name]["properties"]["confidence"]["description"]
    assert schemas["ApiErrorDetail"]["properties"]["error_type"]["enum"] == list(ERROR_TYPES)


async def test_every_error_status_is_documented_with_its_body_headers_and_an_example(api):
    operation = _operation(await openapi(api))
    responses = operation["responses"]
    assert set(responses) == SYSTEMONE_STATUSES
    for status, response in responses.items():
        media = response["content"]["application/json"]
        expected = {"200": "SystemOneResponse", "422": "ValidationError"}.get(status, "ApiError")
        assert media["schema"] == {"$ref": f"#/components/schemas/{expected}"}, status
        (example,) = media["examples"].values()
        component_validator(expected).validate(example["value"])
        if expected == "ApiError":
            assert example["value"]["detail"]["error_type"] in ERROR_TYPES
    headers_200 = responses["200"]["headers"]
    assert {name for name, header in headers_200.items() if header.get("required")} == {
        "x-typesafe-request-id",
        "x-openjev-model",
        "x-openjev-prefix-tokens",
        "Server-Timing",
    }
    assert not headers_200["x-openjev-cached-tokens"].get("required")
    assert set(responses["529"]["headers"]) == set(responses["503"]["headers"]) == {"Retry-After", ID}
    assert set(responses["401"]["headers"]) == {"WWW-Authenticate", ID}
    assert all(response["headers"][ID]["required"] for response in responses.values())


async def test_bearer_auth_is_documented_optional_on_every_v1_route_and_absent_on_the_probes(api):
    document = await openapi(api)
    assert document["components"]["securitySchemes"]["bearerAuth"]["type"] == "http"
    assert document["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert _operation(document)["security"] == [{"bearerAuth": []}, {}]
    for path in ("/v1/models", "/v1/limits"):
        operation = _operation(document, path, "get")
        assert operation["security"] == [{"bearerAuth": []}, {}] and "401" in operation["responses"]
    for path in ("/health", "/health/live"):
        assert _operation(document, path, "get")["security"] == [{}]


async def test_the_named_examples_are_documented_and_the_readme_one_is_the_readme_request(api):
    media = _operation(await openapi(api))["requestBody"]["content"]["application/json"]
    assert set(media["examples"]) == NAMED_REQUESTS
    assert media["examples"]["ReadmeRequest"]["value"] == README_REQUEST == TESTS_README_REQUEST
    states = {name: example["value"]["state"] for name, example in media["examples"].items()}
    assert isinstance(states["ChatTranscriptState"], list) and all("role" in m for m in states["ChatTranscriptState"])
    assert isinstance(states["StructuredState"], dict)
    (rating,) = media["examples"]["Score10Levels"]["value"]["questions"].values()
    assert rating["type"] == "score" and len(rating["criteria"]) == 10
    for example in media["examples"].values():
        assert example["summary"] and example["description"]
        component_validator("SystemOneRequest").validate(example["value"])


@pytest.mark.parametrize("name", sorted(NAMED_REQUESTS))
async def test_every_documented_example_request_evaluates_successfully(api, fake, name):
    document = await openapi(api)
    body = _operation(document)["requestBody"]["content"]["application/json"]["examples"][name]["value"]
    response = await api.post("/v1/systemone", json=body)
    assert response.status_code == 200, response.text
    answered = response.json()
    component_validator("SystemOneResponse", document).validate(answered)
    assert list(answered["answers"]) == list(body["questions"])
    assert [a["type"] for a in answered["answers"].values()] == [q["type"] for q in body["questions"].values()]
    headers = _operation(document)["responses"]["200"]["headers"]
    assert all(name.lower() in response.headers for name, header in headers.items() if header.get("required"))
    assert fake.generate_calls == 2  # warm-up + one batch: the example really ran


async def test_the_document_is_generated_once_per_process(api, monkeypatch):
    calls = []
    original = SchemaGenerator.get_schema

    def counting(self: SchemaGenerator, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SchemaGenerator, "get_schema", counting)
    openapi_document.schema_document.cache_clear()
    openapi_document.schema_render.cache_clear()
    bodies = [(await api.get(path)).content for path in ("/openapi.json", "/openapi.json", "/openapi.json")]
    assert len(calls) == 1 and bodies[0] == bodies[1] == bodies[2]


async def test_the_schema_supports_conditional_get_and_is_json_only(api):
    first = await api.get("/openapi.json")
    again = await api.get("/openapi.json", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    refused = await api.post("/openapi.json", json={})
    assert refused.status_code == 405 and refused.json()["detail"]["error_type"] == "method_not_allowed"


async def test_the_file_and_batch_objects_are_the_official_sdks_and_their_examples_fit_them(api):
    """OpenAI's SDK reads these objects unchanged: every field its types have (a batch's `model` aside: a batch here
    names its model in each line), and nothing else."""
    document = await openapi(api)
    schemas = document["components"]["schemas"]
    assert set(schemas["OpenAIFile"]["properties"]) == set(openai.types.FileObject.model_fields)
    assert set(schemas["Batch"]["properties"]) == set(openai.types.Batch.model_fields) - {"model"}
    assert set(schemas["BatchUsage"]["properties"]) == set(openai.types.BatchUsage.model_fields)
    for path, method, name, sdk_type in (
        ("/v1/files", "post", "OpenAIFile", openai.types.FileObject),
        ("/v1/batches/{batch_id}", "get", "Batch", openai.types.Batch),
    ):
        media = _operation(document, path, method)["responses"]["200"]["content"]["application/json"]
        (example,) = media["examples"].values()
        component_validator(name, document).validate(example["value"])
        sdk_type.model_validate(example["value"], strict=True)
    upload = _operation(document, "/v1/files", "post")["requestBody"]["content"]
    assert list(upload) == ["multipart/form-data"]
    assert upload["multipart/form-data"]["schema"] == {"$ref": "#/components/schemas/FileUpload"}
    assert schemas["FileUpload"]["properties"]["file"]["format"] == "binary"
