"""State schemas: a TypedDict, a dataclass or a pydantic model, read into channels.

Each field becomes a channel with a reducer (from ``Annotated[T, reducer]``, overwrite
otherwise), a default (dataclass / pydantic field defaults; for a reducer field with none, its
type's empty value, as LangGraph's) and a lazily built
``TypeAdapter`` that turns checkpointed JSON back into ``T``.

Nodes see the state as a read-only mapping (TypedDict states) or as an instance of the
schema class made by the class once per superstep, as LangGraph builds a node's input (a
dataclass's ``__post_init__`` runs, a pydantic model validates).
Checkpoint values must survive ``pydantic_core.to_jsonable_python`` and come back through
``TypeAdapter(T)``: JSON types, pydantic models, dataclasses, TypedDicts, sets, tuples,
enums, datetimes and UUIDs do; fields typed ``Any`` come back as plain JSON.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import inspect
import operator
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, NoReturn, get_args, get_origin

import typing_extensions
from pydantic import (
    BaseModel,
    Discriminator,
    PydanticUserError,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import to_json

from tinyagents._record import Record
from tinyagents.errors import ConfigurationError, GraphValidationError, InvalidUpdateError
from tinyagents.graph.langchain import NOT_A_MESSAGE, TAKES, revive_messages
from tinyagents.graph.reducers import (
    MISSING,
    Append,
    LastValue,
    Messages,
    Overwrite,
    Reducer,
    UntrackedValue,
    empty_value,
    overwritten,
    resolve,
)
from tinyagents.protocol.ids import shown_repr


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class Channel(Record):
    """One state field: its reducer, default and JSON decoder."""

    name: str
    annotation: Any
    reducer: Reducer
    default: Callable[[], Any] | None = None
    #: a pydantic state's constraints on an overwrite field (``Field(ge=0)``, ``conint``):
    #: a value written from outside must meet them (a reducer's update is a part, not the
    #: value, so its field's are not applied)
    constraints: tuple[Any, ...] = ()
    _adapter: TypeAdapter[Any] | None = None
    #: the field's type holds ``float`` (read with the adapter): ``decode`` gives back ints
    _floats: bool = False
    #: the field's type read with each union arm's ``TypeError`` an invalid arm (``_tolerant``)
    _tolerant_adapter: TypeAdapter[Any] | None = None

    def adapter(self) -> TypeAdapter[Any]:
        if self._adapter is None:
            annotation = self.annotation
            if self.constraints:
                annotation = Annotated[(annotation, *self.constraints)]  # type: ignore[valid-type]
            self._floats = _holds_float(annotation)
            self._adapter = TypeAdapter(annotation)
        return self._adapter

    def decode(self, value: Any) -> Any:
        """JSON → Python, strictly: a value is read back as the field's type only where its
        JSON is that type's (an ISO string a ``datetime``, a list a ``tuple``, an object a
        model); one a node wrote of another type (``"7"`` for an ``int``) stays as written,
        as LangGraph's channels keep it, and so do values a custom reducer wrote in another
        shape. An ``add_messages`` channel's saved LangChain messages come back as LangChain
        messages even where the field's type does not say so (``revive_messages``)."""
        adapter = self.adapter()
        try:
            if isinstance(self.reducer, Messages):
                return _revived(adapter.validate_python(value))
            try:  # JSON types: as fast as a lax read
                decoded = adapter.validate_python(value, strict=True)
            except ValidationError:  # the JSON of another type, or not the field's type
                decoded = adapter.validate_json(to_json(value), strict=True)
        except ValidationError:
            return value
        # TypeError: LangChain's AnyMessage, reading a dict with no "type" (a role dict a
        # field typed as LangChain messages once kept); or a union, one of whose classes
        # has an ``__init__`` of its own that another arm's dict does not fit (LangChain's
        # ``AgentAction | AgentFinish``: ``AgentFinish.__init__`` raises, and pydantic's read
        # of the union stops there): read again with such an arm taken as not matching
        except TypeError:
            tolerant = self._tolerant_adapter
            if tolerant is None:
                try:
                    tolerant = TypeAdapter(_tolerant(self.annotation))
                except PydanticUserError:  # a union pydantic reads only as it was written
                    tolerant = self.adapter()
                self._tolerant_adapter = tolerant
            try:
                decoded = tolerant.validate_json(to_json(value), strict=True)
            except (ValidationError, TypeError):
                return value
        return _ints_kept(value, decoded) if self._floats else decoded


