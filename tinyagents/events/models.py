"""Typed events: plain records, discriminated by ``type``.

Every event carries where it happened in the run tree (``run_id``, ``root_run_id``,
``parent_run_id``, ``tenant_id``), when (``at``) and its position in the bus (``offset``, set
once by ``EventBus.publish``). Events are slotted dataclasses: built from values that are valid
already (the emitters hold checked commands, run ids and counters), they cost a plain
``__init__`` and no validation. ``EVENT_ADAPTER`` is the one pydantic ``TypeAdapter`` for
events: JSON in (``parse_event``) and out (``Event.to_json``, ``Event.to_dict``) and the JSON
Schema (``EVENT_ADAPTER.json_schema()``).

Treat an event as read-only once built: sinks, subscribers and the steering history share the
same object. They are not ``frozen=True`` dataclasses because a frozen dataclass sets each field
through ``object.__setattr__``: three times the cost of building a steering event, which the
router does four times per command (``benchmarks/steering_throughput.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import field, fields
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from tinyagents import _clock
from tinyagents._record import Record, record
from tinyagents.protocol.commands import AnyActor, AnyTarget, SteeringKind

_new_object = object.__new__


@record(slots=True, kw_only=True, eq=False, repr=False)
class Event(Record):
    """What every event carries: its ``type``, its place in the bus (``offset``), when it
    happened and where in the run tree (the module's docstring says more)."""

    type: str
    offset: int = -1
    at: datetime = field(default_factory=_clock.now)
    run_id: str | None = None
    root_run_id: str | None = None
    parent_run_id: str | None = None
    tenant_id: str | None = None

    def to_dict(
        self, *, mode: Literal["python", "json"] = "python", exclude_none: bool = False
    ) -> dict[str, Any]:
        """The event as a dict (``mode="json"``: only JSON types), through ``EVENT_ADAPTER``.
        A lone surrogate (``to_json``) stays itself, in a key as in a value: ``parse_event``
        reads the dict back equal."""
        event: AnyEvent = self  # type: ignore[assignment]  # every event built is one of them
        if mode == "python":
            data: dict[str, Any] = EVENT_ADAPTER.dump_python(event, exclude_none=exclude_none)
            return data
        try:
            data = EVENT_ADAPTER.dump_python(event, mode=mode, exclude_none=exclude_none)
            # pydantic writes a key's lone surrogate as U+FFFD, silently (or raises, for a
            # dict in a list): only then is the event dumped again.
            for name in _dict_fields(type(self)):
                item = data.get(name)
                if item and _key_replaced(item):
                    break
            else:
                return data
        except UnicodeEncodeError:
            pass
        # As Python values, which keep what a key holds, then each value JSON has no type for
        # (a datetime, an enum) as pydantic writes it.
        data = _json_types(EVENT_ADAPTER.dump_python(event, exclude_none=exclude_none))
        return data

    def to_json(self) -> str:
        """The event as JSON text, as ``parse_event`` reads it back. A lone surrogate (half a
        UTF-16 pair, from a model's or a tool's output), which UTF-8 cannot encode, is written
        as its ``\\uXXXX`` escape (``surrogates_escaped``), as the stores write run snapshots."""
        event: AnyEvent = self  # type: ignore[assignment]
        try:
            text = EVENT_ADAPTER.dump_json(event).decode()
            # A key's lone surrogate is pydantic's U+FFFD, silently. (A search for it in text
            # below U+0100, most events', is no search at all: CPython compares string kinds.)
            if "\ufffd" not in text:
                return text
        except PydanticSerializationError:  # a value's lone surrogate
            pass
        # Only then is the event dumped again (the others pay only the search above): as
        # Python values, which keep what a key holds, and as JSON by the standard library.
        # What JSON cannot hold at all (an object in a dict) raises here, as it did.
        text = json.dumps(
            json_safe(EVENT_ADAPTER.dump_python(event)),
            default=to_jsonable_python,
            ensure_ascii=False,
            separators=(",", ":"),
            allow_nan=False,
        )
        return surrogates_escaped(text)


SteeringEventType = Literal[
    "steering.requested",
    "steering.accepted",
    "steering.rejected",
    "steering.deferred",
    "steering.delivered",
    "steering.applied",
    "steering.superseded",
    "steering.failed",
]
STEERING_EVENT_TYPES: tuple[str, ...] = SteeringEventType.__args__  # type: ignore[attr-defined]


@record(slots=True, kw_only=True, eq=False, repr=False)
class SteeringEvent(Event):
    """One step of one command's lifecycle. ``run_id`` is the resolved target run."""

    type: SteeringEventType
    target: AnyTarget
    actor: AnyActor
    kind: SteeringKind
    correlation_id: str
    task_id: str | None = None
    node_id: str | None = None
    policy_id: str | None = None
    checkpoint_id: str | None = None
    payload_summary: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    boundary: str | None = None
    #: What an applied command affected: model_request_id, tool_call_id, checkpoint_id, node …
    affected: dict[str, Any] = field(default_factory=dict)
    superseded_by: str | None = None
    #: For a command a policy transformed: the policy and the summary of the original payload.
    transformed_by: str | None = None
    original_payload_summary: dict[str, Any] | None = None

    @classmethod
    def _trusted(
        cls,
        type: SteeringEventType,
        at: datetime,
        run_id: str | None,
        root_run_id: str | None,
        parent_run_id: str | None,
        tenant_id: str | None,
        target: AnyTarget,
        actor: AnyActor,
        kind: SteeringKind,
        correlation_id: str,
        task_id: str | None,
        node_id: str | None,
        policy_id: str | None,
        checkpoint_id: str | None,
        payload_summary: dict[str, Any],
        reason: str | None,
        boundary: str | None,
        affected: dict[str, Any],
        superseded_by: str | None,
        transformed_by: str | None,
        original_payload_summary: dict[str, Any] | None,
    ) -> SteeringEvent:
        """The event ``cls(...)`` makes from these values (``offset`` -1, until the bus sets
        it), every field given by position: what the steering router builds four times per
        command. Binding the twenty-odd keywords of ``__init__`` (most of them left to their
        defaults, each looked up by name) cost four fifths of building the event.
        ``tests/events/test_trusted_event.py`` keeps it equal to ``__init__``."""
        event = _new_object(cls)
        event.type = type
        event.offset = -1
        event.at = at
        event.run_id = run_id
        event.root_run_id = root_run_id
        event.parent_run_id = parent_run_id
        event.tenant_id = tenant_id
        event.target = target
        event.actor = actor
        event.kind = kind
        event.correlation_id = correlation_id
        event.task_id = task_id
        event.node_id = node_id
        event.policy_id = policy_id
        event.checkpoint_id = checkpoint_id
        event.payload_summary = payload_summary
        event.reason = reason
        event.boundary = boundary
        event.affected = affected
        event.superseded_by = superseded_by
        event.transformed_by = transformed_by
        event.original_payload_summary = original_payload_summary
        return event


@record(slots=True, kw_only=True, eq=False, repr=False)
class RunEvent(Event):
    """A run's lifecycle: started, paused and resumed, its status, and how it ended."""

    type: Literal[
        "run.started",
        "run.paused",
        "run.resumed",
        "run.status",
        "run.completed",
        "run.cancelled",
        "run.aborted",
        "run.failed",
        "run.limit_exceeded",
        "run.interrupted",
    ]
    status: str | None = None
    agent_id: str | None = None
    thread_id: str | None = None
    kind: str | None = None
    output_summary: str | None = None
    error: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)


