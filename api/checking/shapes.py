"""A JSON object's shape, declared once for its parser and its OpenAPI component.

A format's parser checks bodies by hand, so that validation stays linear and each problem keeps its own wording;
what it must agree on with its documentation is the shape: which keys an object takes (any other is refused),
which are required, what values a discriminated union tells apart. A `Shape` or `Union` holds that once, with each
field's JSON Schema and description: the parser reads its `keys` and `members`, the document renders its
`schema`. A deployment's limits in a schema are `Setting`s, filled in when the document is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

REF = "#/components/schemas/"


@dataclass(frozen=True)
class Setting:
    """A deployment's limit in a schema (`maxProperties: Setting("max_questions")`), filled in when rendered."""

    name: str


def settings_filled(value: Any, *, values: Mapping[str, int]) -> Any:
    """`value` with every `Setting` in it replaced by its value."""
    if isinstance(value, Setting):
        return values[value.name]
    if isinstance(value, dict):
        return {key: settings_filled(item, values=values) for key, item in value.items()}
    if isinstance(value, list):
        return [settings_filled(item, values=values) for item in value]
    return value


@dataclass(frozen=True)
class Shape:
    """A closed JSON object: its fields' schemas, the required ones; any other key is refused."""

    name: str
    """Its component's name in the OpenAPI document."""
    description: str
    fields: Mapping[str, Mapping[str, Any]]
    required: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    """More of its schema (`oneOf` of required sets, ...)."""
    keys: frozenset[str] = field(init=False)
    """The keys it takes, what its parser refuses every other key against."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", frozenset(self.fields))

    def schema(self, *, values: Mapping[str, int]) -> dict[str, Any]:
        return {
            "type": "object",
            "description": self.description,
            "properties": settings_filled(dict(self.fields), values=values),
            "required": list(self.required),
            "additionalProperties": False,
            **self.extra,
        }

    @property
    def ref(self) -> dict[str, str]:
        return ref(self.name)


@dataclass(frozen=True)
class Union:
    """One of several shapes, told apart by the value of one key (`type`)."""

    name: str
    description: str
    members: Mapping[str, Shape]
    """Each value of the key, with the shape it selects; what the parser accepts as that key."""
    on: str = "type"

    def schema(self, *, values: Mapping[str, int]) -> dict[str, Any]:
        return {
            "description": self.description,
            "oneOf": [member.ref for member in self.members.values()],
            "discriminator": {
                "propertyName": self.on,
                "mapping": {kind: f"{REF}{member.name}" for kind, member in self.members.items()},
            },
        }

    @property
    def ref(self) -> dict[str, str]:
        return ref(self.name)


def ref(name: str, description: str | None = None) -> dict[str, str]:
    """A reference to a component, with a description of its use where given."""
    return {"$ref": f"{REF}{name}"} | ({"description": description} if description else {})


def text(description: str, **schema: Any) -> dict[str, Any]:
    """A string field."""
    return {"type": "string", "description": description, **schema}


def const(value: str, description: str) -> dict[str, Any]:
    """A string field of one value: a union member's tag."""
    return {"type": "string", "const": value, "description": description}


def probability(description: str) -> dict[str, Any]:
    return {"type": "number", "minimum": 0, "maximum": 1, "description": description}


def integer(description: str, **schema: Any) -> dict[str, Any]:
    return {"type": "integer", "description": description, **schema}


def components_rendered(*components: Shape | Union, values: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """The components' schemas by name, with this deployment's `values` filled in."""
    return {component.name: component.schema(values=values) for component in components}