_CONTAINERS = (list, set, frozenset, tuple, dict, collections.abc.Sequence, collections.abc.Mapping)


def _tolerant(annotation: Any) -> Any:
    """``annotation`` with each union arm, at any depth of unions and containers, read so a
    ``TypeError`` its class raises (an ``__init__`` of its own given another arm's fields)
    is that arm not matching, and the union tries its next arm."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        meta = annotation.__metadata__
        if any(isinstance(m, Discriminator) or getattr(m, "discriminator", None) for m in meta):
            return annotation  # a tagged union (LangChain's AnyMessage): it tries no arms
        return Annotated[(_tolerant(args[0]), *meta)]  # type: ignore[valid-type]
    if origin in (typing.Union, types.UnionType):
        arms = [Annotated[_tolerant(a), _TYPE_ERROR_INVALID] for a in args]
        return functools.reduce(operator.or_, arms)
    if origin in _CONTAINERS and args:
        return origin[tuple(a if a is Ellipsis else _tolerant(a) for a in args)]
    return annotation


def _type_error_invalid(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    try:
        return handler(value)
    except TypeError as exc:
        raise ValueError(str(exc)) from exc


_TYPE_ERROR_INVALID = WrapValidator(_type_error_invalid)


def _holds_float(annotation: Any) -> bool:
    """Whether ``float`` is in ``annotation`` (``float``, ``list[float]``, ``float | None``)."""
    return annotation is float or any(_holds_float(arg) for arg in get_args(annotation))


def _ints_kept(value: Any, decoded: Any) -> Any:
    """``decoded`` with the ints of ``value`` that a strict read still makes floats given back
    as written (a ``float`` field keeps the ``7`` a node wrote, as LangGraph's channels keep
    it), in lists, tuples and dicts too."""
    if type(decoded) is float:
        return value if type(value) is int else decoded
    if type(value) is list and type(decoded) in (list, tuple) and len(value) == len(decoded):
        return type(decoded)(map(_ints_kept, value, decoded))
    if type(value) is dict and type(decoded) is dict and len(value) == len(decoded):
        return {
            key: _ints_kept(item, new)
            for item, (key, new) in zip(value.values(), decoded.items(), strict=True)
        }
    return decoded


def _revived(value: Any) -> Any:
    return revive_messages(value) if type(value) is list else value


class Managed:
    """Marks a state field the run fills in for each step (LangGraph's managed values): it is
    no channel, nothing writes or saves it, and nodes and their routers read it."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Managed({self.name!r})"


#: Steps this run may still take, counting the current one (``recursion_limit`` minus the
#: steps it took before this one, minus one): ``remaining_steps: RemainingSteps``.
RemainingSteps = Annotated[int, Managed("remaining_steps")]
#: True in the step before the last one the recursion limit allows, as LangGraph's.
IsLastStep = Annotated[bool, Managed("is_last_step")]


def managed_values(managed: dict[str, str], remaining: int) -> dict[str, Any]:
    """The values of the ``managed`` fields (name -> kind) with ``remaining`` steps to go."""
    return {
        name: remaining if kind == "remaining_steps" else remaining == 1
        for name, kind in managed.items()
    }


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class StateSchema(Record):
    """The channels of a state class and how nodes see its values."""

    cls: Any
    kind: str  # "dict" | "dataclass" | "pydantic" | "root"
    #: LangGraph's one-value state (``StateGraph(int)``, ``StateGraph(Annotated[list,
    #: operator.add])``): one channel, ``ROOT``; nodes take and return the value itself
    root: bool = False
    channels: dict[str, Channel] = field(default_factory=dict)
    #: managed fields: name -> "remaining_steps" or "is_last_step"
    managed: dict[str, str] = field(default_factory=dict)
    #: the keys run input is read through (``StateGraph(input_schema=...)``); None: all
    input_keys: frozenset[str] | None = None
    #: the keys a run's result holds (``StateGraph(output_schema=...)``); None: all
    output_keys: frozenset[str] | None = None
    #: the classes of ``StateGraph(input_schema=..., output_schema=...)`` (None: ``cls``),
    #: which ``get_input_jsonschema`` / ``get_output_jsonschema`` describe
    input_cls: Any = None
    output_cls: Any = None
    #: the state class's own schema, once the channels hold more (the input and output
    #: schemas' keys, nodes' private keys): what a node or router without a schema of its
    #: own sees, as LangGraph's default node input is the state schema; None: all channels
    state: StateSchema | None = None
    #: the ``add_messages`` channels typed as LangChain messages (``Messages.langchain``):
    #: a node's writes to them are made LangChain messages as it returns (``node_writes``)
    langchain_keys: frozenset[str] = frozenset()
    #: the ``UntrackedValue`` channels: never saved in a checkpoint, a pending write or a
    #: saved ``Send`` argument (``checkpointing.save``, ``result_write``)
    untracked: frozenset[str] = frozenset()

    def own(self, values: dict[str, Any]) -> dict[str, Any]:
        """``values`` with this schema's channels only: what a node or router whose input
        schema this is sees of the state."""
        return {k: v for k, v in values.items() if k in self.channels}

    def own_schema(self) -> StateSchema:
        """A copy of this schema as the state class alone has it (``state``), before other
        schemas' keys join the channels."""
        return dataclasses.replace(
            self, channels=dict(self.channels), input_keys=None, output_keys=None
        )

    def with_io(self, input_schema: Any, output_schema: Any) -> StateSchema:
        """This schema with LangGraph's input and output schemas: the channels are the union
        of the three schemas' fields (the state's own channel wins for a shared name); input
        is read through the input schema's keys and results hold the output schema's."""
        if self.root and {input_schema, output_schema} - {None, self.cls}:
            raise ConfigurationError(
                f"StateGraph({self.cls!r}) is a one-value state: it takes no input_schema or "
                "output_schema (its input and output are the value)"
            )
        schema = dataclasses.replace(self, channels=dict(self.channels))
        for role, cls in (("input_schema", input_schema), ("output_schema", output_schema)):
            if cls is None or cls is self.cls:
                continue
            other = read_schema(cls)
            if other.managed:
                raise ConfigurationError(
                    f"{role} {getattr(cls, '__name__', cls)!r} has managed value(s) "
                    f"{sorted(other.managed)}; they belong in the state schema only"
                )
            for name, channel in other.channels.items():
                schema.channels.setdefault(name, channel)
            schema.langchain_keys = _langchain_keys(schema.channels)
            schema.untracked = _untracked_keys(schema.channels)
            keys = frozenset(other.channels)
            if role == "input_schema":
                schema.input_keys, schema.input_cls = keys, cls
            else:
                schema.output_keys, schema.output_cls = keys, cls
        if len(schema.channels) > len(self.channels):  # the other schema's keys stay its own
            schema.state = self
            state_keys = frozenset(self.channels)
            if schema.input_keys is None:
                schema.input_keys = state_keys
            if schema.output_keys is None:
                schema.output_keys = state_keys
        return schema

    def command_writes(self, update: Any, who: str) -> list[tuple[str, Any]]:
        """The writes of a ``Command(update=...)`` (a node's, run input's, a resume's): as a
        node's return (``writes_of``); None writes nothing."""
        if self.root:
            return [] if update is None else root_writes(update)
        return self.writes_of(update or {}, who)

    def output(self, values: dict[str, Any]) -> dict[str, Any]:
        """What a run returns of ``values``: the output schema's keys (all by default)."""
        keys = self.output_keys
        if keys is None:
            return values
        return {k: v for k, v in values.items() if k in keys}

    def in_field_order(self, values: dict[str, Any]) -> None:
        """Put the keys of ``values`` (in place) in the order of the fields: a key a write
        added lands at the end of the dict, while outputs, the values stream and
        ``get_state`` list them as LangGraph's do. Called only when a key was added."""
        if len(values) < 2:  # (a first key: in order already)
            return
        order = [k for k in self.channels if k in values]
        if len(order) == len(values) and order != list(values):
            moved = {k: values[k] for k in order}
            values.clear()
            values.update(moved)

    def initial(self) -> dict[str, Any]:
        """Channel values of a fresh thread: the start value of each field with a reducer,
        which its first writes fold into (its default, else its type's empty value as
        LangGraph's: ``reducers.empty_value``). A field without one has no value until written
        (as LangGraph's: outputs and ``get_state`` hold written channels only); nodes see its
        default (``view``)."""
        return {
            name: ch.default()
            for name, ch in self.channels.items()
            if ch.default is not None and not isinstance(ch.reducer, LastValue)
        }

    def view(self, values: dict[str, Any]) -> Any:
        """What a node receives: no copy of the values. A dataclass or pydantic state is an
        instance made by its class, as LangGraph builds each node's input
        (``schema(**values)``): the defaults of the fields not written yet filled in, a
        dataclass's ``__post_init__`` run, a pydantic model's values coerced (``"5"`` -> 5)
        and its validators run, while the channels keep what was written. A value the model
        refuses (pydantic's ``ValidationError``) or a required field no one wrote fails the
        node that reads it."""
        if self.kind == "dict":
            return StateView(values)
        if self.root:
            return values.get(ROOT)
        return self.cls(**values)

    def check_keys(self, update: Mapping[str, Any], who: str) -> None:
        if update.keys() <= self.channels.keys():
            return
        unknown = [k for k in update if k not in self.channels]
        if unknown:
            private = sorted(set(unknown) & set(getattr(self.cls, "__private_attributes__", ())))
            why = (
                f" ({private} are private attributes of pydantic model {self.cls.__name__} "
                "(PrivateAttr), which are no fields and so no state keys; declare a field)"
                if private
                else ""
            )
            raise InvalidUpdateError(
                f"{who} wrote unknown state key(s) {sorted(unknown)}; the state has "
                f"{sorted(self.channels)}{why}"
            )

    def writes_of(self, update: Any, who: str, *, pairs: bool = True) -> list[tuple[str, Any]]:
        """A node's return value or a ``Command.update`` → channel writes: a mapping of state
        keys, a list of ``(key, value)`` pairs (a ``Command.update`` only, ``pairs``, as
        LangGraph takes them; a key given twice is written twice, which a reducer channel
        takes and an overwrite channel refuses), or an instance of a dataclass / pydantic
        state, read as LangGraph reads one: every field of a dataclass; every field of a
        pydantic model but those that are None, default to None and were not set. A
        one-value state's update is the value (``root_writes``)."""
        if self.root:
            return root_writes(update, pairs=pairs)
        if isinstance(update, Mapping):
            self.check_keys(update, who)
            return list(update.items())
        if pairs and _pairs(update):  # LangGraph's Command(update=[(key, value), ...])
            writes = [(key, value) for key, value in update]
            self.check_keys(dict(writes), who)
            return writes
        channels = self.channels
        if isinstance(update, BaseModel):
            fields = type(update).model_fields
            explicit = update.model_fields_set
            found = []
            for key in [k for k in fields if k in channels]:  # field order, as LangGraph's
                value = getattr(update, key, MISSING)
                if value is MISSING:  # a required field model_construct left out
                    continue
                if value is not None or fields[key].default is not None or key in explicit:
                    found.append((key, value))
            return found
        if dataclasses.is_dataclass(update) and not isinstance(update, type):
            return [
                (f.name, getattr(update, f.name))
                for f in dataclasses.fields(update)
                if f.name in channels and hasattr(update, f.name)
            ]
        raise InvalidUpdateError(
            f"{who} returned a {type(update).__name__}; return a dict of state updates, "
            f"a {self.cls.__name__}, a Command or None"
        )

    def update_of(self, update: Any) -> dict[str, Any]:
        """What ``update_state`` was given → a dict of state keys: a mapping, or an instance
        of a dataclass / pydantic state, read as a node's return is (LangGraph's reads one
        so); anything else is an ``InvalidUpdateError``, as LangGraph's "Expected dict". A
        one-value state's is the value (None: nothing)."""
        if self.root:
            return {} if update is None else {ROOT: update}
        if isinstance(update, Mapping):
            return dict(update)
        if isinstance(update, BaseModel) or (
            dataclasses.is_dataclass(update) and not isinstance(update, type)
        ):
            return dict(self.writes_of(update, "update_state", pairs=False))
        raise InvalidUpdateError(
            f"update_state takes a dict of state updates or a {self.cls.__name__}, "
            f"got {type(update).__name__}"
        )

    def coerce_input(self, data: Any) -> dict[str, Any]:
        """Run input → channel writes; validated here, at the boundary, for pydantic states.
        With an input schema, state keys outside it are left out (as LangGraph reads input
        through its input schema); a key of no schema is refused either way. A one-value
        state's input is the value."""
        if self.root:
            return {ROOT: data}
        if (
            type(data) is dict
            and self.kind == "dict"
            and self.input_keys is None
            and not self.langchain_keys
        ):
            self.check_keys(data, "the input")
            return data
        if isinstance(data, BaseModel):
            # as LangGraph reads an instance (and writes_of a node's): its fields set, and
            # those whose default is not None
            writes = dict(self.writes_of(data, "the input", pairs=False))
        elif dataclasses.is_dataclass(data) and not isinstance(data, type):
            writes = {
                f.name: getattr(data, f.name)
                for f in dataclasses.fields(data)
                if f.name not in self.managed
            }
        elif not isinstance(data, Mapping):
            raise InvalidUpdateError(
                f"graph input must be a mapping, a {self.cls.__name__} or a Command, "
                f"got {type(data).__name__}"
            )
        else:
            self.check_keys(data, "the input")
            keys = self.input_keys
            if keys is not None:
                data = {k: v for k, v in data.items() if k in keys}
            writes = self.check_update(data, "the input", "graph input")
            if self.kind == "pydantic":
                self._run_validators(writes)
            return writes
        keys = self.input_keys
        return writes if keys is None else {k: v for k, v in writes.items() if k in keys}

    def _run_validators(self, writes: dict[str, Any]) -> None:
        """Run input to a pydantic state meets the model's own validators too (field and
        model validators), as LangGraph validates input against the model: an error is an
        ``InvalidUpdateError``. The values stay as given (as LangGraph keeps them); a field
        the input leaves out is no error (it keeps the thread's value or its default)."""
        try:
            self.cls.model_validate(
                {k: v.value if type(v) is Overwrite else v for k, v in writes.items()}
            )
        except ValidationError as exc:
            problems = [e for e in exc.errors() if e["type"] != "missing"]
            if problems:
                where = ".".join(map(str, problems[0]["loc"])) or self.cls.__name__
                raise InvalidUpdateError(
                    f"invalid graph input for {where!r}: {problems[0]['msg']}"
                ) from None

    def check_update(self, update: Mapping[str, Any], who: str, what: str) -> dict[str, Any]:
        """An update from outside the graph (run input, ``update_state``, steering) → channel
        writes: unknown keys refused, values validated for pydantic states, and the writes
        to a field typed as LangChain messages made LangChain messages."""
        self.check_keys(update, who)
        if self.kind != "pydantic" and not self.langchain_keys:
            return dict(update)
        writes: dict[str, Any] = {}
        for key, value in update.items():
            channel = self.channels[key]
            reducer = channel.reducer
            try:
                if isinstance(reducer, Messages) and not overwritten(value)[0]:
                    # ("user", "hi") is a message, one message a list, as LangGraph's
                    # pydantic MessagesState takes them; a role dict or a string the
                    # LangChain message LangGraph makes of it, where only those fit
                    value = reducer.items(value)
                if self.kind != "pydantic":
                    writes[key] = value
                    continue
                is_overwrite, inner = overwritten(value)
                checked = channel.adapter().validate_python(inner if is_overwrite else value)
            # LangChain's errors, and pydantic's (ValidationError is a ValueError)
            except NOT_A_MESSAGE as exc:
                raise InvalidUpdateError(f"invalid {what} for {key!r}: {exc}") from None
            # an Overwrite's value is checked as the field's, and stays an Overwrite
            writes[key] = Overwrite(checked) if is_overwrite else checked
        return writes

    def node_writes(self, writes: list[tuple[str, Any]], who: str) -> list[tuple[str, Any]]:
        """``writes`` of a node (``who``) with those to a field typed as LangChain messages
        made LangChain messages, as LangGraph's reducer makes them: read as the node returns,
        so a write that is no message fails the node, named. (The reducer reads every write
        so too; the messages it gets here are kept.)"""
        keys = self.langchain_keys
        if not any(key in keys for key, _ in writes):
            return writes
        read = []
        for key, value in writes:
            if key in keys and not overwritten(value)[0]:
                reducer = self.channels[key].reducer
                assert isinstance(reducer, Messages)  # what langchain_keys holds
                try:
                    value = reducer.items(value)
                except NOT_A_MESSAGE as exc:
                    raise InvalidUpdateError(
                        f"{who} wrote an invalid message to {key!r}: {exc} ({TAKES})"
                    ) from None
            read.append((key, value))
        return read


def _managed(annotation: Any) -> str | None:
    if get_origin(annotation) is Annotated:
        for extra in get_args(annotation)[1:]:
            if isinstance(extra, Managed):
                return extra.name
    return None


def _untracked(annotation: Any) -> UntrackedValue | None:
    """The ``UntrackedValue`` anywhere in ``Annotated[T, ...]`` (LangGraph finds a channel
    so, before a reducer in the last place): ours or LangGraph's, the class or an instance
    (LangGraph's ``guard`` kept)."""
    if get_origin(annotation) is not Annotated:
        return None
    for extra in get_args(annotation)[1:]:
        if isinstance(extra, UntrackedValue):
            return extra
        if extra is UntrackedValue:
            return UntrackedValue()
        kind = extra if isinstance(extra, type) else type(extra)
        if kind.__name__ == "UntrackedValue" and kind.__module__.startswith("langgraph.channels"):
            return UntrackedValue(guard=getattr(extra, "guard", True) is not False)
    return None


def _refuse_langgraph_channel(cls: type, name: str, annotation: Any) -> None:
    """A LangGraph channel instance in ``Annotated[...]`` (``EphemeralValue(str)``,
    ``Topic(str)``, ...) is not a reducer: it was skipped, and the field silently kept the
    last value."""
    if get_origin(annotation) is not Annotated:
        return
    for extra in get_args(annotation)[1:]:
        module = type(extra).__module__
        if module == "langgraph.channels" or module.startswith("langgraph.channels."):
            raise GraphValidationError(
                f"state field {cls.__name__}.{name}: LangGraph's channel "
                f"{type(extra).__name__} has no equivalent here; give the field a reducer "
                "(Annotated[list[T], operator.add], add_messages, any function "
                "(current, update) -> new) or none (the last write wins)"
            )


def _split(annotation: Any) -> tuple[Any, Any]:
    """``Annotated[T, ..., fn]`` → ``(T, fn)``: the reducer is the last item or none, as
    LangGraph reads it (``Annotated[list, operator.add, "note"]`` has none there)."""
    if get_origin(annotation) is Annotated:
        base, *extras = get_args(annotation)
        last = extras[-1]
        return base, last if callable(last) or isinstance(last, Reducer) else None
    return annotation, None


def _check_reducer(cls: Any, name: str, fn: Any) -> None:
    """A reducer function is called ``fn(current, update)``: one that cannot take two values
    is refused when the schema is read, as LangGraph's ``StateGraph`` refuses it, not at the
    first step that writes the channel. A builtin whose signature cannot be read is taken.
    An ``async def`` or generator function is refused too: it is called, never awaited or
    iterated, and its coroutine (generator) became the key's value."""
    if isinstance(fn, Reducer):
        return
    made = (
        "a coroutine (async def)"
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn)
        else "a generator"
        if inspect.isgeneratorfunction(fn)
        else None
    )
    if made is not None:
        raise ConfigurationError(
            f"the reducer of {name!r} in {getattr(cls, '__name__', cls)} is "
            f"{getattr(fn, '__name__', fn)}, which makes {made} when called: a reducer is "
            "called, never awaited, and returns the new value; make it a plain function "
            "(current, update) -> new"
        )
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(None, None)
    except TypeError:
        raise ConfigurationError(
            f"the reducer of {name!r} in {getattr(cls, '__name__', cls)} must take "
            f"(current, update), got {getattr(fn, '__name__', fn)}{sig} (Invalid reducer "
            "signature, in LangGraph's words)"
        ) from None