@record(slots=True, kw_only=True, eq=False, repr=False)
class ModelEvent(Event):
    """One model request of a run, its response or its error (``request_id`` pairs them).
    Arguments and text are summarised, not copied."""

    type: Literal["model.request", "model.response", "model.error"]
    request_id: str
    model: str | None = None
    message_count: int = 0
    tool_names: list[str] = field(default_factory=list)
    tool_calls: list[str] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    text_summary: str | None = None
    error: str | None = None
    #: Why the model stopped (``model.response``): ``stop``, ``tool_calls``, ``length`` (the
    #: answer was cut at the output token limit), ``content_filter`` …, as the model said.
    finish_reason: str | None = None
    #: ``model.request``: the tool the model's own ``tool_choice`` forces, left out of this
    #: request because the request does not offer it (steering took it away, or the run was
    #: not granted it): the model chooses. None when nothing forced was dropped.
    tool_choice_dropped: str | None = None


@record(slots=True, kw_only=True, eq=False, repr=False)
class ModelDeltaEvent(Event):
    """A piece of a model's answer while it streams: text, thinking (a reasoning model's,
    never in ``text``), or part of a tool call's arguments (joined, a call's ``args_delta``s
    are its arguments as JSON text). Published only for a model that streams
    (``Model.streams``); the ``model.response`` event still follows."""

    type: Literal["model.delta"]
    request_id: str
    agent_id: str | None = None
    text: str = ""
    thinking: str = ""
    #: The tool call an argument delta belongs to (its position in the response).
    tool_call_index: int | None = None
    #: On a call's first piece: its id and the tool's name.
    tool_call_id: str | None = None
    tool_name: str | None = None
    args_delta: str = ""


