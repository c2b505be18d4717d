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

A type that is no model class (``int``, ``list[Foo]``, ``Foo | Bar`` inside a ``ToolOutput``,
``Literal[...]``) is wrapped as pydantic-ai wraps it (``ResponseOutput``): the ``response`` of
an object, read as the type (or as a string of its JSON) and unwrapped; as ``output_type``
it is that object's ``response_format``, in a union a member named by its type (``int``),
beside text or as a ``ToolOutput`` an output tool whose arguments are that object. A
dataclass or TypedDict is read as pydantic-ai reads a model-like type (``ObjectOutput``): its
own object schema, unwrapped, and so is a ``StructuredDict`` (a JSON schema of its own, read
as a ``dict``). ``None`` in a union (``str | None``) is pydantic-ai's
``allows_none`` (``OutputSpec.allows_none``): an empty answer is the output None and, where
the output is structured, ``NoneType`` is a wrapped member of its own.

pydantic-ai's output functions and markers go through the same output tools: an output
function (``output_type=fn``) is an output tool whose arguments are its parameters and whose
return is the output; ``ToolOutput`` names, describes and caps one; ``TextOutput`` passes a
text answer through a function; ``NativeOutput`` is the ``response_format`` a model class is
sent as anyway; ``PromptedOutput`` writes the schema into the system prompt instead. Output
tools without ``str`` beside them are the only way to answer. What we do not carry out
(``NativeOutput``'s options, either marker of output functions) raises
``UnsupportedOutputError`` when the agent is made.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from dataclasses import field
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    create_model,
    model_validator,
)
from pydantic.json_schema import models_json_schema
from pydantic_core import core_schema
from typing_extensions import is_typeddict

from tinyagents._record import Record, record
from tinyagents.errors import ConfigurationError, UnsupportedOutputError, kind_of
from tinyagents.harness.model import ToolSpec
from tinyagents.harness.tools import FunctionTool, is_tool_name, typed_dict_fix
from tinyagents.protocol.ids import shown_repr

__all__ = [
    "NativeOutput",
    "ObjectOutput",
    "OutputSpec",
    "OutputTool",
    "PromptedOutput",
    "ResponseOutput",
    "StructuredDict",
    "TextOutput",
    "ToolOutput",
    "UnionOutput",
    "output_json_schema",
    "output_spec_of",
    "output_tools_of",
    "output_type_of",
    "unwrapped",
    "without_property_titles",
]

#: The schema prompt of a ``PromptedOutput`` without a template of its own (pydantic-ai's
#: ``DEFAULT_PROMPTED_OUTPUT_TEMPLATE``).
PROMPTED_OUTPUT_TEMPLATE = (
    "Always respond with a JSON object that's compatible with this schema:\n\n{schema}\n\n"
    "Don't include any text or Markdown fencing before or after.\n"
)
#: What an output tool is described as without a docstring of its model (pydantic-ai's words).
FINAL_RESPONSE = "The final response which ends this conversation"
#: What a name takes out before it is an output tool's (pydantic-ai's ``TOOL_NAME_SANITIZER``);
#: text that ``re``'s cache compiles when an agent with several output tools is made.
_UNSAFE = r"[^a-zA-Z0-9-_]"
#: The name an output function's tool is made with, before its own is known.
_PLACEHOLDER = "output_function"


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

    def output(self) -> Any:
        """The member the answer names, validated (a ``ValidationError`` if it does not fit;
        a wrapped type's ``response``)."""
        return unwrapped(self.members[self.result.kind].model_validate(self.result.data))


class ResponseOutput(BaseModel):
    """An output type whose JSON schema is no object (``int``, ``list[Foo]``, ``Foo | Bar``,
    ``Literal[...]``), wrapped as pydantic-ai's ``ObjectOutputProcessor`` wraps it: an object
    whose ``response`` is the value, sent as its schema (``{"properties": {"response":
    <schema>}, "required": ["response"], "type": "object"}``), the ``response`` read as the
    type or as a string of its JSON (some providers send it so), and the output the
    ``response``. Made by ``output_spec_of``, one class per type, named after the type."""

    model_config = ConfigDict(defer_build=True)

    #: The JSON schema sent for it (see ``model_json_schema``).
    sent_schema: ClassVar[dict[str, Any]] = {}
    response: Any

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The schema sent: the type's own as ``response`` (not the ``| Json[...]`` it is
        read as)."""
        return copy.deepcopy(cls.sent_schema)

    def output(self) -> Any:
        """The value the answer holds."""
        return self.response


class ObjectOutput(BaseModel):
    """A dataclass or TypedDict output type, read as pydantic-ai reads a model-like type: its
    own object schema sent (``TypeAdapter(T).json_schema()``, titled with its name), the
    answer's object validated as ``T`` (its problems at ``T``'s own fields), and the output
    that ``T`` (a dataclass instance, a dict). Made by ``output_spec_of``, one class per
    type, named after the type. (No ``RootModel``: importing it loads ``email``.)"""

    model_config = ConfigDict(defer_build=True)

    #: The JSON schema sent for it (see ``model_json_schema``), and what reads the answer.
    sent_schema: ClassVar[dict[str, Any]] = {}
    reader: ClassVar[TypeAdapter[Any] | None] = None
    root: Any

    @model_validator(mode="wrap")
    @classmethod
    def _as_the_type(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        if cls.reader is None or isinstance(data, cls):
            return handler(data)
        return handler({"root": cls.reader.validate_python(data)})

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The type's own schema (not a root model's)."""
        return copy.deepcopy(cls.sent_schema)

    def output(self) -> Any:
        """The value the answer holds."""
        return self.root


