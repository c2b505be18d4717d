"""Typed steering commands: who wants what done to which run.

A ``SteeringCommand`` is a frozen pydantic model. Its ``target`` and ``actor`` are discriminated
unions (on ``type``); its ``payload`` is a read-only dict validated against the schema of its
``kind`` at construction, so an invalid command never exists. Every command can be compared
with any other (``created_at`` is in UTC) and read back from its own JSON (its payload holds
JSON values only, nested at most ``MAX_PAYLOAD_DEPTH`` levels, and all its text is valid
UTF-8); anything else raises ``InvalidCommandError`` when the command is built.
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from enum import IntEnum, StrEnum
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, NoReturn, Self, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    StrictBool,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import SchemaValidator, core_schema

from tinyagents import _clock
from tinyagents._record import FrozenRecord, record
from tinyagents.errors import ArgumentError, InvalidCommandError
from tinyagents.protocol import _payload_models as payload_models
from tinyagents.protocol.ids import (
    CONTROL_PROBLEM,
    MAX_QUOTED_ID,
    Id,
    id_problem,
    shown_id,
    shown_repr,
)
from tinyagents.protocol.kinds import SteeringKind as SteeringKind
from tinyagents.protocol.text import encodes_as_utf8 as _utf8
from tinyagents.protocol.text import not_blank as _not_blank
from tinyagents.protocol.text import shows_nothing as shows_nothing

#: Every model here is built on first use (``defer_build``): building them all at import was a
#: tenth of ``import tinyagents``, and a program uses a few kinds.
_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)


#: Kinds that reach the model as a provenance message.
MESSAGE_KINDS = frozenset(
    {
        SteeringKind.ADD_INSTRUCTION,
        SteeringKind.REPLACE_INSTRUCTION,
        SteeringKind.ASK_CLARIFYING_QUESTION,
        SteeringKind.PROVIDE_CONTEXT,
    }
)
#: Kinds that are delivered even while a run is paused (so a paused run can be woken or stopped).
CONTROL_KINDS = frozenset(
    {SteeringKind.PAUSE, SteeringKind.RESUME, SteeringKind.CANCEL, SteeringKind.REQUEST_STATUS}
)


class SteeringPriority(IntEnum):
    LOW = 0
    NORMAL = 50
    HIGH = 100
    CRITICAL = 200


#: The names a priority may be given by (``priority="high"``), as the operator API and a
#: ``SteeringCommand`` both take them: low, normal, high, critical.
PRIORITY_NAMES: dict[str, SteeringPriority] = {p.name.lower(): p for p in SteeringPriority}


class SteeringDelivery(StrEnum):
    NEXT_BOUNDARY = "next_boundary"
    BEFORE_MODEL_CALL = "before_model_call"
    AFTER_TOOL_RESULT = "after_tool_result"
    END_OF_TURN = "end_of_turn"
    IMMEDIATE = "immediate"


class _CommandPart(BaseModel):
    """A command or one of its parts: every invalid construction (keywords,
    ``model_validate``, ``model_validate_json``) raises ``InvalidCommandError`` (a
    ``ValueError``) naming the field, as ``invalid <what>: <field>: <problem>``."""

    model_config = _FROZEN
    _what: ClassVar[str] = "command"

    # Pydantic reports what a validator raises as a ValidationError: these give it back as the
    # InvalidCommandError it was (or turn pydantic's own complaint into one).

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            raise _invalid(exc, cls._what) from None

    @classmethod
    def model_validate_json(cls, json_data: Any, *args: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate_json(json_data, *args, **kwargs)
        except ValidationError as exc:
            raise _invalid(exc, cls._what) from None

    @classmethod
    def model_validate_strings(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate_strings(obj, *args, **kwargs)
        except ValidationError as exc:
            raise _invalid(exc, cls._what) from None

    # No __init__ here: pydantic calls an overridden __init__ to build every nested target
    # and actor too, so a command's message would name the part instead of the command's field.
    # The classmethods that build a target or actor go through ``_build``.


_Part = TypeVar("_Part", bound=_CommandPart)


def _build(model: type[_Part], **fields: Any) -> _Part:
    """``model(**fields)``, raising ``InvalidCommandError`` for what is invalid."""
    try:
        return model(**fields)
    except ValidationError as exc:
        raise _invalid(exc, model._what) from None


def _named(field: str, name: object) -> object:
    """``name``, an actor's name given to a factory, unless it is text that shows nothing:
    the ``InvalidCommandError`` a blank ``user_id`` is (anything else is the model's to judge)."""
    if isinstance(name, str):
        try:
            _not_blank(name)
        except ValueError as exc:
            raise InvalidCommandError(f"invalid actor: {field}: Value error, {exc}") from None
    return name


# --------------------------------------------------------------------------- targets


class SteeringTarget(_CommandPart):
    """Where a command goes. Build one with the classmethods: ``SteeringTarget.agent_run(id)``."""

    model_config = _FROZEN
    _what = "target"
    type: str

    @classmethod
    def agent_run(cls, run_id: str) -> "AgentRunTarget":
        return _build(AgentRunTarget, run_id=run_id)

    @classmethod
    def subagent_run(cls, parent_run_id: str, run_id: str) -> "SubAgentRunTarget":
        return _build(SubAgentRunTarget, parent_run_id=parent_run_id, run_id=run_id)

    @classmethod
    def graph_task(cls, run_id: str, task_id: str) -> "GraphTaskTarget":
        return _build(GraphTaskTarget, run_id=run_id, task_id=task_id)

    @classmethod
    def graph_node(cls, run_id: str, node: str) -> "GraphNodeTarget":
        return _build(GraphNodeTarget, run_id=run_id, node=node)

    @classmethod
    def thread(cls, thread_id: str) -> "ThreadTarget":
        return _build(ThreadTarget, thread_id=thread_id)

    def describe(self) -> str:
        return self.type


class AgentRunTarget(SteeringTarget):
    type: Literal["agent_run"] = "agent_run"
    run_id: Id

    def describe(self) -> str:
        return f"run {self.run_id}"


class SubAgentRunTarget(SteeringTarget):
    """A child run addressed through its parent: the router checks the parentage."""

    type: Literal["subagent_run"] = "subagent_run"
    parent_run_id: Id
    run_id: Id

    def describe(self) -> str:
        return f"sub-agent run {self.run_id} of {self.parent_run_id}"


class GraphTaskTarget(SteeringTarget):
    type: Literal["graph_task"] = "graph_task"
    run_id: Id
    task_id: Id

    def describe(self) -> str:
        return f"task {self.task_id} of graph run {self.run_id}"


class GraphNodeTarget(SteeringTarget):
    type: Literal["graph_node"] = "graph_node"
    run_id: Id
    node: str = Field(min_length=1)

    @field_validator("node")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        # no graph has a node that shows nothing (``add_node`` refuses one)
        return _not_blank(value)

    def describe(self) -> str:
        return f"node {self.node!r} of graph run {self.run_id}"


class ThreadTarget(SteeringTarget):
    """Whatever run currently owns the thread (or the next one to, for a deferred command)."""

    type: Literal["thread"] = "thread"
    thread_id: Id

    @field_validator("thread_id")
    @classmethod
    def _a_run_can_have_it(cls, value: str) -> str:
        # as a run's thread id is checked (``check_id``): a command for a thread no run can
        # have would wait for one for ever (and in a durable store's log, be restored for ever)
        if not value.strip():
            raise ValueError("must be a non-blank thread id")
        return value

    def describe(self) -> str:
        return f"thread {self.thread_id}"


AnyTarget = Annotated[
    AgentRunTarget | SubAgentRunTarget | GraphTaskTarget | GraphNodeTarget | ThreadTarget,
    Field(discriminator="type"),
]


# --------------------------------------------------------------------------- actors


class SteeringActor(_CommandPart):
    """Who sends a command. Build one with the classmethods: ``SteeringActor.human(...)``."""

    model_config = _FROZEN
    _what = "actor"
    type: str

    @classmethod
    def human(
        cls, user_id: str, *, tenant_id: str = "default", scopes: Iterable[str] = ()
    ) -> "HumanActor":
        return _build(HumanActor, user_id=user_id, tenant_id=tenant_id, scopes=scopes)

    # A blank name (agent, node, middleware, test) is refused by these factories, as a blank
    # user_id is: it names nobody in the audit trail. The check is here, not on the models,
    # whose construction is on the router's hot path.
    @classmethod
    def parent_agent(cls, run_id: str, agent_id: str) -> "ParentAgentActor":
        return _build(ParentAgentActor, run_id=run_id, agent_id=_named("agent_id", agent_id))

    @classmethod
    def graph_supervisor(cls, run_id: str, node: str) -> "GraphSupervisorActor":
        return _build(GraphSupervisorActor, run_id=run_id, node=_named("node", node))

    @classmethod
    def middleware(cls, name: str, run_id: str | None = None) -> "MiddlewareActor":
        return _build(MiddlewareActor, name=_named("name", name), run_id=run_id)

    @classmethod
    def test(cls, name: str = "test") -> "TestActor":
        return _build(TestActor, name=_named("name", name))

    def describe(self) -> str:
        return self.type


class HumanActor(SteeringActor):
    type: Literal["human"] = "human"
    user_id: str = Field(min_length=1)
    tenant_id: Id = "default"
    scopes: frozenset[str] = frozenset()

    @field_validator("user_id", "tenant_id")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        # a blank tenant or user names nobody (no operator token can carry one)
        return _not_blank(value)

    def describe(self) -> str:
        return f'human "{self.user_id}"'


class ParentAgentActor(SteeringActor):
    type: Literal["parent_agent"] = "parent_agent"
    run_id: Id
    agent_id: str = Field(min_length=1)

    def describe(self) -> str:
        return f'parent agent "{self.agent_id}" (run {self.run_id})'


class GraphSupervisorActor(SteeringActor):
    type: Literal["graph_supervisor"] = "graph_supervisor"
    run_id: Id
    node: str = Field(min_length=1)

    def describe(self) -> str:
        return f'graph supervisor "{self.node}" (run {self.run_id})'


class MiddlewareActor(SteeringActor):
    type: Literal["middleware"] = "middleware"
    name: str = Field(min_length=1)
    run_id: Id | None = None

    def describe(self) -> str:
        where = f" (run {self.run_id})" if self.run_id else ""
        return f'middleware "{self.name}"{where}'


class TestActor(SteeringActor):
    __test__ = False  # not a pytest test class
    type: Literal["test"] = "test"
    name: str = "test"

    def describe(self) -> str:
        return f'test "{self.name}"'


AnyActor = Annotated[
    HumanActor | ParentAgentActor | GraphSupervisorActor | MiddlewareActor | TestActor,
    Field(discriminator="type"),
]


# --------------------------------------------------------------------------- JSON values

#: How deep a payload may nest: the payload object is level 1, each dict or list inside a
#: container one level more. Deeper data (or data that contains itself) is refused at
#: construction, so the code that walks a payload later (events, stores) never recurses far.
MAX_PAYLOAD_DEPTH = 32
#: How many values (container items, counted as the JSON document would repeat them) a payload
#: may hold: a list that holds one big list many times over is refused, not walked for ever.
MAX_PAYLOAD_VALUES = 1_000_000
#: Integers must stay below this many digits: JSON readers (Python's included) refuse longer.
MAX_INT_DIGITS = 4_000
#: Integers this large (in magnitude) or larger are refused, in commands and in run limits.
INT_BOUND = 10**MAX_INT_DIGITS
_NOT_UTF8 = "text is not valid UTF-8 (it holds a lone surrogate such as '\\ud800')"


def _where(path: tuple[str | int, ...]) -> str:
    """``('value', 'a', 1)`` -> ``payload.value.a[1]``."""
    return "payload" + "".join(f"[{p}]" if type(p) is int else f".{p}" for p in path)


def _json_problem(payload: dict[str, Any]) -> str | None:
    """What stops ``payload`` from being a JSON object that reads back as itself, as
    ``'payload.path: problem'``, or None.

    A loop over an explicit stack, never deeper than ``MAX_PAYLOAD_DEPTH``: it is the check that
    makes a deep (or self-containing) payload safe, so it must not recurse itself.
    """
    # isinstance with tuples of types here and below, not ``dict | list``: a union written in
    # the call is built anew each time it runs, and these run for every value of a payload.
    left = MAX_PAYLOAD_VALUES
    stack: list[tuple[dict[str, Any] | list[Any] | tuple[Any, ...], int, tuple[str | int, ...]]]
    stack = [(payload, 1, ())]
    while stack:
        container, depth, path = stack.pop()
        left -= len(container)
        if left < 0:
            return f"payload: more than {MAX_PAYLOAD_VALUES} values; send a reference instead"
        is_dict = isinstance(container, dict)
        items = container.items() if isinstance(container, dict) else enumerate(container)
        for key, value in items:
            if is_dict:
                if not isinstance(key, str):
                    return f"{_where(path)}: key {key!r} is not a string (JSON keys are text)"
                # ASCII (nearly every key and text) settled inline: no call to ``_utf8``
                if not key.isascii() and not _utf8(key):
                    return f"{_where(path)}: a key's {_NOT_UTF8}"
            if isinstance(value, str):
                if value.isascii() or _utf8(value):
                    continue
                problem = _NOT_UTF8
            elif value is None or value is True or value is False:
                continue
            elif isinstance(value, (dict, list, tuple)):
                if depth == MAX_PAYLOAD_DEPTH:
                    return (
                        f"{_where((*path, key))}: nested more than {MAX_PAYLOAD_DEPTH} levels "
                        "deep (or it contains itself)"
                    )
                stack.append((value, depth + 1, (*path, key)))
                continue
            elif isinstance(value, int):
                if -INT_BOUND < value < INT_BOUND:
                    continue
                problem = f"an integer longer than {MAX_INT_DIGITS} digits cannot be read back"
            elif isinstance(value, float):
                if math.isfinite(value):
                    continue
                problem = f"{value!r} is not a finite number (JSON has no NaN or Infinity)"
            else:
                problem = (
                    f"a {type(value).__name__} is not JSON; a payload holds only objects, "
                    "arrays, strings, numbers, booleans and null (send bytes as base64 text)"
                )
            return f"{_where((*path, key))}: {problem}"
    return None


def _refuse(self: object, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(
        f"this {type(self).__name__} is (part of) a steering command's payload, which is "
        "read-only; change a copy (tinyagents.protocol.commands.mutable_copy(value))"
    )


class ReadOnlyDict(dict[str, Any]):
    """A dict that refuses changes: a command's payload (and every dict inside it).

    Otherwise an ordinary dict: it compares equal to one, serialises as one, and pickles and
    copies; ``dict(d)``, ``{**d}`` and ``d | other`` make ordinary (mutable) dicts. Being
    read-only, it hashes (so a command can be a set member or a dict key).
    """

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __hash__(self) -> int:  # type: ignore[override]  # read-only: a frozen command hashes
        return hash(frozenset(self.items()))

    def __reduce__(self) -> "tuple[type[ReadOnlyDict], tuple[dict[str, Any]]]":
        # pickle and copy would otherwise refill the new dict item by item (refused)
        return (type(self), (dict(self),))


class _Unchecked(ReadOnlyDict):
    """The payload of a command built past validation (``model_copy(update=...)``,
    ``model_construct``): a validated command's payload is exactly a ``ReadOnlyDict``, so
    ``submit`` tells the two apart by type alone, and validates only such a command."""

    __slots__ = ()


class ReadOnlyList(list[Any]):
    """A list that refuses changes (a list inside a command's payload); ``list(x)`` copies."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = remove = pop = clear = _refuse
    sort = reverse = __iadd__ = __imul__ = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def __reduce__(self) -> "tuple[type[ReadOnlyList], tuple[list[Any]]]":
        return (type(self), (list(self),))


def _read_only(value: Any) -> Any:
    """``value`` with every dict and list (and tuple) in it made read-only. Recursive, but only
    over payloads ``_json_problem`` has bounded to ``MAX_PAYLOAD_DEPTH``."""
    if isinstance(value, dict):
        return ReadOnlyDict({k: _read_only(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        # text (a list of names, say) settled inline: no call for each item
        return ReadOnlyList([v if type(v) is str else _read_only(v) for v in value])
    return value


def mutable_copy(value: Any) -> Any:
    """An ordinary, mutable deep copy of a payload value (dicts and lists at every level).

    For code that hands payload values on to code that may change them (graph state, a
    resumed task): the command itself must stay as it was accepted and stored.
    """
    if isinstance(value, dict):
        return {k: mutable_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mutable_copy(v) for v in value]
    return value


def _utc(created_at: datetime) -> datetime:
    """``created_at`` in UTC; a naive datetime is taken to be in UTC already."""
    if created_at.tzinfo is UTC:
        return created_at
    if created_at.utcoffset() is None:
        return created_at.replace(tzinfo=UTC)
    try:
        return created_at.astimezone(UTC)
    except OverflowError:
        raise InvalidCommandError(
            f"invalid command: created_at: {created_at.isoformat()} is out of range in UTC"
        ) from None


def _text_problem(values: dict[str, Any]) -> str | None:
    """The first text field of a command's ``values`` (payload aside) that is not valid UTF-8,
    as ``'invalid command: field: problem'``, or None. Pydantic refuses such text in the data
    it validates; this also catches it in models built past validation (``model_copy``)."""
    # Plain loops, and ASCII (nearly all ids) settled by isascii(). ``_check`` calls it only
    # where there may be something to check.
    for name in ("correlation_id", "checkpoint_id"):
        value = values.get(name)
        if type(value) is str and not value.isascii() and not _utf8(value):
            return f"invalid command: {name}: {_NOT_UTF8}"
    cid = values.get("correlation_id")
    if type(cid) is str and (problem := correlation_id_problem(cid)) is not None:
        return f"invalid command: correlation_id: {problem}"
    if type(cid) is str and not cid.strip():
        return "invalid command: correlation_id: blank; leave it out for a generated one"
    for name in ("target", "actor", "policy_ref"):
        model = values.get(name)
        if model is None or _CLEAN.get(id(model)) is model or not isinstance(model, BaseModel):
            continue  # None, checked before, or data pydantic validates (text included)
        for field, value in model.__dict__.items():
            if type(value) is str:
                if not value.isascii() and not _utf8(value):
                    return f"invalid command: {name}.{field}: {_NOT_UTF8}"
            elif isinstance(value, (frozenset, set, list, tuple)):
                for text in value:
                    if isinstance(text, str) and not _utf8(text):
                        return f"invalid command: {name}.{field}: {_NOT_UTF8}"
        _remember_clean(model)
    return None


#: Targets, actors and policy refs whose text was checked, by id (the model itself is kept, so
#: its id cannot be reused while it is here): they are frozen, and most commands reuse one
#: actor and a few targets. Bounded: emptied when full.
_CLEAN: dict[int, object] = {}
_CLEAN_MAX = 4096


def _remember_clean(model: object) -> None:
    if len(_CLEAN) >= _CLEAN_MAX:
        _CLEAN.clear()
    _CLEAN[id(model)] = model


# --------------------------------------------------------------------------- payloads


def validate_payload(kind: SteeringKind, payload: dict[str, Any]) -> dict[str, Any]:
    """Validate ``payload`` for ``kind``; return it normalised (unset optional keys dropped,
    tuples made lists) and read-only.

    Refused, besides what the kind's schema refuses: anything that is not JSON (bytes, sets,
    arbitrary objects, non-string keys), NaN and infinities, integers too long to read back,
    text that is not valid UTF-8, and nesting deeper than ``MAX_PAYLOAD_DEPTH``.
    """
    quick = _QUICK.get(kind)
    if quick is not None:
        try:
            return quick.validate_python(payload)  # type: ignore[no-any-return]
        except ValidationError:
            pass  # the long way decides (and says what is wrong, if anything is)
    return _long_payload(kind, payload)


def _long_payload(kind: SteeringKind, payload: dict[str, Any]) -> dict[str, Any]:
    """``validate_payload`` the long way: ``_json_problem``'s walk, then the payload model."""
    if not _QUICK:  # built with the first payload validated, as the payload models are
        _QUICK.update(_quick_validators())
    model = payload_models.PAYLOAD_MODELS[kind]
    problem = _json_problem(payload)
    if problem is not None:
        raise InvalidCommandError(f"invalid payload for {kind.value}: {problem}")
    try:
        # model_validate / model_dump without their Python wrappers: this runs for every command.
        parsed = model.__pydantic_validator__.validate_python(payload)
    except ValidationError as exc:
        problems = problems_line((err["loc"], err["msg"]) for err in exc.errors())
        raise InvalidCommandError(f"invalid payload for {kind.value}: {problems}") from None
    return _payload_dict(parsed)


#: The quick way of ``validate_payload``, by kind (``_quick_validators``).
_QUICK: dict[SteeringKind, SchemaValidator] = {}


def _quick_validators() -> dict[SteeringKind, SchemaValidator]:
    """For each kind whose usual payload holds only text, lists of text and booleans: a
    validator that takes such a payload and gives it as ``validate_payload`` does, all in
    pydantic's core (no payload model made, no Python call: the read-only copies are made by
    calling ``ReadOnlyDict``, ``ReadOnlyList``, ``set``, ``sorted``, ``dict.fromkeys`` and
    ``list`` from the core), or refuses it; the long way then decides.

    It takes less than the payload model does, never more: strict types (text, not bytes; a
    list, not a tuple; a boolean, not 1), no None (the long way drops it), only the model's
    keys, text that encodes as UTF-8 (a constraint makes the core read it as UTF-8), text the
    model's rule takes (holding a visible ASCII character: it shows something, and is not
    blank for ``strip``), lists short enough to stay within ``MAX_PAYLOAD_VALUES``, and no
    ``value`` (any JSON, which ``_json_problem`` walks). What it takes is JSON, and the long
    way gives the same read-only dict of it (``tests/steering/test_hot_path_equivalence.py``).
    """
    cs = core_schema
    text = cs.str_schema(strict=True, max_length=_ANY_LENGTH)
    shown = cs.str_schema(strict=True, pattern="[!-~]")
    names = cs.list_schema(shown, strict=True, max_length=MAX_PAYLOAD_VALUES - 3)
    some_names = cs.list_schema(shown, strict=True, min_length=1, max_length=MAX_PAYLOAD_VALUES - 3)

    def then(schema: core_schema.CoreSchema, *calls: Any) -> core_schema.CoreSchema:
        """``schema``, its value then handed to each of ``calls`` in turn."""
        for call in calls:
            schema = cs.no_info_after_validator_function(call, schema)
        return schema

    def payload(required: dict[str, Any], optional: dict[str, Any]) -> core_schema.CoreSchema:
        fields = {name: cs.typed_dict_field(s) for name, s in required.items()}
        fields |= {name: cs.typed_dict_field(s, required=False) for name, s in optional.items()}
        return then(
            cs.typed_dict_schema(fields, extra_behavior="forbid", strict=True), ReadOnlyDict
        )

    reason = {"reason": text}
    decision = payload({}, {"interrupt_id": text, **reason})
    goto = cs.union_schema([shown, then(some_names, ReadOnlyList)], mode="left_to_right")
    schemas = {
        SteeringKind.ADD_INSTRUCTION: payload({"text": shown}, {}),
        SteeringKind.REPLACE_INSTRUCTION: payload({"text": shown}, {}),
        SteeringKind.ASK_CLARIFYING_QUESTION: payload({"question": shown}, {}),
        SteeringKind.PROVIDE_CONTEXT: payload(
            {"text": shown}, {"source": text, "interrupt_id": text}
        ),
        SteeringKind.CONSTRAIN_TOOLS: payload(
            {"tools": then(names, set, sorted, ReadOnlyList)}, reason
        ),
        SteeringKind.CONSTRAIN_MODEL: payload(
            {"models": then(some_names, dict.fromkeys, list, ReadOnlyList)}, reason
        ),
        SteeringKind.PAUSE: payload({}, reason),
        SteeringKind.RESUME: payload({}, reason),
        SteeringKind.CANCEL: payload({}, {"abort": cs.bool_schema(strict=True), **reason}),
        SteeringKind.APPROVE: decision,
        SteeringKind.REJECT: decision,
        SteeringKind.REDIRECT: cs.union_schema(
            [payload({"goto": goto}, {"instruction": shown}), payload({"instruction": shown}, {})],
            mode="left_to_right",
        ),
        SteeringKind.REQUEST_STATUS: payload({}, {}),
    }
    return {kind: SchemaValidator(schema) for kind, schema in schemas.items()}


#: A length no text reaches: as a constraint, it has the core read text as UTF-8 (refusing a
#: lone surrogate), which it does not for text taken as it is.
_ANY_LENGTH = 2**62


#: A refusal names at most this many problems, and each field name in it is cut to
#: ``MAX_QUOTED_NAME`` characters (as an id is, ``shown_id``): each of 50,000 unknown keys (or a
#: key a megabyte long) was quoted whole, and an operator API answer of half a megabyte of keys
#: was 6.7 MB.
MAX_PROBLEMS = 10
MAX_QUOTED_NAME = MAX_QUOTED_ID


def quoted_name(part: object) -> str | int:
    """One part of a problem's location as a refusal quotes it: an index as it is, a name
    cut to ``MAX_QUOTED_NAME`` characters (saying how long it was)."""
    if isinstance(part, int):
        return part
    return shown_id(part)


def problems_line(
    problems: Iterable[tuple[Sequence[object], str]], default: str = "payload"
) -> str:
    """``where: what`` for each ``(location, message)`` problem, at most ``MAX_PROBLEMS`` of
    them (then how many more there are), on one line."""
    shown: list[str] = []
    more = 0
    for loc, message in problems:
        if len(shown) == MAX_PROBLEMS:
            more += 1
            continue
        where = ".".join(str(quoted_name(p)) for p in loc) or default
        shown.append(f"{where}: {message}")
    return "; ".join(shown) + (f"; and {more:,} more" if more else "")


def _payload_dict(parsed: BaseModel) -> ReadOnlyDict:
    """A validated payload model as its read-only dict: the fields that are not None, every
    container in them copied read-only.

    What ``_read_only(model.__pydantic_serializer__.to_python(parsed, exclude_none=True))``
    gives (a test holds the two equal), without serialising first only to copy again: a
    payload model's fields hold JSON values only (``_json_problem`` refused the rest, and no
    payload model nests another model or renames a field), which that dump hands through.
    """
    out = {}
    for name, value in parsed.__dict__.items():
        if value is None:
            continue
        # the usual values are text: no call to find that there is nothing to copy
        out[name] = value if type(value) is str else _read_only(value)
    return ReadOnlyDict(out)


# --------------------------------------------------------------------------- command


class SteeringPolicyRef(_CommandPart):
    """Names the policy (and version) under which a command was issued, for the audit trail."""

    model_config = _FROZEN
    _what = "policy ref"
    policy_id: str = Field(min_length=1)
    version: str | None = None


#: The longest correlation id: it is quoted back in receipts, events and the audit trail, and
#: stored beside its sender's scope in one index row (shorter than ``MAX_ID_LENGTH``).
MAX_CORRELATION_ID = 200


def correlation_id_problem(cid: str) -> str | None:
    """What breaks the id rule (``tinyagents.protocol.ids``) in a correlation id, or None: the
    rule every id keeps, at most ``MAX_CORRELATION_ID`` characters long. A rule of its own
    (``str.isprintable``) refused a no-break space the id rule takes and took a soft hyphen
    and a Hangul filler (shown as nothing) the id rule refuses."""
    if len(cid) > MAX_CORRELATION_ID:
        return f"{len(cid):,} characters; at most {MAX_CORRELATION_ID}"
    if cid.isascii() and cid.isprintable():  # most ids: nothing the rule refuses is here
        return None
    return id_problem(cid)


def _new_correlation_id() -> str:
    # Checked here (an id source is pluggable): no validator sees a default value.
    cid = _clock.new_id("c")
    if not cid.isascii() and not _utf8(cid):
        raise InvalidCommandError(f"invalid command: correlation_id: {_NOT_UTF8}")
    return cid


def _now() -> datetime:
    now = _clock.now()
    return now if now.tzinfo is UTC else _utc(now)  # the system clock's: no second call


def _parse_kind(value: Any) -> SteeringKind:
    if type(value) is SteeringKind:  # the usual case, from Python code: nothing to parse
        return value
    try:
        return SteeringKind(str(value))
    except ValueError:
        allowed = ", ".join(k.value for k in SteeringKind)
        raise InvalidCommandError(
            f"unknown steering kind {shown_repr(value)}; expected one of {allowed}"
        ) from None


def _broken_rule(
    kind: SteeringKind, delivery: SteeringDelivery | None, fork: Any, checkpoint_id: Any
) -> str | None:
    """What a command breaks that no single field shows, or None."""
    if delivery is SteeringDelivery.IMMEDIATE and kind is not SteeringKind.CANCEL:
        return f"invalid delivery for {kind.value}: 'immediate' exists only for cancel"
    if fork and not checkpoint_id:
        return f"invalid fork for {kind.value}: fork=True needs a checkpoint_id"
    return None


def _parse_priority(value: str) -> SteeringPriority:
    """A priority given by its name; a name the API would refuse is refused alike."""
    priority = PRIORITY_NAMES.get(value)
    if priority is None:
        raise InvalidCommandError(
            f"invalid priority {value[:100]!r}; expected 0, 50, 100, 200 or one of "
            f"{', '.join(PRIORITY_NAMES)}"
        )
    return priority


def _parse_delivery(kind: SteeringKind, value: Any) -> SteeringDelivery:
    if type(value) is SteeringDelivery:
        return value
    try:
        return SteeringDelivery(value)
    except ValueError:
        allowed = ", ".join(d.value for d in SteeringDelivery)
        raise InvalidCommandError(
            f"invalid delivery for {kind.value}: {shown_repr(value)}; expected one of {allowed}"
        ) from None


class _CheckedPayload:
    """A command's ``payload`` field as pydantic's core checks it: the ``ReadOnlyDict``
    ``SteeringCommand._check`` made of it (every way in, JSON included, passes there first),
    taken as it is by an ``isinstance`` in the core, no Python call; in JSON Schema, an object.

    A validator function on the field cost every command a call into Python only to hand the
    dict back (and the field's own ``dict[str, Any]`` validation would copy it into a plain
    dict)."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.is_instance_schema(ReadOnlyDict)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return handler(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))


class SteeringCommand(_CommandPart):
    """One request to change a running run. Frozen; validated per kind at construction.

    Every invalid construction (keywords, ``model_validate``, ``model_validate_json``) raises
    ``InvalidCommandError`` (a ``ValueError``) naming the field. ``payload`` is read-only,
    nested containers too (``ReadOnlyDict`` / ``ReadOnlyList``; copy it to change it), and
    holds JSON values only: bytes, sets and other objects are refused, tuples become lists.
    ``created_at`` is always in UTC: a naive datetime is taken as UTC, an aware one converted.
    """

    model_config = _FROZEN

    target: AnyTarget
    actor: AnyActor
    kind: SteeringKind
    payload: Annotated[dict[str, Any], _CheckedPayload()] = Field(default_factory=ReadOnlyDict)
    priority: SteeringPriority = SteeringPriority.NORMAL
    delivery: SteeringDelivery = SteeringDelivery.NEXT_BOUNDARY
    policy_ref: SteeringPolicyRef | None = None
    correlation_id: str = Field(default_factory=_new_correlation_id, min_length=1)
    created_at: datetime = Field(default_factory=_now)
    checkpoint_id: Id | None = None
    fork: StrictBool = False

    @model_validator(mode="before")
    @classmethod
    def _check(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            if isinstance(data, cls):  # taken as it is (pydantic does not validate it again)
                return data
            data = _fields_given(data)
        kind = data.get("kind")
        if type(kind) is not SteeringKind:  # the usual kind, from Python code: nothing to parse
            kind = _parse_kind(kind)
        payload = data.get("payload")
        if payload is None:  # left out (or null): no payload
            payload = {}
        elif not isinstance(payload, dict):
            raise InvalidCommandError(f"invalid payload for {kind.value}: must be an object")
        # validate_payload's quick way inline (one Python call fewer for most commands)
        quick = _QUICK.get(kind)
        if quick is None:
            payload = _long_payload(kind, payload)
        else:
            try:
                payload = quick.validate_python(payload)
            except ValidationError:
                payload = _long_payload(kind, payload)
        data = {**data, "kind": kind, "payload": payload}
        if type(data.get("priority")) is str:  # by name, as the operator API takes it
            data["priority"] = _parse_priority(data["priority"])
        delivery = data.get("delivery")
        if delivery is not None:
            delivery = _parse_delivery(kind, delivery)
        fork = data.get("fork")
        # no delivery and no fork (most commands): no rule to break
        if delivery is not None or fork:
            broken = _broken_rule(kind, delivery, fork, data.get("checkpoint_id"))
            if broken is not None:
                raise InvalidCommandError(broken)
        # Here, not in an after-validator (a second Python call for every command): the text
        # pydantic does not validate again is that of the targets, actors and policy refs
        # handed in as models, which _text_problem checks (and remembers clean). Most
        # commands: no ids given (their defaults are checked where they are made), no policy
        # ref, and a target and actor checked before: nothing to check, no call.
        target, actor = data.get("target"), data.get("actor")
        if (
            _CLEAN.get(id(target)) is not target
            or _CLEAN.get(id(actor)) is not actor
            or "correlation_id" in data
            or "checkpoint_id" in data
            or data.get("policy_ref") is not None
        ):
            problem = _text_problem(data)
            if problem is not None:
                raise InvalidCommandError(problem)
        return data

    @field_validator("created_at")
    @classmethod
    def _in_utc(cls, created_at: datetime) -> datetime:
        return _utc(created_at)

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        # from_attributes: the object's fields as a dict, which ``_check`` checks as it checks
        # any (it is handed the object itself, and cannot see that its attributes are asked for)
        if kwargs.get("from_attributes") and not isinstance(obj, (Mapping, cls)):
            obj = {
                name: value
                for name in cls.model_fields
                if (value := getattr(obj, name, _ABSENT)) is not _ABSENT
            }
        return super().model_validate(obj, *args, **kwargs)

    if not TYPE_CHECKING:  # type checkers keep the __init__ pydantic declares, field by field

        def __init__(self, /, **data: Any) -> None:
            # Only to raise what failed as the InvalidCommandError it is (a command is never
            # nested in another model, so pydantic calls this for top-level commands only).
            # What ``BaseModel.__init__`` does, called here: one frame and one repacking of
            # the keywords fewer for every command (no validator of a command returns another
            # instance, which is all ``BaseModel.__init__`` checks besides).
            try:
                self.__pydantic_validator__.validate_python(data, self_instance=self)
            except ValidationError as exc:
                raise _invalid(exc, "command") from None

    @property
    def text(self) -> str | None:
        """The human-readable text a message kind carries, if any."""
        p = self.payload
        return p.get("text") or p.get("question") or p.get("instruction")

    def describe(self) -> str:
        return f"{self.kind.value} from {self.actor.describe()} to {self.target.describe()}"

    # pydantic's two ways to make a model without validating it: each leaves its command's
    # payload marked unchecked (``_Unchecked``), so ``checked`` validates that command when it
    # is submitted, while a command built the usual way costs nothing more.

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        if update:
            update = {**update, "payload": _unchecked(update.get("payload", self.payload))}
        return super().model_copy(update=update, deep=deep)

    if not TYPE_CHECKING:  # type checkers keep the signature pydantic declares, field by field

        @classmethod
        def model_construct(cls, _fields_set: set[str] | None = None, **values: Any) -> Self:
            values["payload"] = _unchecked(values.get("payload", {}))
            return super().model_construct(_fields_set, **values)


_ABSENT = object()


def _fields_given(data: Any) -> dict[str, Any]:
    """The fields of a command given as no dict: a mapping's items; anything else (an
    object whose attributes pydantic would read, where ``from_attributes`` is asked of a
    ``TypeAdapter`` or a model holding a command) is refused, as ``_check`` would not see
    its payload to check it."""
    if isinstance(data, Mapping):
        return dict(data)
    raise InvalidCommandError(
        f"a command is made from a dict of its fields (or keywords), got {type(data).__name__}; "
        "for an object's attributes use SteeringCommand.model_validate(obj, from_attributes=True)"
    )


def _unchecked(payload: Any) -> Any:
    return _Unchecked(payload) if isinstance(payload, dict) else payload


def checked(cmd: SteeringCommand) -> SteeringCommand:
    """``cmd``, validated now if it was built past validation (``model_copy(update=...)`` or
    ``model_construct``; its payload is then no plain ``ReadOnlyDict``): the command it
    validates to, or the ``InvalidCommandError`` building it would have raised. The router
    asks (by the payload's type, inline) before it calls this."""
    if type(cmd.payload) is ReadOnlyDict:
        return cmd
    return SteeringCommand.model_validate(dict(cmd))


def _invalid(exc: ValidationError, what: str) -> InvalidCommandError:
    """The ``InvalidCommandError`` for a failed validation of a command (or of its ``what``:
    target, actor, policy ref): the one a validator raised, or one that names each field
    pydantic refused and why."""
    problems = []
    for err in exc.errors():
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, InvalidCommandError):
            return InvalidCommandError(str(cause))
        kind = err["type"]
        given = err.get("input")
        message = (
            _NOT_UTF8
            if kind == "string_unicode"
            else (isinstance(given, str) and id_problem(given)) or CONTROL_PROBLEM
            if kind == "string_pattern_mismatch"
            else err["msg"]
        )
        problems.append((err["loc"], message))
    return InvalidCommandError(f"invalid {what}: " + problems_line(problems, "command"))