@record(slots=True, kw_only=True, eq=False, repr=False)
class ToolEvent(Event):
    """One tool call of a run and its result (``tool_call_id`` pairs them); arguments and
    content are summarised."""

    type: Literal["tool.call", "tool.result"]
    tool_call_id: str
    name: str
    args_summary: dict[str, Any] = field(default_factory=dict)
    content_summary: str | None = None
    error: bool = False


@record(slots=True, kw_only=True, eq=False, repr=False)
class SubAgentEvent(Event):
    """Reported on the parent's run: what happened to one of its children."""

    type: Literal["subagent.started", "subagent.completed", "subagent.steered"]
    child_run_id: str
    agent_id: str | None = None
    status: str | None = None
    correlation_id: str | None = None
    steering_kind: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@record(slots=True, kw_only=True, eq=False, repr=False)
class LimitEvent(Event):
    """A run limit (``limit``) neared or passed: how much was ``used`` of what was
    ``allowed``."""

    type: Literal["limit.exceeded", "limit.warning"]
    limit: str
    used: float
    allowed: float


@record(slots=True, kw_only=True, eq=False, repr=False)
class GraphEvent(Event):
    """A graph run's steps and tasks: started, stepped, a task's start and end, an
    interrupt and how the run went on from it."""

    type: Literal[
        "graph.started",
        "graph.step",
        "graph.task_started",
        "graph.task_completed",
        "graph.task_failed",
        "graph.task_cancelled",
        "graph.interrupt",
        "graph.resumed",
        "graph.goto",
        "graph.state_updated",
        "graph.completed",
    ]
    thread_id: str | None = None
    step: int | None = None
    task_id: str | None = None
    node: str | None = None
    checkpoint_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@record(slots=True, kw_only=True, eq=False, repr=False)
class SupervisorEvent(Event):
    """What a run's supervisor saw and did: a rule fired, a judge's verdict or error, the
    action it took, an escalation."""

    type: Literal[
        "supervisor.rule_fired",
        "supervisor.judge_verdict",
        "supervisor.judge_error",
        "supervisor.action",
        "supervisor.escalated",
    ]
    rule: str | None = None
    action: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


#: Every event class, in the order of ``AnyEvent``.
EVENT_CLASSES: tuple[type[Event], ...] = (
    SteeringEvent,
    RunEvent,
    ModelEvent,
    ModelDeltaEvent,
    ToolEvent,
    SubAgentEvent,
    LimitEvent,
    GraphEvent,
    SupervisorEvent,
)

AnyEvent = Annotated[
    SteeringEvent
    | RunEvent
    | ModelEvent
    | ModelDeltaEvent
    | ToolEvent
    | SubAgentEvent
    | LimitEvent
    | GraphEvent
    | SupervisorEvent,
    Field(discriminator="type"),
]
#: The one adapter of events: JSON in and out, and the JSON Schema. No unknown keys; built on
#: first use (building it is a fifth of ``import tinyagents``, and most programs never parse).
#: JSON has no NaN or infinity: a float that is one is written as the string "NaN",
#: "Infinity" or "-Infinity" (``null``, pydantic's default, made an event whose ``float``
#: field held one unreadable, and lost the value of one in a dict), and read back as the
#: float in a ``float`` field, as the string in a dict (``usage``, ``data``...).
EVENT_ADAPTER: TypeAdapter[AnyEvent] = TypeAdapter(
    AnyEvent, config=ConfigDict(extra="forbid", defer_build=True, ser_json_inf_nan="strings")
)

E = TypeVar("E", bound=Event)


#: How ``EVENT_ADAPTER`` writes the floats JSON has no number for (pydantic's spelling).
_NOT_FINITE = {float("inf"): "Infinity", float("-inf"): "-Infinity"}


