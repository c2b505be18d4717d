"""Tools: functions a model may call, and the one place where calling them can go wrong.

    @tool
    async def search(query: str, limit: int = 5) -> list[str]:
        \"\"\"Search the billing archive.\"\"\"

``@tool`` reads the name, the docstring's description and its argument descriptions (``docstrings``)
(Google ``Args:``, Sphinx ``:param x:`` or NumPy ``Parameters`` style) and the signature once, at
decoration time, and builds a pydantic model of the arguments: its JSON Schema is what the
model is offered, its validator checks every call. ``execute_tool_call`` never raises for a
bad call: unknown names, invalid arguments, timeouts and exceptions all come back as an error
``ToolResult`` whose text tells the model what went wrong, so it can correct itself.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import inspect
import json
import math
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Sequence
from dataclasses import is_dataclass
from types import GenericAlias, UnionType
from typing import Annotated, Any, Union, get_args, get_origin, overload

import typing_extensions
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PydanticUserError,
    TypeAdapter,
    ValidationError,
    create_model,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, SchemaError, to_json, to_jsonable_python

from tinyagents._bounds import seconds
from tinyagents._record import FrozenRecord, Record, record
from tinyagents._threads import in_own_thread
from tinyagents.errors import ConfigurationError, ToolError, ToolFailed, kind_of, message_of
from tinyagents.harness.docstrings import read_docstring
from tinyagents.harness.model import Message, ToolCall, ToolSpec
from tinyagents.protocol.ids import shown_repr
from tinyagents.protocol.text import encodes_as_utf8

#: (Text, compiled with its first use by ``re``'s cache, not by ``import tinyagents``.)
#: What OpenAI and most providers accept as a function name.
_NAME_RE = r"[A-Za-z0-9_-]{1,64}"


def is_tool_name(name: object) -> bool:
    """Whether model providers accept ``name`` as a function name."""
    return isinstance(name, str) and re.fullmatch(_NAME_RE, name) is not None


#: The tool OpenAI's models sometimes call to call several at once, though nobody offers it.
PARALLEL_PSEUDO_TOOL = "multi_tool_use.parallel"

#: A parameter with this name receives the call context instead of a model-supplied value
#: (annotated as anything but the context, ``Any`` or ``object``, it is refused).
CTX_PARAM = "ctx"


@record(slots=True, kw_only=True, eq=False, repr=False)
class ToolResult(Record):
    """The outcome of one tool call, as the model will see it."""

    call_id: str
    name: str
    content: str
    error: bool = False
    #: The call was refused before the tool ran (an unknown tool, arguments that are not a
    #: JSON object or do not validate): it is not counted against ``max_tool_calls``.
    refused: bool = False
    #: The tool reported the call done and failed (``ToolFailed``, pydantic-ai's): an error
    #: result not counted against the tool's retries.
    failed: bool = False

    def to_message(self) -> Message:
        """The ``tool`` message that answers the call in the conversation."""
        return Message(
            role="tool",
            content=self.content,
            tool_call_id=self.call_id,
            name=self.name,
            metadata={"error": True} if self.error else {},
        )


class Tool(ABC):
    """Something the model can call. Subclass and override ``call``, or use ``@tool``.

    ``parameters`` is the JSON Schema of the arguments object, offered to the model as it is;
    ``call`` gets the arguments as the model sent them (a JSON object), not validated against
    it (as pydantic-ai's ``Tool.from_schema``): validate them in ``call``, raising ``ToolError``
    to tell the model what is wrong. ``timeout_s`` bounds one call
    (the run's ``tool_timeout_s`` still applies; the smaller wins). A ``call`` that raises
    ``ToolError`` sends its message to the model as is; any other exception is reported with
    its type. ``retries`` caps the failed calls in a row (None: the agent's ``retries``).
    ``sequential`` is pydantic-ai's: the tool's call runs alone, after the calls before it
    and before those after it. Every call is run so here (a response's calls run one at a
    time, in the model's order), so it is carried out by every tool, marked or not.
    ``prepare`` is pydantic-ai's: ``(ctx, spec) -> ToolSpec | None``, sync or async, called
    before each model request that would offer the tool; None hides it from that request,
    a ``ToolSpec`` of the same name (another description or schema) is offered instead.
    """

    def __init__(
        self,
        *,
        name: str,
        description: str = "",
        parameters: dict[str, Any] | None = None,
        timeout_s: float | None = None,
        retries: int | None = None,
        sequential: bool = False,
        prepare: Callable[..., Any] | None = None,
    ) -> None:
        _check_name(name)
        if timeout_s is not None:  # nan: a call that never timed out
            seconds(f"tool {name!r}: timeout_s", timeout_s)
        if not isinstance(description, str):  # providers refuse a tool described otherwise
            raise ConfigurationError(
                f"tool {name!r}: description must be text, got {type(description).__name__}"
            )
        if not encodes_as_utf8(description):  # sent in every request's tool list, unwritable
            raise ConfigurationError(
                f"tool {name!r}: description {description!a} holds a lone surrogate, which no "
                "request can carry: describe the tool with UTF-8 text"
            )
        _check_parameters(name, parameters)
        check_retries(f"tool {name!r}", retries)
        if not isinstance(sequential, bool):  # sequential="no" read as true
            raise ConfigurationError(
                f"tool {name!r}: sequential must be True or False, got {shown_repr(sequential)}"
            )
        check_prepare(f"tool {name!r}: prepare", prepare, "spec")
        self.name = name
        self.description = description
        self.parameters = parameters or {"type": "object", "properties": {}}
        self.timeout_s = timeout_s
        #: How many failed calls in a row (error results) the tool may have: one more ends
        #: the run ``failed`` (pydantic-ai's ``Tool(retries=...)``). None: the agent's
        #: ``retries``, and with neither, no cap.
        self.retries = retries
        #: pydantic-ai's ``sequential``: the tool runs alone, no other call in flight. Every
        #: tool here does (a response's calls run one after another), marked or not.
        self.sequential = sequential
        #: pydantic-ai's ``prepare``: ``(ctx, spec) -> ToolSpec | None``, called before each
        #: model request offering the tool (None: not offered on that request).
        self.prepare = prepare

    def spec(self) -> ToolSpec:
        """The tool as offered to the model."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    @abstractmethod
    async def call(self, args: dict[str, Any], *, ctx: Any = None) -> Any:
        """Run the tool with the model's arguments; ``ctx`` is the caller's run context."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _check_name(name: object) -> None:
    if not is_tool_name(name):
        raise ConfigurationError(
            f"tool name {name!r} is not accepted by model providers: use 1-64 letters, "
            "digits, '_' or '-' (pass name=... to @tool)"
        )


def check_prepare(what: str, prepare: object, given: str) -> None:
    """Refuse a ``prepare`` (``prepare_tools``) that is not a function ``(ctx, <given>)``."""
    if prepare is None:
        return
    try:
        params = [
            p
            for p in inspect.signature(prepare).parameters.values()  # type: ignore[arg-type]
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = None
    if params is None or len(params) != 2:
        raise ConfigurationError(
            f"{what} must be a function (ctx, {given}) returning what a request offers of "
            f"the {given} it is given, got {kind_of(prepare)}"
            + ("" if params is None else f" with {len(params)} positional parameters")
        )


def _check_args_validator(name: str, validator: object) -> None:
    """Refuse an ``args_validator`` that cannot be called ``(ctx, **arguments)``, with its
    tool rather than at its first call."""
    if validator is None:
        return
    try:
        params = list(inspect.signature(validator).parameters.values())  # type: ignore[arg-type]
    except (TypeError, ValueError):
        params = None
    if params is None or not any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params
    ):
        raise ConfigurationError(
            f"tool {name!r}: args_validator must be a function (ctx, **arguments) that raises "
            f"ModelRetry or ToolFailed to refuse a call's arguments, got {kind_of(validator)}"
        )
    # a generator's body runs only when iterated: called, it made a generator that was
    # dropped, and the tool ran on arguments it never checked
    target: Any = validator
    while isinstance(target, functools.partial):
        target = target.func
    if not (inspect.isroutine(target) or inspect.isclass(target)):
        target = type(target).__call__  # a callable object (refused above if not callable)
    target = inspect.unwrap(target)
    if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
        raise ConfigurationError(
            f"tool {name!r}: args_validator must be a function (ctx, **arguments) that raises "
            "ModelRetry or ToolFailed to refuse a call's arguments, not a generator (its body "
            "would never run)"
        )


def check_prepared(name: str, prepared: object) -> ToolSpec | None:
    """What a tool's ``prepare`` returned, checked: None, or a ``ToolSpec`` of the tool's
    own name (a prepare may hide or describe its tool, never offer another: steering's
    narrowing decides which tools a run has) whose description and schema providers
    take; anything else is a ``ConfigurationError``."""
    if prepared is None:
        return None
    if not isinstance(prepared, ToolSpec):
        raise ConfigurationError(
            f"tool {name!r}: prepare must return a ToolSpec or None, got {kind_of(prepared)}"
        )
    if prepared.name != name:
        raise ConfigurationError(
            f"tool {name!r}: prepare renamed it to {prepared.name!r}; a prepare may hide its "
            "tool or change its description and parameters, not its name (rename it with "
            "@tool(name=...) or a toolset's renamed())"
        )
    if not isinstance(prepared.description, str) or not encodes_as_utf8(prepared.description):
        raise ConfigurationError(
            f"tool {name!r}: prepare gave a description that is not UTF-8 text"
        )
    _check_parameters(name, prepared.parameters)
    if not isinstance(prepared.parameters, dict):  # None: _check_parameters let it through
        raise ConfigurationError(f"tool {name!r}: prepare gave no parameters schema")
    return prepared


def check_prepared_tools(
    agent: str, given: Sequence[ToolSpec], prepared: object, *, what: str | None = None
) -> list[ToolSpec]:
    """What an agent's ``prepare_tools`` (``what``: another prepare, e.g. a toolset's)
    returned for the specs ``given``: a list of them (changed or not), each once; adding a
    tool or renaming one is refused, as pydantic-ai's ``PreparedToolset`` refuses it, and so
    is None (its "return ``[]`` to expose no tools")."""
    who = what or f"agent {agent!r}: prepare_tools"
    if prepared is None:
        raise ConfigurationError(
            f"{who} returned None; return [] to expose no tools, or "
            "the specs it was given to pass them through unchanged"
        )
    if not isinstance(prepared, (list, tuple)):
        raise ConfigurationError(f"{who} must return a list of ToolSpecs, got {kind_of(prepared)}")
    names = {s.name for s in given}
    seen: set[str] = set()
    for spec in prepared:
        name = getattr(spec, "name", None)
        if not isinstance(spec, ToolSpec) or name not in names or name in seen:
            raise ConfigurationError(
                f"{who} cannot add or rename tools, nor give one "
                f"twice: it returned {name if isinstance(spec, ToolSpec) else kind_of(spec)!r}"
                f" for {sorted(names)}; hide a tool by leaving it out"
            )
        seen.add(name)
        check_prepared(name, spec)
    return list(prepared)


def check_retries(owner: str, retries: object) -> None:
    """Refuse a retry cap that is no whole number >= 0 (None: no cap of its own)."""
    if retries is not None and (
        isinstance(retries, bool) or not isinstance(retries, int) or retries < 0
    ):
        raise ConfigurationError(
            f"{owner}: retries must be a whole number >= 0 (or None), got {shown_repr(retries)}"
        )


def _check_parameters(name: str, parameters: object) -> None:
    """Refuse a schema providers refuse, at construction: every request of a run offering the
    tool failed at the provider (a pydantic class as an HTTP 500, retried)."""
    if parameters is None:
        return
    if not isinstance(parameters, dict):
        raise ConfigurationError(
            f"tool {name!r}: parameters must be a JSON Schema dict, got "
            f"{type(parameters).__name__}; for a pydantic model pass Model.model_json_schema()"
        )
    kind = parameters.get("type", "object")
    if kind != "object":
        raise ConfigurationError(
            f'tool {name!r}: parameters must describe an object ("type": "object"), got '
            f"{shown_repr(kind)}: a model calls a tool with named arguments"
        )
    try:  # the schema goes to the provider as JSON: a NaN default was invalid JSON on the wire
        written = json.dumps(parameters, allow_nan=False, ensure_ascii=False)
    except RecursionError:
        raise ConfigurationError(
            f"tool {name!r}: its parameters schema is nested too deep to be written as JSON; "
            "a schema sent in every request is a few levels deep (use $defs and $ref for a "
            "recursive type)"
        ) from None
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"tool {name!r}: its parameters schema is not JSON ({exc}): a NaN or infinite "
            "default, or a key or value JSON has no form for; give defaults and choices JSON "
            "can hold"
        ) from exc
    if not encodes_as_utf8(written):  # sent in every request's tool list, as the description
        raise ConfigurationError(
            f"tool {name!r}: its parameters schema holds a lone surrogate (in a description, "
            "a default, a choice or a name), which no request can carry: give it UTF-8 text"
        )


class FunctionTool(Tool):
    """A ``Tool`` backed by a sync or async function; built by ``@tool``."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float | None = None,
        retries: int | None = None,
        sequential: bool = False,
        prepare: Callable[..., Any] | None = None,
        args_validator: Callable[..., Any] | None = None,
    ) -> None:
        # name="" is refused, not replaced by the function's name; and checked before the
        # signature is read (a NUL in it was pydantic's ValueError naming the arguments model)
        if name is not None:
            _check_name(name)
        tool_name: str = str(getattr(fn, "__name__", "")) if name is None else name
        if inspect.isasyncgenfunction(fn):  # its calls answered with the generator's repr
            raise ConfigurationError(
                f"tool {tool_name!r} is an async generator function: a tool returns its "
                "result; collect the items and return them (a list)"
            )
        _check_args_validator(tool_name, args_validator)
        summary, param_docs = read_docstring(fn)
        self.fn = fn
        #: pydantic-ai's ``args_validator``: ``(ctx, **arguments)``, sync or async, called
        #: with the call's validated arguments before the tool runs; it raises ``ModelRetry``
        #: or ``ToolFailed`` to refuse them, as the tool itself would
        self.args_validator = args_validator
        self.is_async = _is_async_callable(fn)
        self._args_model, self._params, self.takes_ctx = _arguments_model(fn, tool_name, param_docs)
        self._model_arg = _model_argument(self._params)
        if self._model_arg is None:
            parameters = _schema(self._args_model)
        else:
            parameters = self._model_arg.schema()
            if not summary and isinstance(parameters.get("description"), str):
                # pydantic-ai's too: a tool with no docstring is described by its model's
                summary = parameters.pop("description")
        super().__init__(
            name=tool_name,
            description=summary if description is None else description,
            parameters=parameters,
            timeout_s=timeout_s,
            retries=retries,
            sequential=sequential,
            prepare=prepare,
        )

    async def call(self, args: dict[str, Any], *, ctx: Any = None) -> Any:
        values = self._validated(args)
        if self.args_validator is not None:
            await self._check_arguments(self.args_validator, values, ctx)
        call_args, call_kwargs = self._bind(values, ctx)
        if self.is_async:
            value = await self.fn(*call_args, **call_kwargs)
        else:
            # A sync tool must not block the event loop, nor (stuck past its timeout) hold one
            # of the loop's few executor workers: a thread of its own, with the caller's
            # contextvars
            value = await in_own_thread(
                _run_sync, self.name, self.fn, call_args, call_kwargs, name=f"tool {self.name}"
            )
        if inspect.isawaitable(value):
            # an async function behind a plain sync decorator, or an async tool's `return
            # fetch(q)` without `await`: the model was answered "<coroutine object …>"
            value = await value
        return value

    async def _check_arguments(
        self, validator: Callable[..., Any], values: dict[str, Any], ctx: Any
    ) -> None:
        """Call the tool's ``args_validator`` with the context and the validated arguments
        by their parameters' names (pydantic-ai's ``args_validator_func(ctx, **args)``); a
        sync one in a thread of its own, as a sync tool is run."""
        named = {p.name: values[n] for n, p in self._params if n != CTX_PARAM}
        if _is_async_callable(validator):
            checked = validator(ctx, **named)
        else:
            checked = await in_own_thread(
                _run_sync, self.name, validator, [ctx], named, name=f"tool {self.name} validator"
            )
        if inspect.isawaitable(checked):
            await checked

    def _bind(self, values: dict[str, Any], ctx: Any) -> tuple[list[Any], dict[str, Any]]:
        positional: list[Any] = []
        keyword: dict[str, Any] = {}
        for field_name, param in self._params:
            value = ctx if field_name == CTX_PARAM else values[field_name]
            if param.kind is inspect.Parameter.POSITIONAL_ONLY:
                positional.append(value)
            else:
                keyword[param.name] = value
        return positional, keyword

    def _validated(self, args: dict[str, Any]) -> dict[str, Any]:
        """The value of each argument (by field name) the model's ``args`` validate to."""
        arg = self._model_arg
        try:
            if arg is None:
                validated = self._args_model.model_validate(args)
                return {n: getattr(validated, n) for n, _ in self._params if n != CTX_PARAM}
            if list(args) == [arg.param]:
                # the model's fields wrapped in the argument's name, as a model offered the
                # tool the other way may send them (pydantic-ai takes this shape too)
                if arg.param not in arg.keys:
                    args = args[arg.param]
                elif isinstance(args[arg.param], dict):
                    # a field of that name: the call as it is, else the fields wrapped in it
                    # (as pydantic-ai reads it); neither fitting, the call's own problems
                    try:
                        return {arg.field: self._model_value(arg, args)}
                    except (ValidationError, InvalidArguments) as exc:
                        try:
                            return {arg.field: self._model_value(arg, args[arg.param])}
                        except (ValidationError, InvalidArguments):
                            raise exc from None
            return {arg.field: self._model_value(arg, args)}
        except ValidationError as exc:
            raise InvalidArguments(_validation_message(self.name, exc)) from exc

    def _model_value(self, arg: _ModelArgument, args: Any) -> Any:
        if not arg.extra and isinstance(args, dict):
            self._refuse_unknown(arg, args)
        return arg.adapter.validate_python(args)

    def _refuse_unknown(self, arg: _ModelArgument, args: dict[str, Any]) -> None:
        """Raise ``InvalidArguments`` for keys of ``args`` the model argument does not name,
        telling every other problem of the call with them, as a tool of plain arguments
        tells them (told one at a time, the model spent a request on each)."""
        unknown = [key for key in args if key not in arg.keys]
        if not unknown:
            return
        try:
            arg.adapter.validate_python({k: v for k, v in args.items() if k in arg.keys})
        except ValidationError as exc:
            extra = "".join(f"; {key}: Extra inputs are not permitted" for key in unknown)
            raise InvalidArguments(
                f"invalid arguments for tool {self.name!r}: {validation_problems(exc)}{extra}. "
                "Call it again with arguments that match its schema."
            ) from exc
        refuse_unknown_arguments(self, args)


@record(slots=True, kw_only=True, frozen=True, eq=False, repr=False)
class _ModelArgument(FrozenRecord):
    """A tool's only argument for the model, when that is a model (a pydantic model, a
    dataclass, a TypedDict): its fields are offered as the tool's arguments, as pydantic-ai
    offers a single model-like argument, rather than as one object wrapping them."""

    field: str  # its field in the arguments model (``p0``, ...)
    param: str  # the parameter's name
    adapter: TypeAdapter[Any]
    keys: frozenset[str]  # the keys its schema names
    #: a model holding it, whose config reads its field docstrings (none for a pydantic
    #: model, which has a config of its own)
    wrapper: type[BaseModel] | None
    extra: bool  # whether the model takes keys its schema does not name

    def schema(self) -> dict[str, Any]:
        schema = _described_schema(self.adapter.json_schema(by_alias=True), self.wrapper)
        _drop_titles(schema)
        if not self.extra:
            # refused as every tool's unknown arguments are: a misspelled one is heard of
            schema.setdefault("additionalProperties", False)
        return schema


def _model_argument(params: list[tuple[str, inspect.Parameter]]) -> _ModelArgument | None:
    """The tool's argument whose fields the tool is offered with, if it has one."""
    given = [(name, param) for name, param in params if name != CTX_PARAM]
    if len(given) != 1:
        return None
    field_name, param = given[0]
    kind = param.annotation
    if not _is_model_like(kind):
        return None
    adapter: TypeAdapter[Any] = TypeAdapter(kind)
    schema = adapter.json_schema(by_alias=True)
    if schema.get("type") != "object":  # a RootModel of a list, say: not named arguments
        return None
    return _ModelArgument(
        field=field_name,
        param=param.name,
        adapter=adapter,
        keys=frozenset(schema.get("properties") or ()),
        wrapper=None
        if issubclass(kind, BaseModel)
        else create_model(f"{param.name}_wrapper", __config__=_READ_DOCSTRINGS, value=(kind, ...)),
        extra=schema.get("additionalProperties", False) is not False,
    )


_READ_DOCSTRINGS = ConfigDict(use_attribute_docstrings=True, defer_build=True)


def _described_schema(schema: dict[str, Any], wrapper: type[BaseModel] | None) -> dict[str, Any]:
    """The model's schema as it is inside ``wrapper``: a TypedDict or a stdlib dataclass has
    no config of its own, and takes the wrapper's, which reads its field docstrings (a
    ``TypeAdapter`` cannot be given a config for it)."""
    if wrapper is None:
        return schema
    outer = wrapper.model_json_schema(by_alias=True)
    ref = outer["properties"]["value"].get("$ref", "")
    defs = dict(outer.get("$defs") or {})
    inner = defs.pop(ref.removeprefix("#/$defs/"), None)
    if inner is None or f'"{ref}"' in json.dumps([inner, defs]):  # recursive: kept as it is
        return schema
    if defs:
        inner["$defs"] = defs
    return dict(inner)


def _is_model_like(kind: Any) -> bool:
    """A pydantic model, a dataclass, a TypedDict class or a ``StructuredDict`` (pydantic-ai's
    ``is_model_like``, which reads ``__is_model_like__``)."""
    return (
        isinstance(kind, type)
        and not isinstance(kind, GenericAlias)
        and (
            issubclass(kind, BaseModel)
            or is_dataclass(kind)
            or typing_extensions.is_typeddict(kind)
            or getattr(kind, "__is_model_like__", False) is True
        )
    )


def _run_sync(name: str, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    """Call a sync tool in its worker thread; a generator's items are taken there too (they
    were taken on the event loop's thread, when the result was made text)."""
    try:
        value = fn(*args, **kwargs)
        return list(value) if isinstance(value, Generator) else value
    except StopIteration:
        # asyncio cannot hand StopIteration from the thread to the awaiting future: the call
        # never ended (until its timeout)
        raise ToolError(
            f"tool {name!r} raised StopIteration: an iterator ran out (next() on an empty one?)"
        ) from None
    except GeneratorExit as exc:
        # thrown into the awaiting run's task, it closed every frame of the run's loop at
        # once, past the handler that makes a tool's error its result: the run failed
        detail = f": {text}" if (text := message_of(exc)) else ""
        raise ToolError(f"tool {name!r} raised GeneratorExit{detail}") from None


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    retries: int | None = None,
    sequential: bool = False,
    prepare: Callable[..., Any] | None = None,
    args_validator: Callable[..., Any] | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    retries: int | None = None,
    sequential: bool = False,
    prepare: Callable[..., Any] | None = None,
    args_validator: Callable[..., Any] | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a ``Tool`` from a function: ``@tool`` or ``@tool(name=..., timeout_s=...,
    retries=..., sequential=..., prepare=..., args_validator=...)`` (``sequential`` as
    pydantic-ai's: the tool runs alone, as every tool's call does here, marked or not;
    ``prepare`` as pydantic-ai's, see ``Tool``; ``args_validator`` as pydantic-ai's:
    ``(ctx, **arguments)``, sync or async, called with the call's validated arguments
    before the tool runs, raising ``ModelRetry`` or ``ToolFailed`` to refuse them, as the
    tool would).

    A parameter named ``ctx`` (or of any name, annotated ``RunContext`` or ``RunContext | None``)
    is not offered to the model; it receives the run context.
    """

    def build(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            f,
            name=name,
            description=description,
            timeout_s=timeout_s,
            retries=retries,
            sequential=sequential,
            prepare=prepare,
            args_validator=args_validator,
        )

    return build(fn) if fn is not None else build


async def execute_tool_call(
    tool: Tool | None,
    call: ToolCall,
    *,
    timeout_s: float | None = None,
    available: Sequence[str] = (),
    ctx: Any = None,
    on_timeout: Callable[[float], None] | None = None,
) -> ToolResult:
    """Run one tool call and turn every way it can fail into an error result for the model.

    ``tool`` is None when the model named a tool it was not offered; ``available`` lists the
    names it may use instead. The effective timeout is the smaller of ``timeout_s`` and the
    tool's own; when it runs out the tool is cancelled and ``on_timeout(limit)`` is called
    (the run watches that the cancellation ends: a cleanup that never ends held it for
    ever). Cancellation of the caller is not caught: it propagates; a ``CancelledError``
    the tool raises while the caller is not being cancelled is an error result.
    """
    if tool is None:
        names = ", ".join(available) or "none"
        if call.name == PARALLEL_PSEUDO_TOOL:
            # "Call one of those" did not say what to do instead of the wrapper
            return _refused(
                call,
                f"{call.name!r} is not a tool: to call several tools, give each a tool call of "
                f"its own, all in one response; available: {names}.",
            )
        return _refused(call, f"unknown tool {call.name!r}; available: {names}. Call one of those.")
    if call.parse_error is not None:
        return _refused(
            call, f"could not read the arguments for tool {call.name!r}: {call.parse_error}"
        )
    if not isinstance(call.args, dict):  # from a custom model or middleware: no tool runs
        return _refused(
            call,
            f"could not read the arguments for tool {call.name!r}: arguments must be a JSON "
            f"object, got {type(call.args).__name__}. Call it again with an object.",
        )
    limit = _smaller(timeout_s, tool.timeout_s)
    try:
        async with _Deadline(limit, on_timeout) as deadline:
            value = await tool.call(call.args, ctx=ctx)
    except TimeoutError as exc:
        if not deadline.expired():
            return _error(call, f"tool {call.name!r} raised TimeoutError: {message_of(exc)}")
        return _error(
            call,
            f"tool {call.name!r} timed out after {limit:g} s and was abandoned; "
            "try a smaller request or another tool",
        )
    except InvalidArguments as exc:
        return _refused(call, message_of(exc))
    except ToolFailed as exc:
        return ToolResult(
            call_id=call.id, name=call.name, content=message_of(exc), error=True, failed=True
        )
    except ToolError as exc:
        return _error(call, message_of(exc))
    except (Exception, GeneratorExit) as exc:
        # GeneratorExit too (no Exception: a generator closed by hand, or raised to stop):
        # let through, it ended the run's task, and the run was left 'running' for ever
        return _error(call, f"tool {call.name!r} raised {type(exc).__name__}: {message_of(exc)}")
    except SystemExit as exc:
        # argparse given arguments it cannot parse, a library's sys.exit: a tool failure.
        # Passed on, it ended the event loop under every run, and left this one 'running'.
        return _error(
            call, f"tool {call.name!r} tried to exit the process (SystemExit: {exc.code})"
        )
    except asyncio.CancelledError as exc:
        if _being_cancelled():
            raise
        # Raised by the tool's own code (a library cancelling its own work), not because the
        # run was cancelled: a tool failure like any other.
        detail = f": {text}" if (text := message_of(exc)) else ""
        return _error(call, f"tool {call.name!r} raised CancelledError{detail}")
    try:
        content = to_text(value)
    except Exception as exc:  # a circular dict, an int past 4300 digits, a __str__ that raises
        return _error(
            call,
            f"tool {call.name!r} returned a {type(value).__name__} that cannot be made text "
            f"({type(exc).__name__}: {message_of(exc)}); return a string or JSON-able data",
        )
    return ToolResult(call_id=call.id, name=call.name, content=content)


class _Deadline:
    """``asyncio.timeout(limit)`` for one tool call, which also calls ``on_expiry(limit)``
    when it runs out: the one timer a call has, not a second one to watch the first."""

    __slots__ = ("_cancelling", "_expired", "_handle", "_limit", "_on_expiry", "_task")

    def __init__(self, limit: float | None, on_expiry: Callable[[float], None] | None) -> None:
        self._limit = limit
        self._on_expiry = on_expiry
        self._expired = False
        self._handle: asyncio.TimerHandle | None = None

    async def __aenter__(self) -> _Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a tool call runs in a task")
        self._task = task
        self._cancelling = task.cancelling()
        if self._limit is not None:
            self._handle = asyncio.get_running_loop().call_later(self._limit, self._expire)
        return self

    def _expire(self) -> None:
        self._handle = None
        self._expired = True
        self._task.cancel()
        if self._on_expiry is not None:
            assert self._limit is not None
            self._on_expiry(self._limit)

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: Any, tb: Any) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if (
            self._expired
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError from exc

    def expired(self) -> bool:
        return self._expired


def _being_cancelled() -> bool:
    """Whether the current task itself has been asked to stop (``Task.cancel``)."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def _error(call: ToolCall, text: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, content=text, error=True)


def _refused(call: ToolCall, text: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, content=text, error=True, refused=True)


class InvalidArguments(ToolError):
    """Raised by a tool whose arguments it cannot use, before it does anything: the call is
    an error result for the model to correct (``ToolResult.refused``), not a tool call run."""


def refuse_unknown_arguments(tool: Tool, args: dict[str, Any]) -> None:
    """Raise ``InvalidArguments`` for an argument ``tool``'s schema does not name: dropped,
    what the model sent in it was lost without a word (``@tool`` refuses them the same way)."""
    known = tool.parameters.get("properties") or {}
    unknown = [name for name in args if name not in known]
    if unknown:
        names = ", ".join(map(repr, unknown))
        raise InvalidArguments(
            f"tool {tool.name!r} takes no argument {names}; its arguments: {sorted(known)}. "
            "Call it again with those."
        )


def _smaller(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


def to_text(value: Any) -> str:
    """What the model reads of a tool's return value: text as it is, anything else as JSON
    (a NaN or infinite float as ``null``), but a value whose JSON is a string (a datetime, a
    UUID, a Decimal, an Enum of text) as that string, unquoted, as pydantic-ai sends it.

    Messages carry text only (pydantic-ai sends a ``BinaryContent`` as a file): bytes that are
    UTF-8 text are that text, other bytes base64 under a line that says so, as pydantic-ai
    dumps a tool's bytes. Bytes (and views of bytes) inside a structure are its UTF-8 text if
    they all are, else all base64."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        try:
            return data.decode()
        except UnicodeDecodeError:
            return f"[binary data: {len(data)} bytes, base64]\n{base64.b64encode(data).decode()}"
    try:
        jsonable = to_jsonable_python(value, fallback=_unserializable)
    except UnicodeDecodeError:  # bytes that are no text, somewhere inside
        jsonable = to_jsonable_python(value, fallback=_unserializable, bytes_mode="base64")
    if isinstance(jsonable, str):
        return jsonable
    try:
        return json.dumps(jsonable, ensure_ascii=False, allow_nan=False)
    except ValueError:
        # a float JSON cannot hold (NaN, an infinity; a pydantic model's too, which pydantic's
        # inf_nan_mode leaves as it is) is null, as pydantic-ai's dump_json sends it: written as
        # Python's NaN / Infinity, no JSON reader takes it
        return json.dumps(_finite(jsonable), ensure_ascii=False)


def _finite(value: Any) -> Any:
    """``value`` (JSON-able data) with each NaN or infinite float replaced by ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _unserializable(value: Any) -> Any:
    """What pydantic cannot serialize: a memoryview is the bytes it views (pydantic knows no
    memoryview), read as the bytes beside it are; anything else its ``str``, so that a tool
    returning such an object still gets through."""
    return bytes(value) if isinstance(value, memoryview) else str(value)


def _is_async_callable(fn: Callable[..., Any]) -> bool:
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable instances with async __call__
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


class _Arguments(BaseModel):
    # Extra keys are refused so the model hears about a misspelled argument instead of
    # having it silently dropped.
    # A TypedDict's or a stdlib dataclass's field docstrings describe its fields, as in
    # pydantic-ai (they take the config of the model they are in): each tool's model reads
    # them (``_FIELD_DOCS``), not this base, whose class statement pydantic would otherwise
    # find and parse with the rest of this file at import (a tenth of ``import tinyagents``).
    model_config = ConfigDict(extra="forbid", protected_namespaces=(), defer_build=True)


#: The config each tool's arguments model adds to ``_Arguments``'.
_FIELD_DOCS = {"use_attribute_docstrings": True}


def _arguments_model(
    fn: Callable[..., Any], name: str, param_docs: dict[str, str]
) -> tuple[type[BaseModel], list[tuple[str, inspect.Parameter]], bool]:
    """A pydantic model of ``fn``'s arguments, and how to map its fields back onto ``fn``.

    Fields are named ``p0``, ``p1`` … with the parameter name as alias, so parameters called
    ``json`` or ``model_config`` do not clash with ``BaseModel`` attributes.
    """
    try:
        signature = inspect.signature(fn, eval_str=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ConfigurationError(f"cannot read the signature of tool {name!r}: {exc}") from exc
    fields: dict[str, Any] = {}
    params: list[tuple[str, inspect.Parameter]] = []
    takes_ctx = False
    for index, param in enumerate(signature.parameters.values()):
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            stars = "*" if param.kind is inspect.Parameter.VAR_POSITIONAL else "**"
            raise ConfigurationError(
                f"tool {name!r} takes {stars}{param.name}: a tool's arguments must be named; "
                "list them as parameters"
            )
        if param.name == CTX_PARAM or _is_run_context(param.annotation):
            _check_ctx_annotation(name, param)
            if takes_ctx:
                raise ConfigurationError(
                    f"tool {name!r} takes the run's context twice ({param.name!r} too): one "
                    "parameter named ctx (or annotated RunContext) receives it"
                )
            takes_ctx = True
            params.append((CTX_PARAM, param))
            continue
        field_name = f"p{index}"
        default = ... if param.default is inspect.Parameter.empty else param.default
        annotation = Any if param.annotation is inspect.Parameter.empty else param.annotation
        extra: dict[str, Any] = {}
        if param.name in param_docs and not _describes(annotation, default):
            extra["description"] = param_docs[param.name]  # a Field's own description wins
        if isinstance(default, FieldInfo):
            # `limit: int = Field(5, ge=1)`, read as pydantic's validate_call reads it: its
            # constraints and description go with the type, its default (or factory) stays
            # the default (the FieldInfo itself was, handed to the tool)
            annotation = Annotated[annotation, default]
            if default.default_factory is not None:
                extra["default_factory"] = default.default_factory
            default = ... if default.default is PydanticUndefined else default.default
        # Only set what we know: a None description would hide one given in Annotated[...].
        info = Field(default, alias=param.name, **extra)
        fields[field_name] = (annotation, info)
        params.append((field_name, param))
    try:
        model = create_model(
            f"{name}_arguments", __base__=_Arguments, __cls_kwargs__=_FIELD_DOCS, **fields
        )
        model.model_json_schema(by_alias=True)
    # a type pydantic cannot make a schema of; a constraint it cannot use (SchemaError); a
    # choice (Literal, Enum) it cannot write as JSON (PydanticSerializationError, a ValueError)
    except (PydanticUserError, SchemaError, ValueError) as exc:
        if (fix := typed_dict_fix(exc)) is not None:
            raise ConfigurationError(f"tool {name!r}: a parameter {fix}") from None
        raise ConfigurationError(
            f"tool {name!r}: its parameters cannot be arguments a model gives ({exc}); "
            "annotate each with a JSON type (str, int, a pydantic model, ...), and name the "
            f"parameter that receives the run's context {CTX_PARAM!r} (or annotate it RunContext)"
        ) from exc
    return model, params, takes_ctx


def _describes(annotation: Any, default: Any) -> bool:
    """Whether a parameter's ``Field`` (in ``Annotated[...]`` or as its default) describes it."""
    infos = [default, *(get_args(annotation)[1:] if get_origin(annotation) is Annotated else ())]
    return any(isinstance(info, FieldInfo) and info.description is not None for info in infos)


def _check_ctx_annotation(name: str, param: inspect.Parameter) -> None:
    """Refuse a parameter named ``ctx`` typed as something the model would give (``ctx:
    int``): it would be handed the run's context, and the model's ``ctx`` refused."""
    annotation = param.annotation
    if annotation in (inspect.Parameter.empty, Any, object) or _is_run_context(annotation):
        return
    if isinstance(annotation, str) and "RunContext" in annotation:
        return  # `ctx: "RunContext"` quoted under future annotations: read as the string
    raise ConfigurationError(
        f"tool {name!r}: its parameter {CTX_PARAM!r} is annotated {annotation!r}, but a "
        f"parameter named {CTX_PARAM!r} receives the run's context (a RunContext); annotate "
        "it RunContext (or leave it unannotated), or rename it to take it from the model"
    )


def _is_run_context(annotation: Any) -> bool:
    """Whether a parameter's annotation is ``RunContext`` (a parameter of any name that
    receives the run's context, as pydantic-ai finds its ``RunContext`` by its type). Matched
    by name: ``harness.context`` imports this module. ``RunContext | None`` counts too."""
    if get_origin(annotation) in (Union, UnionType):
        kinds = [a for a in get_args(annotation) if a is not type(None)]
        return len(kinds) == 1 and _is_run_context(kinds[0])
    return isinstance(annotation, type) and any(
        c.__name__ == "RunContext" and c.__module__ == "tinyagents.harness.context"
        for c in annotation.__mro__
    )


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True)
    _drop_titles(schema)
    return schema


def _drop_titles(node: Any, *, named: bool = False) -> None:
    """Remove pydantic's generated ``title``s: noise in every prompt that carries the schema.
    Values in the schema (a default, an example, a constant) are the user's, kept as given;
    ``named``: ``node`` maps names to schemas (``properties``, ``$defs``)."""
    if isinstance(node, dict):
        if named:
            for value in node.values():
                _drop_titles(value)
            return
        if isinstance(node.get("title"), str):
            del node["title"]
        for key, value in node.items():
            if key not in _SCHEMA_VALUES:
                _drop_titles(value, named=key in _SCHEMA_NAMES)
    elif isinstance(node, list):
        for item in node:
            _drop_titles(item)


#: The keys of a JSON Schema whose value is data, not schema.
_SCHEMA_VALUES = frozenset({"default", "examples", "example", "const", "enum"})
#: The keys of a JSON Schema whose value maps names to schemas.
_SCHEMA_NAMES = frozenset({"properties", "$defs", "definitions", "patternProperties"})

#: How many of a call's argument problems its error result names, and how much of each bad
#: value it quotes: the model reads the result, and a 100 000-character value (or a list of
#: 5 000 bad items) echoed back whole filled its context on every retry.
_SHOWN_PROBLEMS = 10
_QUOTED_VALUE = 200


def _validation_message(name: str, exc: ValidationError) -> str:
    return (
        f"invalid arguments for tool {name!r}: {validation_problems(exc)}. "
        "Call it again with arguments that match its schema."
    )


def validation_problems(exc: ValidationError, whole: str = "arguments") -> str:
    """What is wrong, for a model to read: each problem's place, message and (shortened)
    value, at most ``_SHOWN_PROBLEMS`` of them. ``whole`` names the place of a problem with
    the whole value (not one of its fields): a call's ``arguments``, or an ``answer``."""
    errors = exc.errors(include_url=False)
    problems = []
    for error in errors[:_SHOWN_PROBLEMS]:
        where = ".".join(str(part) for part in error["loc"]) or whole
        got = ""
        if error["type"] not in ("missing", "extra_forbidden") and "input" in error:
            got = f" (got {_quoted(repr(error['input']))})"
        problems.append(f"{where}: {error['msg']}{got}")
    if len(errors) > _SHOWN_PROBLEMS:
        problems.append(f"and {len(errors) - _SHOWN_PROBLEMS} more problems")
    return "; ".join(problems)


#: How much of an error's input (as JSON) a retry prompt in pydantic-ai's words quotes: more
#: than ``_QUOTED_VALUE``, since its input below the top level is the whole object a field
#: belongs to (a missing field's), which pydantic-ai sends as it is.
_QUOTED_INPUT = 2000


def typed_dict_fix(exc: BaseException) -> str | None:
    """What to do about ``exc`` when it is pydantic refusing a ``typing.TypedDict`` (it reads
    only ``typing_extensions``' before Python 3.12: its ``typed-dict-version`` error), said
    plainly; None for any other error."""
    if not (isinstance(exc, PydanticUserError) and exc.code == "typed-dict-version"):
        return None
    version = ".".join(str(part) for part in sys.version_info[:2])
    return (
        "is or holds a typing.TypedDict, which pydantic reads only from Python 3.12: on "
        f"Python {version} declare it with typing_extensions.TypedDict "
        "(from typing_extensions import TypedDict)"
    )


def retry_errors(exc: ValidationError, *, tool: bool) -> str:
    """The validation errors of an answer (``tool=False``) or of an output tool call's
    arguments (``tool=True``) as pydantic-ai's ``RetryPromptPart.model_response()`` writes
    them: ``N validation error(s):`` and their JSON in a fence, each without its ``ctx``, and,
    for an answer, without the ``input`` of an error at the top level (the answer itself,
    already in the conversation). Bounded where pydantic-ai is not, as ``validation_problems``
    is: the first ``_SHOWN_PROBLEMS`` errors, then how many more, each input longer than
    ``_QUOTED_INPUT`` characters of JSON shortened to that text."""
    found = exc.errors(include_url=False, include_context=False)
    shown = []
    for error in found[:_SHOWN_PROBLEMS]:
        item: dict[str, Any] = {
            k: v for k, v in error.items() if k != "input" or tool or len(error["loc"]) > 1
        }
        if "input" in item:
            text = to_json(item["input"], fallback=str).decode()
            if len(text) > _QUOTED_INPUT:
                item["input"] = (
                    f"{text[:_QUOTED_INPUT]}… (and {len(text) - _QUOTED_INPUT} more characters)"
                )
        shown.append(item)
    text = to_json(shown, indent=2, fallback=str).decode()
    more = len(found) - len(shown)
    rest = f"\nand {more} more errors not shown" if more else ""
    plural = "" if len(found) == 1 else "s"
    return f"{len(found)} validation error{plural}:\n```json\n{text}\n```{rest}"


def _quoted(text: str) -> str:
    if len(text) <= _QUOTED_VALUE:
        return text
    return f"{text[:_QUOTED_VALUE]}… (and {len(text) - _QUOTED_VALUE} more characters)"
