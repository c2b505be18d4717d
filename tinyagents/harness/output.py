"""Output types: what ``Agent(output_type=...)`` takes, and the envelope a union of models is
answered in.

A union of pydantic models (``Apple | Banana``, ``Union[Apple, Banana]`` or a list of them)
is sent as pydantic-ai sends a native (``NativeOutput``) or prompted union: one schema, an
object whose ``result`` is any of ``{"kind": <member's name>, "data": <member>}``. We keep
structured output to the ``response_format`` (no output tools), so a union is that one
schema too, and the run's output is the member the answer names.

A union with text (``Apple | str``, ``[Apple, Banana, str]``) is the one exception: a
``response_format`` makes every answer JSON, which leaves no room for the plain text the
union allows. Its models are offered as output tools instead, named and described as
pydantic-ai's ``ToolOutput`` names them (``final_result`` for one model, ``final_result_<Name>``
for several), and no ``response_format`` is sent: a text answer is the output as text, and a
call of an output tool whose arguments validate is the output as that model.
"""

from __future__ import annotations

import copy
import inspect
import types
import typing
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, create_model
from pydantic.json_schema import models_json_schema

from tinyagents.errors import ConfigurationError, kind_of

__all__ = ["UnionOutput", "output_tool_description", "output_tools_of", "output_type_of"]

#: What an output tool is described as without a docstring of its model (pydantic-ai's words).
FINAL_RESPONSE = "The final response which ends this conversation"


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
    default, and a union with text, whose models are output tools: ``output_tools_of``), the
    model class, or a ``UnionOutput`` class for a union of model classes (a union of one is
    that one). Raises ``ConfigurationError`` for anything else."""
    return _read(agent, output_type)[0]


def output_tools_of(agent: str, output_type: object) -> dict[str, type[BaseModel]]:
    """The output tools of a union with text (``Apple | str``), by name: ``final_result`` for
    one model, ``final_result_<Name>`` for each of several (``_2`` after a name taken), as
    pydantic-ai names its output tools. Empty for any other output type."""
    return _read(agent, output_type)[1]


def _read(
    agent: str, output_type: object
) -> tuple[type[BaseModel] | None, dict[str, type[BaseModel]]]:
    if output_type is None or output_type is str:
        return None, {}
    members = _members(output_type)
    if members is None:
        if isinstance(output_type, type) and issubclass(output_type, BaseModel):
            return output_type, {}
        raise ConfigurationError(
            f"agent {agent!r}: output_type takes a pydantic model class (the output's JSON "
            f"schema is sent as response_format), or a union of them (with str, for text "
            f"too), got {kind_of(output_type)}; wrap other types in one, e.g. class "
            "Answer(BaseModel): value: int"
        )
    text = str in members
    members = [m for m in members if m is not str]
    refused = [m for m in members if not (isinstance(m, type) and issubclass(m, BaseModel))]
    if text and not members:  # [str]: text
        return None, {}
    if refused or not members:
        got = ", ".join(kind_of(m) if m is not None else "None" for m in refused) or "nothing"
        raise ConfigurationError(
            f"agent {agent!r}: a union output_type takes pydantic model classes (and str, "
            f"for a text answer) only, got {got}: a model's answer is the JSON of the "
            "response_format or an output tool's arguments, which leave no room for a bare "
            "value; wrap it in a model, e.g. class Answer(BaseModel): value: int"
        )
    if text:
        return None, _output_tools(members)
    if len(members) == 1:
        only: type[BaseModel] = members[0]
        return only, {}
    return _union_output(members), {}


def _output_tools(members: list[type[BaseModel]]) -> dict[str, type[BaseModel]]:
    if len(members) == 1:
        return {"final_result": members[0]}
    return {f"final_result_{key}": member for key, member in _keyed(members).items()}


def output_tool_description(name: str, member: type[BaseModel], *, several: bool) -> str:
    """What an output tool is described as, as pydantic-ai describes it: its model's
    docstring, else "The final response which ends this conversation" (after the model's
    name, ``"Banana: ..."``, when there are several output tools)."""
    doc = member.__doc__
    if doc and doc is not BaseModel.__doc__:
        return inspect.cleandoc(doc)
    return f"{member.__name__}: {FINAL_RESPONSE}" if several else FINAL_RESPONSE


def _members(output_type: object) -> list[Any] | None:
    """The members of a union (``A | B``, ``Union[A, B]``, ``[A, B]``), else None."""
    if isinstance(output_type, (list, tuple)):
        return list(output_type)
    if isinstance(output_type, types.UnionType) or typing.get_origin(output_type) is typing.Union:
        return list(typing.get_args(output_type))
    return None


def _keyed(members: list[type[BaseModel]]) -> dict[str, type[BaseModel]]:
    """The members by their class's name, ``_2`` (``_3``...) after a name taken."""
    keyed: dict[str, type[BaseModel]] = {}
    for member in members:
        key, n = member.__name__, 1
        while key in keyed:
            n += 1
            key = f"{member.__name__}_{n}"
        keyed[key] = member
    return keyed


def _union_output(members: list[type[BaseModel]]) -> type[UnionOutput]:
    keyed = _keyed(members)
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