def _without_required(annotation: Any) -> Any:
    """``Required[T]`` / ``NotRequired[T]`` (a TypedDict's key markers) → ``T``."""
    while get_origin(annotation) in (typing.Required, typing.NotRequired):
        annotation = get_args(annotation)[0]
    return annotation


def _dataclass_default(f: dataclasses.Field[Any]) -> Callable[[], Any] | None:
    if f.default is not dataclasses.MISSING:
        value = f.default
        return lambda: value
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory
    return None


def _list_start(default: Callable[[], Any]) -> Callable[[], Any]:
    """A list channel's ``operator.add`` start: a tuple default made a list, which the
    channel extends (its reducer adds to a tuple as Python does, failing on a list)."""

    def start() -> Any:
        value = default()
        return list(value) if type(value) is tuple else value

    return start


def _pydantic_default(model: type[BaseModel], name: str) -> Callable[[], Any] | None:
    info = model.model_fields.get(name)
    if info is None or info.is_required():
        return None
    return lambda: info.get_default(call_default_factory=True)


def _refuse_change(self: object, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(
        "a node's state is read-only: return the update (a dict of the keys to write) "
        "instead of changing it; dict(state) is a copy you may change"
    )


class StateView(dict[str, Any]):
    """What a node (or router) of a ``TypedDict`` state receives: a dict of this step's
    values that refuses changes. A dict, as LangGraph's (``isinstance(state, dict)``,
    ``json.dumps(state)``), and a snapshot of its step: written into the state, handed to
    ``interrupt()`` or a ``Send``, it stays what it was. ``dict(state)``, ``{**state}`` and
    ``copy.deepcopy(state)`` give ordinary dicts."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse_change
    __ior__ = _refuse_change

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[dict[str, Any]]]:
        # copy, deepcopy and pickle give a plain dict (refilling a StateView item by item is
        # refused)
        return (dict, (dict(self),))


#: The one channel of a one-value state, LangGraph's name for it.
ROOT = "__root__"


def root_writes(update: Any, *, pairs: bool = True) -> list[tuple[str, Any]]:
    """The writes of a one-value state's update: the value itself, as LangGraph's; a
    ``Command.update`` of ``(key, value)`` pairs (``pairs``) as written, as LangGraph
    reads one (``Command(update=[("__root__", v)])``)."""
    if pairs and (update == [] or _pairs(update)):
        return list(update)
    return [(ROOT, update)]


def root_value(value: Any) -> Any:
    """A one-value state's writes as LangGraph shows them (a task's result, an ``updates``
    item): ``{"__root__": v}`` is ``v``; a list of such, one write each, their values."""
    if type(value) is dict and len(value) == 1 and ROOT in value:
        return value[ROOT]
    if type(value) is list:
        return [root_value(v) for v in value]
    return value


def _root_schema(annotation: Any) -> StateSchema:
    """LangGraph's one-value state: one channel, ``ROOT``, of ``annotation`` (its reducer
    from ``Annotated[T, reducer]``, a bare type overwritten)."""
    base, fn = _split(annotation)
    if fn is not None:
        _check_reducer(annotation, ROOT, fn)
    channel = Channel(
        name=ROOT,
        annotation=base,
        reducer=LastValue() if fn is None else resolve(fn, base),
        default=None if fn is None else empty_value(base),
    )
    schema = StateSchema(cls=annotation, kind="root", root=True, channels={ROOT: channel})
    schema.langchain_keys = _langchain_keys(schema.channels)
    return schema


def read_schema(cls: Any) -> StateSchema:
    """Read the channels of ``cls``: the fields of a TypedDict, a dataclass or a pydantic
    model; a type without annotations (``int``, ``list[str]``, ``Annotated[list,
    operator.add]``) is LangGraph's one-value state (``_root_schema``)."""
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        kind = "pydantic"
    elif dataclasses.is_dataclass(cls):
        kind = "dataclass"
    elif typing_extensions.is_typeddict(cls):
        kind = "dict"
    elif (isinstance(cls, type) or get_origin(cls) is not None) and not hasattr(
        cls, "__annotations__"
    ):
        return _root_schema(cls)
    else:
        raise ConfigurationError(
            f"StateGraph needs a TypedDict, a dataclass or a pydantic model, got {shown_repr(cls)}"
        )
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:
        raise ConfigurationError(f"cannot read the annotations of {cls!r}: {exc}") from exc
    schema = StateSchema(cls=cls, kind=kind)
    dc_fields = {f.name: f for f in dataclasses.fields(cls)} if kind == "dataclass" else {}
    for name, annotation in hints.items():
        # every annotation is a key, "_p" too, as LangGraph's (``__slots__`` is none); a
        # pydantic model's private attributes (``PrivateAttr``) are no fields: no keys
        if name == "__slots__" or get_origin(annotation) is typing.ClassVar:
            continue
        if kind == "pydantic" and name not in cls.model_fields:
            continue
        annotation = _without_required(annotation)
        managed = _managed(annotation)
        if managed is not None:
            schema.managed[name] = managed
            continue
        untracked = _untracked(annotation)
        if untracked is not None:
            base, fn = _without_required(get_args(annotation)[0]), None
            reducer: Reducer = untracked
        else:
            _refuse_langgraph_channel(cls, name, annotation)
            base, fn = _split(annotation)
            base = _without_required(base)
            if fn is not None:
                _check_reducer(cls, name, fn)
            reducer = LastValue() if fn is None else resolve(fn, base)
        default = None
        if kind == "dataclass" and name in dc_fields:
            default = _dataclass_default(dc_fields[name])
        elif kind == "pydantic":
            default = _pydantic_default(cls, name)
        if default is None and fn is not None:
            default = empty_value(base)
        elif default is not None and isinstance(reducer, Append) and reducer.add:
            default = _list_start(default)
        constraints: tuple[Any, ...] = ()
        if kind == "pydantic" and fn is None:
            constraints = tuple(cls.model_fields[name].metadata)
        schema.channels[name] = Channel(
            name=name, annotation=base, reducer=reducer, default=default, constraints=constraints
        )
    schema.langchain_keys = _langchain_keys(schema.channels)
    schema.untracked = _untracked_keys(schema.channels)
    return schema


def _untracked_keys(channels: dict[str, Channel]) -> frozenset[str]:
    return frozenset(
        name for name, channel in channels.items() if isinstance(channel.reducer, UntrackedValue)
    )


def _langchain_keys(channels: dict[str, Channel]) -> frozenset[str]:
    return frozenset(
        name
        for name, channel in channels.items()
        if isinstance(channel.reducer, Messages) and channel.reducer.langchain
    )


def _pairs(update: Any) -> bool:
    """Whether ``update`` is a non-empty list or tuple of ``(str, value)`` pairs."""
    return (
        isinstance(update, (list, tuple))
        and bool(update)
        and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in update)
    )