class ReceiptStatus(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    DEFERRED = "deferred"
    DUPLICATE = "duplicate"


@record(frozen=True, slots=True, eq=False, repr=False)
class SteeringReceipt(FrozenRecord):
    """The answer to ``submit``: accepted / rejected / deferred / duplicate, with the reason."""

    # A frozen record, not a pydantic model (the router makes one for every command, and a
    # model cost three times as much): pydantic reads and writes it as it did the model
    # (``model_dump``, ``model_dump_json``, ``model_validate``, ``model_validate_json``),
    # and a field of a pydantic model or a FastAPI response takes it.

    status: ReceiptStatus
    correlation_id: str
    run_id: str | None = None
    reason: str | None = None
    policy_id: str | None = None

    #: what pydantic's validation of a receipt reads (``model_validate*``): no unknown keys
    __pydantic_config__ = ConfigDict(extra="forbid")

    def __post_init__(self) -> None:
        # What validation did for the keyword constructor: the status from its text, and
        # only text for the others (``issue``, the router's, takes checked values as they are)
        status = self.status
        if type(status) is not ReceiptStatus:
            try:
                object.__setattr__(self, "status", ReceiptStatus(status))
            except ValueError:
                raise ArgumentError(
                    f"a receipt's status is one of {[s.value for s in ReceiptStatus]}, got "
                    f"{status!r:.80}"
                ) from None
        if not isinstance(self.correlation_id, str):
            raise ArgumentError(
                f"a receipt's correlation_id is text, got {type(self.correlation_id).__name__}"
            )
        for name in ("run_id", "reason", "policy_id"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ArgumentError(
                    f"a receipt's {name} is text or None, got {type(value).__name__}"
                )

    @property
    def accepted(self) -> bool:
        return self.status is ReceiptStatus.ACCEPTED

    @classmethod
    def duplicate(cls, correlation_id: str, run_id: str | None = None) -> "SteeringReceipt":
        """The receipt of a command whose correlation id was already taken: it changes
        nothing, and the first command's outcome stands (``run_id``: the run the first was
        filed under, as its own receipt named it)."""
        return cls.issue(
            ReceiptStatus.DUPLICATE,
            correlation_id,
            run_id,
            "duplicate correlation id: the first command's outcome stands",
            None,
        )

    @classmethod
    def issue(
        cls,
        status: ReceiptStatus,
        correlation_id: str,
        run_id: str | None,
        reason: str | None,
        policy_id: str | None,
    ) -> "SteeringReceipt":
        """The router's receipt for one submit, from values it has checked (positional):
        ``cls(...)`` without its keywords, its frozen ``__setattr__`` calls and its checks.
        ``tests/steering/test_receipts.py`` keeps it equal to ``cls(...)``."""
        receipt = _new_object(cls)
        _set_status(receipt, status)
        _set_correlation_id(receipt, correlation_id)
        _set_run_id(receipt, run_id)
        _set_reason(receipt, reason)
        _set_policy_id(receipt, policy_id)
        return receipt

    def model_dump(self, **options: Any) -> dict[str, Any]:
        """The receipt as a dict, as pydantic dumps it (``mode="json"``: JSON types only;
        ``exclude=``, ``include=``, ``exclude_none=`` as for a model)."""
        data: dict[str, Any] = _receipt_adapter().dump_python(self, **options)
        return data

    def model_dump_json(self, **options: Any) -> str:
        """The receipt as JSON text, as pydantic writes it."""
        return _receipt_adapter().dump_json(self, **options).decode()

    @classmethod
    def model_validate(cls, data: Any) -> "SteeringReceipt":
        """A receipt from a dict (or a receipt); pydantic's ``ValidationError`` if it is none."""
        receipt: SteeringReceipt = _receipt_adapter().validate_python(data)
        return receipt

    @classmethod
    def model_validate_json(cls, data: str | bytes) -> "SteeringReceipt":
        """A receipt from its JSON; pydantic's ``ValidationError`` if it is none."""
        receipt: SteeringReceipt = _receipt_adapter().validate_json(data)
        return receipt

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        return _receipt_adapter().json_schema()


_new_object = object.__new__
# The slots' own setters: a frozen record's ``__setattr__`` refuses every assignment.
_set_status = vars(SteeringReceipt)["status"].__set__
_set_correlation_id = vars(SteeringReceipt)["correlation_id"].__set__
_set_run_id = vars(SteeringReceipt)["run_id"].__set__
_set_reason = vars(SteeringReceipt)["reason"].__set__
_set_policy_id = vars(SteeringReceipt)["policy_id"].__set__
_RECEIPT_ADAPTER: list[TypeAdapter[SteeringReceipt]] = []


def _receipt_adapter() -> TypeAdapter[SteeringReceipt]:
    """The one ``TypeAdapter`` of receipts, made when first asked for (not at import)."""
    if not _RECEIPT_ADAPTER:
        _RECEIPT_ADAPTER.append(TypeAdapter(SteeringReceipt))
    return _RECEIPT_ADAPTER[0]


#: For validating commands inside other data; it reports an invalid command as pydantic's
#: ``ValidationError`` (``SteeringCommand.model_validate*`` raise ``InvalidCommandError``).
COMMAND_ADAPTER: TypeAdapter[SteeringCommand] = TypeAdapter(SteeringCommand)


def command_json_schema() -> dict[str, Any]:
    """The JSON Schema of ``SteeringCommand`` (payload schemas per kind under ``$defs``)."""
    schema = SteeringCommand.model_json_schema()
    defs = schema.setdefault("$defs", {})
    for kind, model in payload_models.PAYLOAD_MODELS.items():
        defs[f"payload_{kind.value}"] = model.model_json_schema()
    return schema


def dedupe_scope(actor: SteeringActor) -> str:
    """The namespace a command's correlation id is unique in.

    A human's ids are scoped to their tenant, so one tenant can never shadow (or learn of)
    another tenant's command by reusing its id; every other actor is code inside the runtime's
    own process and shares the empty scope.
    """
    if type(actor) is HumanActor:
        return f"tenant:{actor.tenant_id}"  # type: ignore[attr-defined]
    return ""


def sender_tenant(actor: SteeringActor) -> str | None:
    """The tenant whose runs a command's sender may reach: a human's own; None for every
    other actor (code inside the runtime's process, not held to a tenant)."""
    if type(actor) is HumanActor:
        return actor.tenant_id  # type: ignore[attr-defined,no-any-return]
    return None
