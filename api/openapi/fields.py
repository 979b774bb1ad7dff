"""Field shapes the serializers cannot say on their own, shared by the endpoints' documentation."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

ERROR_TYPES = (
    "invalid_request",
    "wrong_route",
    "authentication_error",
    "permission_denied",
    "not_found",
    "method_not_allowed",
    "not_acceptable",
    "unsupported_media_type",
    "request_too_large",
    "request_timeout",
    "rate_limited",
    "rate_limits_unavailable",
    "overloaded",
    "backend_unavailable",
    "service_unavailable",
    "backend_error",
    "timeout",
    "internal_error",
)

_TEXT_TYPES = ["string", "object", "array"]


def serializer_keys(serializer: type[serializers.Serializer]) -> frozenset[str]:
    """The keys of an object `serializer` documents: what its format's parser refuses every other key against, so
    the document and the parser cannot disagree on which fields exist."""
    return frozenset(serializer().fields)


@extend_schema_field({"type": _TEXT_TYPES, "items": {}})
class TextField(serializers.JSONField):
    """A string, or structured text (an object or array the model reads as compact JSON)."""


@extend_schema_field({"type": [*_TEXT_TYPES, "null"], "items": {}})
class NullableTextField(serializers.JSONField):
    """Text that may also be null (meaning: use the default, or show the option key)."""


@extend_schema_field({"type": "array", "items": {"type": ["string", "integer"]}, "minItems": 1})
class LocField(serializers.JSONField):
    """A FastAPI-style location: `["body", "questions", <id>, ...]`, with integers for array indexes."""


@extend_schema_field({"type": "string", "enum": list(ERROR_TYPES)})
class ErrorTypeField(serializers.CharField):
    """The machine-readable error kind; see the error table in the API description."""


@extend_schema_field({"type": "string", "examples": ["jev-latest"]})
class ModelField(serializers.CharField):
    """A model name; not an enum, since any `jev-*` alias is accepted."""


@extend_schema_field({"type": "string", "enum": ["ok", "unavailable"]})
class HealthStatusField(serializers.CharField):
    """`ok`, or `unavailable` with a `message`."""


def const_field(value: str) -> type[serializers.CharField]:
    """A discriminator field: JSON Schema `const`, so each union member is unambiguous to generators."""

    @extend_schema_field({"type": "string", "const": value, "enum": [value]})
    class ConstField(serializers.CharField):
        pass

    ConstField.__name__ = f"Const{value.title()}Field"
    return ConstField


PROBABILITY_HELP = (
    "Per option order the question is asked in: the label log-probabilities of this question's options, less the "
    "content-free prior's where the served model's tuning debiases (`OPENJEV_DEBIAS`), softmaxed at the tuning's "
    "temperature for the question's shape (`OPENJEV_TEMPERATURE` overrides it); averaged over the orders "
    "(`OPENJEV_PERMUTATIONS`), then calibrated where a calibration applies. Whole millionths that sum to exactly 1."
)
"""What every format's documents say of a probability (`inference.scoring`), so the formats cannot drift."""


def probability_field(**kwargs: Any) -> serializers.FloatField:
    return serializers.FloatField(min_value=0.0, max_value=1.0, **kwargs)


@extend_schema_field({"type": ["string", "array"], "items": {"type": "string"}, "minItems": 1})
class ClassifyInputField(serializers.JSONField):
    """One text, or a list of texts (one result each, in order)."""


@extend_schema_field({"type": "null"})
class NullField(serializers.JSONField):
    """Always null."""


@extend_schema_field({"type": "integer", "const": 0, "enum": [0]})
class ZeroField(serializers.IntegerField):
    """Always 0."""
