"""`POST /v1/classify` in `/openapi.json`: documented with every status, its examples valid, and the
documented example request answered by the app (with the classifier the description asks for)."""

from __future__ import annotations

from typing import Any

from api.classify.openapi import CLASSIFY_REQUEST, CLASSIFY_RESPONSE
from tests.classify.conftest import SENTIMENT
from tests.docs.conftest import component_validator, openapi

STATUSES = {"200", "400", "401", "403", "404", "408", "413", "415", "429", "500", "502", "503", "504", "529"}


def _operation(document: dict[str, Any]) -> dict[str, Any]:
    operation: dict[str, Any] = document["paths"]["/v1/classify"]["post"]
    return operation


async def test_classify_is_documented_with_every_status_in_the_classify_error_shape(api, settings):
    document = await openapi(api)
    operation = _operation(document)
    assert operation["operationId"] == "classify" and operation["tags"] == ["Classification"]
    assert "Classification" in [tag["name"] for tag in document["tags"]]
    assert operation["security"] == [{"bearerAuth": []}, {}]
    responses = operation["responses"]
    assert set(responses) == STATUSES
    for status, response in responses.items():
        media = response["content"]["application/json"]
        expected = "ClassifyResponse" if status == "200" else "ClassifyError"
        assert media["schema"] == {"$ref": f"#/components/schemas/{expected}"}, status
        (example,) = media["examples"].values()
        component_validator(expected, document).validate(example["value"])
        if status != "200":
            assert example["value"]["code"] == int(status)
    assert {name for name, h in responses["200"]["headers"].items() if h.get("required")} == {
        "x-typesafe-request-id",
        "x-openjev-model",
    }
    request = document["components"]["schemas"]["ClassifyRequest"]
    assert set(request["required"]) == {"model", "input"}
    assert request["properties"]["input"]["maxItems"] == settings.OPENJEV.max_classify_inputs
    usage = document["components"]["schemas"]["ClassifyUsage"]["properties"]
    assert usage["completion_tokens"]["const"] == 0 and usage["prompt_tokens_details"]["type"] == "null"


async def test_the_documented_example_is_answered_in_the_documented_shape(api, fake, classifiers):
    classifiers(SENTIMENT)  # the classifier the operation's description asks for
    document = await openapi(api)
    media = _operation(document)["requestBody"]["content"]["application/json"]
    (example,) = media["examples"].values()
    assert example["value"] == CLASSIFY_REQUEST
    component_validator("ClassifyRequest", document).validate(example["value"])
    response = await api.post("/v1/classify", json=example["value"])
    assert response.status_code == 200, response.text
    body = response.json()
    component_validator("ClassifyResponse", document).validate(body)
    assert [item["index"] for item in body["data"]] == list(range(len(CLASSIFY_REQUEST["input"])))
    assert set(body) == set(CLASSIFY_RESPONSE) and set(body["usage"]) == set(CLASSIFY_RESPONSE["usage"])
    error = await api.post("/v1/classify", json={"model": "nope", "input": "x"})
    component_validator("ClassifyError", document).validate(error.json())
