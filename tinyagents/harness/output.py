"""Output types: what ``Agent(output_type=...)`` takes, and the envelope a union of models is
answered in.

A union of pydantic models (``Apple | Banana``, ``Union[Apple, Banana]`` or a list of them)
is sent as pydantic-ai sends a native (``NativeOutput``) or prompted union: one schema, an
object whose ``result`` is any of ``{"kind": <member's name>, "data": <member>}``. We keep
structured output to the ``response_format`` (no output tools), so a union is that one
schema too, and the run's output is the member the answer names.
"""

from __future__ import annotations

import copy
import types
import typing
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, create_model
from pydantic.json_schema import models_json_schema

from tinyagents.errors import ConfigurationError, kind_of

__all__ = ["UnionOutput", "output_type_of"]


class UnionResult(BaseModel):
    """The ``result`` of a union's answer: which member (``kind``) and its JSON (``data``)."""

    model_config = ConfigDict(defer_build=True)  # built when a union agent is made

    kind: str
    data: dict[str, Any]


class UnionOutput(BaseModel):
    """The answer to a union output type, ``{"result": {"kind": ..., "data": ...}}``, read
    in two steps as pydantic-ai reads it: the envelope (a ``kind`` that is no member's name is
    a problem at ``result.kind``), then ``data`` as the member it names (its problems at the
    member's own fields)."""

    #: The members by their kind: the class's name, ``_2`` (``_3``...) after a name taken.
    model_config = ConfigDict(defer_build=True)

    members: ClassVar[dict[str, type[BaseModel]]] = {}
    #: The JSON schema sent for it (see ``model_json_schema``).
    sent_schema: ClassVar[dict[str, Any]] = {}
    result: UnionResult

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The schema sent as the ``response_format``: each member's own, under its kind (not
        the envelope's ``data: object``, which is only how the answer is read)."""
        return copy.deepcopy(cls.sent_schema)

    def output(self) -> BaseModel:
        """The member the answer names, validated (a ``ValidationError`` if it does not fit)."""
        return self.members[self.result.kind].model_validate(self.result.data)


def output_type_of(agent: str, output_type: object) -> type[BaseModel] | None:
    """What ``Agent(output_type=...)`` reads its answers as: None for text (``str``, the
    default), the model class, or a ``UnionOutput`` class for a union of model classes (a
    union of one is that one). Raises ``ConfigurationError`` for anything else."""
    if output_type is None or output_type is str:
        return None
    members = _members(output_type)
    if members is None:
        if isinstance(output_type, type) and issubclass(output_type, BaseModel):
            return output_type
        raise ConfigurationError(
            f"agent {agent!r}: output_type takes a pydantic model class (the output's JSON "
            f"schema is sent as response_format), or a union of them, got "
            f"{kind_of(output_type)}; wrap other types in one, e.g. class Answer(BaseModel): "
            "value: int"
        )
    refused = [m for m in members if not (isinstance(m, type) and issubclass(m, BaseModel))]
    if refused or not members:
        got = ", ".join(kind_of(m) if m is not None else "None" for m in refused) or "nothing"
        raise ConfigurationError(
            f"agent {agent!r}: a union output_type takes pydantic model classes only, got "
            f"{got}: the answer is the JSON of the response_format, which leaves no room for "
            "text or a bare value; wrap it in a model, e.g. class Answer(BaseModel): value: int"
        )
    if len(members) == 1:
        only: type[BaseModel] = members[0]
        return only
    return _union_output(members)


def _members(output_type: object) -> list[Any] | None:
    """The members of a union (``A | B``, ``Union[A, B]``, ``[A, B]``), else None."""
    if isinstance(output_type, (list, tuple)):
        return list(output_type)
    if isinstance(output_type, types.UnionType) or typing.get_origin(output_type) is typing.Union:
        return list(typing.get_args(output_type))
    return None


def _union_output(members: list[type[BaseModel]]) -> type[UnionOutput]:
    keyed: dict[str, type[BaseModel]] = {}
    for member in members:
        key, n = member.__name__, 1
        while key in keyed:
            n += 1
            key = f"{member.__name__}_{n}"
        keyed[key] = member

    kinds: Any = Literal[tuple(keyed)]  # a kind is one of the members' names
    result = create_model("UnionResult", __base__=UnionResult, kind=(kinds, ...))
    namespace = {
        "__annotations__": {"result": result},
        "__module__": __name__,
        "members": keyed,
        "sent_schema": _union_schema(keyed),
    }
    union: type[UnionOutput] = type("_or_".join(keyed), (UnionOutput,), namespace)
    return union


def _union_schema(keyed: dict[str, type[BaseModel]]) -> dict[str, Any]:
    """The schema sent for a union, as pydantic-ai's ``UnionOutputProcessor`` builds it: each
    member ``{"kind": <const>, "data": <member>}``, titled with its kind and described by its
    docstring; the members' schemas (and theirs) under one ``$defs``."""
    refs, top = models_json_schema(
        [(member, "validation") for member in keyed.values()], ref_template="#/$defs/{model}"
    )
    defs: dict[str, Any] = top.get("$defs", {})
    choices = []
    for key, member in keyed.items():
        ref = refs[(member, "validation")]
        choice: dict[str, Any] = {
            "type": "object",
            "properties": {"kind": {"type": "string", "const": key}, "data": ref},
            "required": ["kind", "data"],
            "additionalProperties": False,
            "title": key,
        }
        description = defs.get(ref["$ref"].rsplit("/", 1)[1], {}).get("description")
        if description:
            choice["description"] = description
        choices.append(choice)
    return {
        "type": "object",
        "properties": {"result": {"anyOf": choices}},
        "required": ["result"],
        "additionalProperties": False,
        "title": "_or_".join(keyed),
        "$defs": defs,
    }