def unwrapped(value: Any) -> Any:
    """The run's output an answer read as an output class holds: a union's member, a wrapped
    type's ``response``, a dataclass's or TypedDict's value; a model class's object as it is."""
    if isinstance(value, (UnionOutput, ResponseOutput, ObjectOutput)):
        return value.output()
    return value


def StructuredDict(
    json_schema: dict[str, Any], name: str | None = None, description: str | None = None
) -> type[dict[str, Any]]:
    """pydantic-ai's ``StructuredDict``: a ``dict`` type described by ``json_schema`` (an
    object's), for ``Agent(output_type=...)`` or a ``ToolOutput``. Its schema is what the
    model is sent (titled ``name``, else its own ``title``; described by ``description``,
    else its own), ``$defs`` inlined; the answer is read as a ``dict[str, Any]`` (the schema
    is not checked against it, as pydantic-ai checks it not). ``ConfigurationError`` for a
    schema that is no object's, or whose ``$ref`` s recurse (pydantic-ai's ``UserError``)."""
    if not isinstance(json_schema, dict):
        raise ConfigurationError(
            f"StructuredDict takes a JSON schema (a dict), got {kind_of(json_schema)}"
        )
    for option, value in (("name", name), ("description", description)):
        if value is not None and not isinstance(value, str):
            raise ConfigurationError(
                f"StructuredDict's {option} must be text, got {type(value).__name__}"
            )
    schema = _object_schema(json_schema)
    if "$defs" in schema:
        schema = _inlined(schema)
    if name:
        schema["title"] = name
    if description:
        schema["description"] = description
    title = schema.get("title")

    class _StructuredDict(dict[str, Any]):
        #: read as a model is (pydantic-ai's ``is_model_like``): a tool taking one is
        #: offered its fields
        __is_model_like__ = True

        @classmethod
        def __get_pydantic_core_schema__(
            cls, source: Any, handler: GetCoreSchemaHandler
        ) -> core_schema.CoreSchema:
            return core_schema.dict_schema(
                keys_schema=core_schema.str_schema(), values_schema=core_schema.any_schema()
            )

        @classmethod
        def __get_pydantic_json_schema__(
            cls, core: core_schema.CoreSchema, handler: GetJsonSchemaHandler
        ) -> dict[str, Any]:
            return copy.deepcopy(schema)

    _StructuredDict.__name__ = title if isinstance(title, str) and title else "StructuredDict"
    _StructuredDict.__qualname__ = _StructuredDict.__name__
    _StructuredDict.__structured_schema__ = schema  # type: ignore[attr-defined]
    return _StructuredDict


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` if it is an object's, or the object a top-level ``$ref`` names
    that holds no ``$ref`` of its own (pydantic-ai's ``check_object_json_schema``)."""
    schema = copy.deepcopy(schema)
    if schema.get("type") == "object":
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str):
        defs = schema.get("$defs")
        target = defs.get(ref.removeprefix("#/$defs/")) if isinstance(defs, dict) else None
        if (
            ref.startswith("#/$defs/")
            and isinstance(target, dict)
            and target.get("type") == "object"
            and '"$ref"' not in json.dumps(target)
        ):
            return target
        return schema
    raise ConfigurationError(
        f"StructuredDict's schema must be an object's ({{'type': 'object', ...}}), got "
        f"type {schema.get('type')!r}"
    )


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with each ``$ref`` to its ``$defs`` replaced by the definition, and no
    ``$defs`` (pydantic-ai's ``InlineDefsJsonSchemaTransformer``): pydantic cannot send a
    ``$defs`` of a type's own schema. A ``$ref`` that recurses (or names no definition)
    cannot be inlined: ``ConfigurationError``, as pydantic-ai's ``UserError``."""
    defs = schema.get("$defs")
    defs = defs if isinstance(defs, dict) else {}

    def walk(node: Any, seen: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [walk(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            key = ref.removeprefix("#/$defs/")
            if not ref.startswith("#/$defs/") or key in seen or key not in defs:
                raise ConfigurationError(
                    "StructuredDict does not support recursive $refs and $defs (nor a $ref "
                    f"to no definition of its $defs), got $ref {ref!r}; as pydantic-ai, "
                    "see https://github.com/pydantic/pydantic/issues/12145"
                )
            rest = {k: walk(v, seen) for k, v in node.items() if k != "$ref"}
            return {**walk(defs[key], seen | {key}), **rest}
        return {k: walk(v, seen) for k, v in node.items() if k != "$defs"}

    inlined: dict[str, Any] = walk(schema, frozenset())
    return inlined


@record(init=False, slots=True, eq=False, repr=False)
class ToolOutput(Record):
    """pydantic-ai's ``ToolOutput``: offer ``type_`` (a pydantic model class, or an output
    function whose parameters are the tool's arguments and whose return is the run's output)
    as an output tool, optionally named (``name``, default ``final_result``, or
    ``final_result_<Name>`` among several), described (``description``, before the model's or
    function's docstring), with its own cap on calls sent back (``max_retries``, instead of
    the agent's ``output_retries``) and OpenAI's ``strict`` flag on the tool."""

    output: Any
    name: str | None
    description: str | None
    max_retries: int | None
    strict: bool | None
    sequential: bool

    def __init__(
        self,
        type_: Any,
        *,
        name: str | None = None,
        description: str | None = None,
        max_retries: int | None = None,
        strict: bool | None = None,
        sequential: bool = False,
    ) -> None:
        if max_retries is not None and (
            isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0
        ):
            raise ConfigurationError(
                f"ToolOutput: max_retries must be a whole number >= 0 (or None), got "
                f"{shown_repr(max_retries)}"
            )
        if strict is not None and not isinstance(strict, bool):
            raise ConfigurationError(
                f"ToolOutput: strict must be True, False or None, got {shown_repr(strict)}"
            )
        if not isinstance(sequential, bool):  # sequential="no" read as true
            raise ConfigurationError(
                f"ToolOutput: sequential must be True or False, got {shown_repr(sequential)}"
            )
        if name is not None and not is_tool_name(name):
            raise ConfigurationError(
                f"ToolOutput: name {name!r} is not accepted by model providers: use 1-64 "
                "letters, digits, '_' or '-'"
            )
        if description is not None and not isinstance(description, str):
            raise ConfigurationError(
                f"ToolOutput: description must be text, got {type(description).__name__}"
            )
        self.output = type_
        self.name = name
        self.description = description
        self.max_retries = max_retries
        self.strict = strict
        #: pydantic-ai's barrier flag: its call runs alone, after the calls before it. Every
        #: call does here (a response's calls run one after another, in the model's order).
        self.sequential = sequential


@record(init=False, slots=True, eq=False, repr=False)
class NativeOutput(Record):
    """pydantic-ai's ``NativeOutput``: the output's JSON schema sent as the model's native
    structured output (our ``response_format``), which is how a model class or a union of
    them is asked for anyway. ``name``, ``description``, ``strict`` and ``template`` are
    not carried out: an agent given any of them raises ``UnsupportedOutputError``."""

    outputs: Any
    name: str | None
    description: str | None
    strict: bool | None
    template: str | Literal[False] | None

    def __init__(
        self,
        outputs: Any,
        *,
        name: str | None = None,
        description: str | None = None,
        strict: bool | None = None,
        template: str | Literal[False] | None = None,
    ) -> None:
        self.outputs = outputs
        self.name = name
        self.description = description
        self.strict = strict
        self.template = template


@record(init=False, slots=True, eq=False, repr=False)
class PromptedOutput(Record):
    """pydantic-ai's ``PromptedOutput``: no native structured output (no
    ``response_format``); the output's JSON schema is written into each request's system
    prompt with ``template`` (its ``{schema}`` placeholder; pydantic-ai's default template
    when None; ``False``: no schema prompt), titled ``name`` and described ``description``
    when given, and the answer's text is read as that JSON. It takes model classes only."""

    outputs: Any
    name: str | None
    description: str | None
    template: str | Literal[False] | None

    def __init__(
        self,
        outputs: Any,
        *,
        name: str | None = None,
        description: str | None = None,
        template: str | Literal[False] | None = None,
    ) -> None:
        self.outputs = outputs
        self.name = name
        self.description = description
        self.template = template


@record(slots=True, eq=False, repr=False)
class TextOutput(Record):
    """pydantic-ai's ``TextOutput``: a text answer is passed through ``output_function``,
    ``(text)`` or ``(ctx, text)``, sync or async, whose return is the run's output; it may
    raise ``ModelRetry`` to send the answer back (counted against ``output_retries``)."""

    output_function: Callable[..., Any]


@record(slots=True, kw_only=True, eq=False, repr=False)
class OutputTool(Record):
    """One output tool as an agent offers it: a call whose arguments validate is the run's
    output, read as ``model``'s object or passed to ``function`` (its return the output)."""

    name: str
    description: str
    parameters: dict[str, Any]
    #: The model class the arguments are read as (None for an output function).
    model: type[BaseModel] | None = None
    #: The output function the arguments are passed to, as a tool's are.
    function: FunctionTool | None = None
    #: ``ToolOutput(max_retries=...)``: its own cap on calls sent back (None: the agent's).
    max_retries: int | None = None
    strict: bool | None = None

    @property
    def what(self) -> str:
        """What its arguments are read as, in messages: the model's or function's name."""
        if self.model is not None:
            return self.model.__name__
        return str(getattr(self.function.fn, "__name__", self.name)) if self.function else self.name

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=self.parameters,
            strict=self.strict,
        )


@record(slots=True, kw_only=True, eq=False, repr=False)
class OutputSpec(Record):
    """What ``Agent(output_type=...)`` reads as: ``output_type`` (a model class or a union's
    envelope, sent as ``response_format``; None for text), the output tools offered beside
    it, whether a text answer is output at all (``allows_text``: not for output tools
    alone, which pydantic-ai asks to "include your response in a tool call") and the
    ``TextOutput`` function a text answer goes through. ``native``: ``output_type`` is sent
    as the ``response_format`` (not for ``PromptedOutput``, whose schema is ``prompt``, the
    text each request's system prompt ends with)."""

    output_type: type[BaseModel] | None = None
    native: bool = True
    prompt: str | None = None
    tools: dict[str, OutputTool] = field(default_factory=dict)
    allows_text: bool = True
    text_function: FunctionTool | None = None
    #: ``None`` was in the output type's union (``str | None``, ``Foo | None``): an answer of
    #: no text and no tool call is the output ``None`` (pydantic-ai's ``allows_none``).
    allows_none: bool = False


def output_type_of(agent: str, output_type: object) -> type[BaseModel] | None:
    """What ``Agent(output_type=...)`` reads a final answer's JSON as: None for text (and for
    output tools), the model class, or a ``UnionOutput`` class for a union of model classes
    (a union of one is that one). Raises ``ConfigurationError`` for anything else."""
    return output_spec_of(agent, output_type).output_type


def output_tools_of(agent: str, output_type: object) -> dict[str, OutputTool]:
    """The output tools of ``output_type``, by name: a union with text's models
    (``Apple | str``), output functions and ``ToolOutput`` markers, named as pydantic-ai
    names its output tools. Empty for any other output type."""
    return output_spec_of(agent, output_type).tools


def output_spec_of(agent: str, output_type: object) -> OutputSpec:
    """How ``Agent(output_type=...)`` reads its answers (``OutputSpec``), as pydantic-ai's
    ``OutputSchema.build`` reads its output spec. Raises ``ConfigurationError`` for an output
    type it cannot read, ``UnsupportedOutputError`` for a marker it does not carry out."""
    if output_type is None or output_type is str:
        return OutputSpec()
    members = _members(output_type)
    if members is None or not any(m is None or m is types.NoneType for m in members):
        return _spec_of(agent, output_type)
    # None in the union (pydantic-ai's allows_none): an empty answer is None, and where the
    # output is structured, None is a member of its own (an output tool, or the envelope's)
    rest = [m for m in members if m is not None and m is not types.NoneType]
    if not rest:
        raise ConfigurationError(
            f"agent {agent!r}: at least one output type must be given other than None (as "
            "pydantic-ai refuses it); for text, or text or nothing, give str or str | None"
        )
    if any(
        m is not str and not isinstance(m, (TextOutput, NativeOutput, PromptedOutput)) for m in rest
    ):
        rest.append(types.NoneType)
    spec = _spec_of(agent, rest)
    spec.allows_none = True
    return spec


def _spec_of(agent: str, output_type: object) -> OutputSpec:
    """``output_spec_of`` for an output type whose union holds no None (a ``NoneType`` it
    holds is a member as any other type is)."""
    if output_type is None or output_type is str:
        return OutputSpec()
    if isinstance(output_type, PromptedOutput):
        return _prompted(agent, output_type)
    if isinstance(output_type, NativeOutput):
        return _native(agent, output_type)
    if isinstance(output_type, (TextOutput, ToolOutput)) or _is_function(output_type):
        return _with_markers(agent, [output_type])
    members = _members(output_type)
    if members is None:
        model = _as_model(agent, output_type)
        if model is not None:
            return OutputSpec(output_type=model)
        raise ConfigurationError(
            f"agent {agent!r}: output_type takes a pydantic model class (the output's JSON "
            f"schema is sent as response_format), another type (int, list[Foo], Foo | Bar: "
            f"the response of an object, as pydantic-ai wraps it), a union of them (with str, "
            f"for text too), an output function or a ToolOutput / NativeOutput / TextOutput "
            f"marker, got {kind_of(output_type)}"
        )
    for member in members:
        if isinstance(member, (NativeOutput, PromptedOutput)):
            raise ConfigurationError(
                f"agent {agent!r}: {type(member).__name__} must be the only output type (as "
                f"in pydantic-ai); got it among {len(members)}"
            )
    if any(isinstance(m, (TextOutput, ToolOutput)) or _is_function(m) for m in members):
        return _with_markers(agent, members)
    if members.count(str) > 1:  # as pydantic-ai refuses it
        raise ConfigurationError(
            f"agent {agent!r}: only one str or TextOutput is allowed in an output_type"
        )
    text = str in members
    members = [m for m in members if m is not str]
    if text and not members:  # [str]: text
        return OutputSpec()
    models = _models(agent, members)
    if text:
        return _with_markers(agent, [*models, str])
    if len(models) == 1:
        return OutputSpec(output_type=models[0])
    return OutputSpec(output_type=_union_output(models))


def _models(agent: str, members: list[Any], where: str = "output_type") -> list[type[BaseModel]]:
    """The members as model classes: a model class as it is, any other type pydantic reads
    wrapped (``ResponseOutput``); anything else (None, a value) is refused, as is no member
    at all (``where``, the ``output_type`` or marker that held them, names the mistake)."""
    if not members:  # as pydantic-ai refuses it ("At least one output type must be provided")
        example = (
            "[Foo, Bar] (for a text answer, str)"
            if where == "output_type"
            else f"{where}([Foo, Bar])"
        )
        raise ConfigurationError(
            f"agent {agent!r}: {where} names no output type (it is empty); give at least "
            f"one, e.g. {example}"
        )
    members = [_as_model(agent, m) or m for m in members]
    refused = [m for m in members if not (isinstance(m, type) and issubclass(m, BaseModel))]
    if refused:
        got = ", ".join(kind_of(m) if m is not None else "None" for m in refused)
        raise ConfigurationError(
            f"agent {agent!r}: a union output_type takes pydantic model classes, other types "
            f"(int, list[Foo]: the response of an object) and str (for a text answer), got "
            f"{got}: None or a value has no JSON schema of its own; use a type, e.g. "
            "int | Foo, or a model, e.g. class Answer(BaseModel): value: int | None"
        )
    return members


def _native(agent: str, marker: NativeOutput) -> OutputSpec:
    """``NativeOutput(A)`` or ``NativeOutput([A, B])``: the ``response_format`` a model class
    or a union of them is sent as; its options and output functions are refused."""
    options = [
        f"{option}={value!r}"
        for option, value in (
            ("name", marker.name),
            ("description", marker.description),
            ("strict", marker.strict),
            ("template", marker.template),
        )
        if value is not None
    ]
    if options:
        raise UnsupportedOutputError(
            f"agent {agent!r}: NativeOutput({', '.join(options)}) is not supported: the "
            "output's JSON schema is sent as the response_format, named and described by its "
            "model class; drop the option(s), or name and describe the class itself"
        )
    members = _members(marker.outputs)
    members = [marker.outputs] if members is None else members
    if str in members or any(
        _is_function(m) or isinstance(m, (ToolOutput, TextOutput, NativeOutput, PromptedOutput))
        for m in members
    ):
        raise UnsupportedOutputError(
            f"agent {agent!r}: NativeOutput takes pydantic model classes only here (no output "
            "functions, markers or str); offer an output function as output_type=fn or "
            "ToolOutput(fn)"
        )
    models = _models(agent, members, "NativeOutput")
    if len(models) == 1:
        return OutputSpec(output_type=models[0])
    return OutputSpec(output_type=_union_output(models))


def _prompted(agent: str, marker: PromptedOutput) -> OutputSpec:
    """``PromptedOutput``: the model class (or union) read from the answer's text, its
    schema in the prompt as pydantic-ai's ``build_instructions`` writes it, no
    ``response_format``."""
    members = _members(marker.outputs)
    members = [marker.outputs] if members is None else members
    if str in members or any(
        _is_function(m) or isinstance(m, (ToolOutput, TextOutput, NativeOutput, PromptedOutput))
        for m in members
    ):
        raise UnsupportedOutputError(
            f"agent {agent!r}: PromptedOutput takes pydantic model classes only here (no "
            "output functions, markers or str); offer an output function as output_type=fn "
            "or ToolOutput(fn)"
        )
    template = marker.template
    if template is not None and template is not False and not isinstance(template, str):
        raise ConfigurationError(
            f"agent {agent!r}: PromptedOutput's template must be text (with a {{schema}} "
            f"placeholder), False or None, got {kind_of(template)}"
        )
    models = _models(agent, members, "PromptedOutput")
    output_type = models[0] if len(models) == 1 else _union_output(models)
    if template is False:
        return OutputSpec(output_type=output_type, native=False)
    # as pydantic-ai's ObjectOutputProcessor and build_instructions write it: no property
    # titles, the docstring after the marker's description, written last
    schema = without_property_titles(output_type.model_json_schema())
    docstring = schema.pop("description", None)
    if marker.name:
        schema["title"] = marker.name
    described = [d for d in (marker.description, docstring) if d]
    if described:
        schema["description"] = ". ".join(described)
    text = PROMPTED_OUTPUT_TEMPLATE if template is None else template
    if "{schema}" not in text:
        text = f"{text}\n\n{{schema}}"
    prompt = text.replace("{schema}", json.dumps(schema))
    return OutputSpec(output_type=output_type, native=False, prompt=prompt)


def _with_markers(agent: str, members: list[Any]) -> OutputSpec:
    """Model classes, output functions and ``ToolOutput`` markers, with ``str`` or a
    ``TextOutput``: each non-text member an output tool, named and described as
    pydantic-ai's ``OutputToolset.build`` does; a text answer is output only with ``str``
    or a ``TextOutput`` (one of them)."""
    texts = [m for m in members if m is str or isinstance(m, TextOutput)]
    if len(texts) > 1:
        raise ConfigurationError(
            f"agent {agent!r}: only one str or TextOutput is allowed in an output_type"
        )
    text_function = None
    if texts and isinstance(texts[0], TextOutput):
        text_function = _text_function(agent, texts[0])
    outputs = [m for m in members if m is not str and not isinstance(m, TextOutput)]
    several = len(outputs) > 1
    tools: dict[str, OutputTool] = {}
    for member in outputs:
        marker = member if isinstance(member, ToolOutput) else ToolOutput(member)
        inner = marker.output
        function: FunctionTool | None = None
        model: type[BaseModel] | None = None
        if inner is str:  # ToolOutput(str): an output tool of {"response": str}, as pydantic-ai's
            inner = _wrapped(agent, str, text=True)
        elif not _is_function(inner):
            inner = _as_model(agent, inner) or inner  # int: {"response": int}
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            base, model = inner.__name__, inner
            parameters, doc = _tool_parameters(inner.model_json_schema()), _docstring(inner)
        elif _is_function(inner):
            base = str(inner.__name__)
            function = FunctionTool(inner, name=_PLACEHOLDER)
            parameters, doc = function.parameters, function.description or None
        else:
            raise ConfigurationError(
                f"agent {agent!r}: an output tool (ToolOutput, or an output_type with output "
                f"functions) takes pydantic model classes, other types (int, list[Foo]: the "
                f"response of an object) and functions, got {kind_of(inner)}"
            )
        name = marker.name
        if name is None:
            name = f"final_result_{re.sub(_UNSAFE, '', base)}" if several else "final_result"
        original, n = name, 1
        while name in tools:
            n += 1
            name = f"{original}_{n}"
        if marker.description and doc:
            description = f"{marker.description}. {doc}"
        else:
            description = marker.description or doc or ""
        if not description:
            description = f"{base}: {FINAL_RESPONSE}" if several else FINAL_RESPONSE
        if function is not None:
            function.name = name  # its problems name the tool the model called
        tools[name] = OutputTool(
            name=name,
            description=description,
            parameters=parameters,
            model=model,
            function=function,
            max_retries=marker.max_retries,
            strict=marker.strict,
        )
    return OutputSpec(tools=tools, allows_text=bool(texts), text_function=text_function)


def _text_function(agent: str, marker: TextOutput) -> FunctionTool:
    """``TextOutput``'s function as a tool of one text argument (and ``ctx``, if it takes
    it), called with the answer: pydantic-ai refuses any other shape, and so do we."""
    fn = marker.output_function
    function = FunctionTool(fn, name="TextOutput") if callable(fn) else None
    properties = function.parameters.get("properties", {}) if function is not None else {}
    if (
        function is None
        or len(properties) != 1
        or next(iter(properties.values())).get("type") != "string"
    ):
        raise ConfigurationError(
            f"agent {agent!r}: TextOutput must take a function taking a single str argument "
            f"(and ctx, for the run's context), got {kind_of(fn)}"
        )
    return function


def _is_function(value: object) -> bool:
    """An output function (pydantic-ai's ``inspect.isfunction or ismethod``)."""
    return inspect.isfunction(value) or inspect.ismethod(value)


def _tool_parameters(schema: dict[str, Any]) -> dict[str, Any]:
    """An output tool's parameters from its type's JSON schema, as pydantic-ai's
    ``GenerateToolJsonSchema`` writes them: no ``title`` on a property (the type's own
    title, and its models' in ``$defs``, stay), and no ``description`` at the top (the
    docstring it holds is in the tool's description already)."""
    schema = without_property_titles(schema)
    schema.pop("description", None)
    return schema


def without_property_titles(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of a JSON schema with no ``title`` on a property, in its ``$defs`` too, as
    pydantic-ai's ``GenerateToolJsonSchema`` writes every output schema (output tools'
    parameters, the native ``response_format``, the prompted schema): the type's own title
    and its models' stay."""
    schema = copy.deepcopy(schema)
    _drop_property_titles(schema)
    return schema


def _drop_property_titles(node: Any) -> None:
    if isinstance(node, dict):
        properties = node.get("properties")
        if isinstance(properties, dict):
            for prop in properties.values():
                if isinstance(prop, dict) and isinstance(prop.get("title"), str):
                    del prop["title"]
        for key, value in node.items():
            if key not in ("default", "examples", "example", "const", "enum"):
                _drop_property_titles(value)
    elif isinstance(node, list):
        for item in node:
            _drop_property_titles(item)


def _docstring(model: type[BaseModel]) -> str | None:
    if issubclass(model, ResponseOutput):  # a wrapped type's schema has no description
        return None
    if issubclass(model, ObjectOutput):  # a TypedDict's docstring (pydantic reads no
        return model.sent_schema.get("description")  # dataclass's made-up one)
    doc = model.__doc__
    return inspect.cleandoc(doc) if doc and doc is not BaseModel.__doc__ else None


def _as_model(agent: str, output_type: object) -> type[BaseModel] | None:
    """The output class ``output_type`` is read as: a model class itself, a dataclass or
    TypedDict as an ``ObjectOutput``, another type (``NoneType`` too) wrapped in a
    ``ResponseOutput``; None for what is no type (a value, None, ``str``, a marker)."""
    if isinstance(output_type, type) and issubclass(output_type, BaseModel):
        return output_type
    return _object(agent, output_type) or _wrapped(agent, output_type)


def _object(agent: str, output_type: object) -> type[BaseModel] | None:
    """A dataclass, TypedDict or ``StructuredDict`` as its ``ObjectOutput`` (None for any other type), as
    pydantic-ai reads a model-like type: unwrapped, its own object schema."""
    if not isinstance(output_type, type) or not (
        dataclasses.is_dataclass(output_type)
        or is_typeddict(output_type)
        or hasattr(output_type, "__structured_schema__")
    ):
        return None
    name = output_type.__name__
    try:
        schema = TypeAdapter(output_type).json_schema()
        reader = create_model(name, __base__=ObjectOutput)
        reader.reader = TypeAdapter(output_type)
        reader.model_rebuild()
    except Exception as exc:  # pydantic's many ways of refusing a type
        if (fix := typed_dict_fix(exc)) is not None:
            raise ConfigurationError(f"agent {agent!r}: output_type {name} {fix}") from None
        raise ConfigurationError(
            f"agent {agent!r}: output_type {name} is no type pydantic can read ({exc}); use "
            "a pydantic model class, a dataclass or a TypedDict (typing_extensions', before "
            "Python 3.12)"
        ) from None
    reader.sent_schema = schema
    return reader


def _wrapped(agent: str, output_type: object, *, text: bool = False) -> type[ResponseOutput] | None:
    """``output_type`` wrapped in ``{"response": ...}`` (``ResponseOutput``), as pydantic-ai
    wraps a type that is not model-like (``NoneType`` too: ``{"response": null}``): None for
    what is no type (a value, None) and for ``str`` (text) unless ``text`` (a
    ``ToolOutput(str)``'s tool). A type pydantic cannot read is a ``ConfigurationError``."""
    if output_type is None or (output_type is str and not text):
        return None
    if (
        not isinstance(output_type, type)
        and typing.get_origin(output_type) is None
        and not _is_alias(output_type)  # an alias of no union: wrapped, as pydantic-ai's
    ):
        return None  # a value, a string, a marker
    name = _type_name(output_type)
    wrapped: Any = output_type
    try:
        schema = TypeAdapter(wrapped).json_schema()
        read: Any = Annotated[wrapped, WrapValidator(_or_its_json)]
        wrapper = create_model(name, __base__=ResponseOutput, response=(read, ...))
        wrapper.model_rebuild()
    except Exception as exc:  # pydantic's many ways of refusing a type
        if (fix := typed_dict_fix(exc)) is not None:
            raise ConfigurationError(f"agent {agent!r}: output_type {name} {fix}") from None
        raise ConfigurationError(
            f"agent {agent!r}: output_type {name} is no type pydantic can read ({exc}); use "
            "a pydantic model class, or a type such as int, list[Foo] or Foo | Bar"
        ) from None
    defs = schema.pop("$defs", None)
    sent: dict[str, Any] = {"$defs": defs} if defs else {}
    sent.update(properties={"response": schema}, required=["response"], type="object")
    wrapper.sent_schema = sent
    return wrapper


def _or_its_json(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A wrapped type's ``response`` as the type, else (a string) as the JSON it holds, as
    pydantic-ai reads ``T | Json[T]``; the problems sent back are the value's own."""
    try:
        return handler(value)
    except ValidationError as exc:
        if not isinstance(value, str):
            raise
        problem = exc
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):  # (nested past what the reader reads: no JSON)
        raise problem from None
    try:
        return handler(parsed)
    except ValidationError:
        raise problem from None


def _type_name(output_type: object) -> str:
    """A type's name as pydantic-ai names its output (``int``; ``list`` for ``list[int]``),
    or, for a union, its members' names joined by ``_or_``."""
    if isinstance(output_type, types.UnionType) or typing.get_origin(output_type) is typing.Union:
        return "_or_".join(_type_name(a) for a in typing.get_args(output_type))
    return str(getattr(output_type, "__name__", None) or repr(output_type))


def _members(output_type: object) -> list[Any] | None:
    """The members of a union (``A | B``, ``Union[A, B]``, ``[A, B]``, a type alias of one:
    ``type Out = A | B``, as pydantic-ai's ``get_union_args`` reads it), else None."""
    if _is_alias(output_type):
        output_type = output_type.__value__  # type: ignore[attr-defined]
    if isinstance(output_type, (list, tuple)):
        return list(output_type)
    if isinstance(output_type, types.UnionType) or typing.get_origin(output_type) is typing.Union:
        return list(typing.get_args(output_type))
    return None


def _is_alias(output_type: object) -> bool:
    """A type alias: ``type Out = ...`` (Python 3.12), ``typing_extensions.TypeAliasType``."""
    return type(output_type).__name__ == "TypeAliasType" and hasattr(output_type, "__value__")


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
    docstring; the members' schemas (and theirs) under one ``$defs``: a dataclass's,
    TypedDict's or ``StructuredDict``'s its own (``ObjectOutput.sent_schema``)."""
    refs, top = models_json_schema(
        [(member, "validation") for member in keyed.values()], ref_template="#/$defs/{model}"
    )
    defs: dict[str, Any] = top.get("$defs", {})
    for member in keyed.values():
        if issubclass(member, ObjectOutput):  # its own schema, not the class reading it's
            own = member.model_json_schema()
            for name, schema in own.pop("$defs", {}).items():
                defs.setdefault(name, schema)
            defs[refs[(member, "validation")]["$ref"].rsplit("/", 1)[1]] = own
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


def output_json_schema(output_type: object) -> dict[str, Any]:
    """The JSON schema of what a run of ``output_type`` outputs, as pydantic-ai's
    ``output_json_schema`` writes it: each type the output may be (``_output_types``) in
    serialization mode, equal ones once; one schema as it is, several as ``{"anyOf": [...]}``
    with their ``$defs`` merged under one (``_merged_defs``)."""
    schemas: list[dict[str, Any]] = []
    for member in _output_types(output_type):
        schema = TypeAdapter(member).json_schema(mode="serialization")
        if schema not in schemas:
            schemas.append(schema)
    if len(schemas) == 1:
        return schemas[0]
    schemas, defs = _merged_defs(schemas)
    merged: dict[str, Any] = {"anyOf": schemas}
    if defs:
        merged["$defs"] = defs
    return merged


def _output_types(output_type: object) -> list[Any]:
    """The types a run's output may be, as pydantic-ai's ``types_from_output_spec`` lists
    them: a union's (or list's) members, a marker's outputs, ``str`` for text (a
    ``TextOutput`` too), an output function's return type (``str`` without one)."""
    if output_type is None:
        return [str]
    members = list(output_type) if isinstance(output_type, (list, tuple)) else [output_type]
    types_: list[Any] = []
    for member in members:
        if isinstance(member, (NativeOutput, PromptedOutput)):
            types_.extend(_output_types(member.outputs))
        elif isinstance(member, TextOutput):
            types_.append(str)
        elif isinstance(member, ToolOutput):
            types_.extend(_output_types(member.output))
        elif (union := _members(member)) is not None:
            types_.extend(union)
        elif _is_function(member):
            returned = typing.get_type_hints(member).get("return")
            types_.extend(_output_types(returned) if returned is not None else [str])
        else:
            types_.append(member)
    return types_


def _merged_defs(schemas: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The schemas with their ``$defs`` taken out into one, as pydantic-ai's
    ``merge_json_schema_defs``: an equal definition once, one of a name taken by another
    renamed ``<title>_<name>_1`` (``_2``...), and the ``$ref`` s to it rewritten."""
    merged: dict[str, Any] = {}
    out: list[dict[str, Any]] = []
    for schema in schemas:
        if "$defs" not in schema:
            out.append(schema)
            continue
        schema = copy.deepcopy(schema)
        defs: dict[str, Any] = schema.pop("$defs")
        mapping: dict[str, str] = {}  # this schema's names -> the merged ones
        for name, definition in defs.items():
            if name not in merged:
                merged[name] = definition
                mapping[name] = name
            elif merged[name] != definition:
                mapping[name] = _unique_def_name(name, schema, merged)
                merged[mapping[name]] = definition
        # an equal definition that refers to a renamed one is not the same: its own copy
        changed = True
        while changed:
            changed = False
            for name, definition in defs.items():
                if name in mapping:
                    continue
                updated = _with_refs_renamed(definition, mapping)
                if updated != definition:
                    mapping[name] = _unique_def_name(name, schema, merged)
                    merged[mapping[name]] = updated
                    changed = True
                else:
                    mapping[name] = name
        for new in mapping.values():
            merged[new] = _with_refs_renamed(merged[new], mapping)
        out.append(_with_refs_renamed(schema, mapping))
    return out, merged


def _unique_def_name(name: str, schema: dict[str, Any], taken: dict[str, Any]) -> str:
    base = f"{schema['title']}_{name}" if schema.get("title") else name
    n = 1
    while f"{base}_{n}" in taken:
        n += 1
    return f"{base}_{n}"


def _with_refs_renamed(node: Any, renamed: dict[str, str]) -> Any:
    if isinstance(node, list):
        return [_with_refs_renamed(item, renamed) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _with_refs_renamed(v, renamed) for k, v in node.items()}
    ref = out.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in renamed:
        out["$ref"] = f"#/$defs/{renamed[ref[8:]]}"
    return out