def json_safe(value: Any) -> Any:
    """``value`` (a dict of ``Event.to_dict(mode="json")``: pydantic leaves a float that is
    NaN or infinite a float there) with each such float the string ``Event.to_json`` and the
    stores write: "NaN", "Infinity" or "-Infinity". Other values are returned as they are."""
    kind = type(value)
    if kind is float:
        return value if value - value == 0 else _NOT_FINITE.get(value, "NaN")
    if kind is dict:
        return {key: json_safe(item) for key, item in value.items()}
    if kind is list:
        return [json_safe(item) for item in value]
    return value


#: The fields of each event class that hold dicts of any keys (``payload_summary``, ``data``
#: ...): only in those may a key hold what pydantic writes as U+FFFD (``Event.to_dict``).
_DICT_FIELDS: dict[type[Event], tuple[str, ...]] = {}


def _dict_fields(cls: type[Event]) -> tuple[str, ...]:
    names = _DICT_FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in fields(cls) if str(f.type).startswith("dict["))
        _DICT_FIELDS[cls] = names
    return names


def _key_replaced(value: Any) -> bool:
    """Whether a key in ``value`` (a dict or a list of a JSON-mode dump) holds U+FFFD:
    pydantic's for a lone surrogate, or the text's own."""
    items: Iterable[Any] = value
    if type(value) is dict:
        if "\ufffd" in "".join(value):
            return True
        items = value.values()
    for item in items:
        kind = type(item)
        if (kind is dict or kind is list) and item and _key_replaced(item):
            return True
    return False


def _json_types(value: Any) -> Any:
    """A Python-mode dump's ``value`` with JSON's types, as in a JSON-mode dump, but with
    every string, keys too, kept as it is (``Event.to_dict``)."""
    return jsonable_keys_kept(value)


def jsonable_keys_kept(value: Any, fallback: Callable[[Any], Any] | None = None) -> Any:
    """``value`` as ``pydantic_core.to_jsonable_python(value, fallback=fallback)`` makes it,
    but with every string, a dict's keys too, kept as it is: pydantic's turns a key holding a
    lone surrogate into U+FFFD, or raises. Dicts, lists and tuples are walked here, anything
    else is left to pydantic (events' JSON-mode dicts, graph checkpoints)."""
    kind = type(value)
    if kind is dict:
        return {
            key if type(key) is str else next(iter(to_jsonable_python({key: 0}))): (
                jsonable_keys_kept(item, fallback)
            )
            for key, item in value.items()
        }
    if kind is list or kind is tuple:
        return [jsonable_keys_kept(item, fallback) for item in value]
    if value is None or kind is str or kind is int or kind is float or kind is bool:
        return value
    return to_jsonable_python(value, fallback=fallback)


def surrogates_escaped(text: str) -> str:
    """JSON ``text`` with each lone surrogate written as its ``\\uXXXX`` escape: UTF-8 text that
    reads back as the same string (``parse_event``, ``json.loads``, ``JSON.parse``). The one
    rule for events' JSON (``Event.to_json``, the stores' event log, the server's event
    stream): the store writer's, which spelled a surrogate out in an event's text (UTF-8 with
    ``backslashreplace``), applied to the JSON text instead, where that spelling is JSON's
    escape (``json.dumps`` writes the stores' run snapshots so too). A high surrogate followed
    by a low one reads back as the one character the pair encodes, as in UTF-16."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _no_constant(name: str) -> Any:
    raise ValueError(f"JSON has no {name}")


def parse_event(data: str | bytes | dict[str, Any]) -> AnyEvent:
    """An event back from its JSON (or from the dict of ``to_dict(mode="json")``), validated;
    raises ``pydantic.ValidationError`` for anything that is not one. A ``\\ud800`` escape (a
    lone surrogate, ``surrogates_escaped``) reads back as the character."""
    if isinstance(data, dict):
        return EVENT_ADAPTER.validate_python(data)
    try:
        return EVENT_ADAPTER.validate_json(data)
    except ValidationError as exc:
        # pydantic's JSON parser refuses a lone surrogate's escape; the standard library's
        # reads it. Only invalid JSON is read again, and only valid JSON is taken from it.
        if exc.errors()[0]["type"] != "json_invalid":
            raise
        try:
            value = json.loads(data, parse_constant=_no_constant)
        except (ValueError, RecursionError):  # nested past pydantic's reader and this one
            raise exc from None
        if not isinstance(value, dict):
            raise
        return EVENT_ADAPTER.validate_python(value)
