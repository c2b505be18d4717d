"""Typed events, discriminated by ``type``.

Every event carries where it happened in the run tree (``run_id``, ``root_run_id``,
``parent_run_id``, ``tenant_id``), when (``at``) and its position in the bus (``offset``, set on
publish). ``EVENT_ADAPTER`` parses any event back from JSON.

Events are built on hot paths (every steering step, every model call), so the emitters use
``make_event`` which skips re-validation of values that were validated already.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.fields import FieldInfo

from tinyagents import _clock
from tinyagents.protocol._models import new_model
from tinyagents.protocol.commands import AnyActor, AnyTarget, SteeringKind

_object_setattr = object.__setattr__


class _EmptyDict(dict[str, Any]):
    """A read-only ``{}``: built events share this one for a dict field left at its default
    (most ``affected``, ``usage``, ``detail`` … stay empty), instead of holding one each. It
    equals, dumps and validates like ``{}``; changing it raises (assign a new dict instead)."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("this empty dict is shared by events: assign a new dict instead")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only  # type: ignore[assignment]


#: The shared empty dict of built events (see ``_EmptyDict``).
EMPTY: dict[str, Any] = _EmptyDict()


class Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str
    offset: int = -1
    at: datetime = Field(default_factory=_clock.now)
    run_id: str | None = None
    root_run_id: str | None = None
    parent_run_id: str | None = None
    tenant_id: str | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        # Events made by ``EventTemplate`` share their fields-set with the events built alike:
        # before pydantic records a field that was not set yet, this event takes its own copy.
        fields_set = self.__pydantic_fields_set__
        if name not in fields_set:
            _object_setattr(self, "__pydantic_fields_set__", set(fields_set))
        BaseModel.__setattr__(self, name, value)

    def _set_offset(self, offset: int) -> None:
        """What ``event.offset = offset`` does, for the bus (once per event, so without
        pydantic's assignment path: ``offset`` needs no validation)."""
        fields_set = self.__pydantic_fields_set__
        if "offset" not in fields_set:
            _object_setattr(self, "__pydantic_fields_set__", {*fields_set, "offset"})
        self.__dict__["offset"] = offset


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
    payload_summary: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None
    boundary: str | None = None
    #: What an applied command affected: model_request_id, tool_call_id, checkpoint_id, node …
    affected: dict[str, Any] = Field(default_factory=dict)
    superseded_by: str | None = None
    #: For a command a policy transformed: the policy and the summary of the original payload.
    transformed_by: str | None = None
    original_payload_summary: dict[str, Any] | None = None


class RunEvent(Event):
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
    usage: dict[str, Any] = Field(default_factory=dict)
    detail: dict[str, Any] = Field(default_factory=dict)


class ModelEvent(Event):
    type: Literal["model.request", "model.response", "model.error"]
    request_id: str
    model: str | None = None
    message_count: int = 0
    tool_names: list[str] = Field(default_factory=list)
    tool_calls: list[str] = Field(default_factory=list)
    usage: dict[str, Any] = Field(default_factory=dict)
    text_summary: str | None = None
    error: str | None = None


class ToolEvent(Event):
    type: Literal["tool.call", "tool.result"]
    tool_call_id: str
    name: str
    args_summary: dict[str, Any] = Field(default_factory=dict)
    content_summary: str | None = None
    error: bool = False


class SubAgentEvent(Event):
    """Reported on the parent's run: what happened to one of its children."""

    type: Literal["subagent.started", "subagent.completed", "subagent.steered"]
    child_run_id: str
    agent_id: str | None = None
    status: str | None = None
    correlation_id: str | None = None
    steering_kind: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class LimitEvent(Event):
    type: Literal["limit.exceeded", "limit.warning"]
    limit: str
    used: float
    allowed: float


class GraphEvent(Event):
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
    data: dict[str, Any] = Field(default_factory=dict)


class SupervisorEvent(Event):
    type: Literal[
        "supervisor.rule_fired",
        "supervisor.judge_verdict",
        "supervisor.judge_error",
        "supervisor.action",
        "supervisor.escalated",
    ]
    rule: str | None = None
    action: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


AnyEvent = Annotated[
    SteeringEvent
    | RunEvent
    | ModelEvent
    | ToolEvent
    | SubAgentEvent
    | LimitEvent
    | GraphEvent
    | SupervisorEvent,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[AnyEvent] = TypeAdapter(AnyEvent)

E = TypeVar("E", bound=Event)


#: How the events built with one set of field names are completed: their shared fields-set
#: and the default factories still to call.
_Completion = tuple[set[str], tuple[tuple[str, Callable[[], Any]], ...]]


@dataclass(frozen=True, slots=True)
class _Shape:
    """What every event of a template has in common besides its values: the fields given up
    front, the defaults that still need their factory, and what a build must or may name."""

    given: frozenset[str]
    factories: tuple[tuple[str, Callable[[], Any]], ...]
    required: frozenset[str]
    known: frozenset[str]
    #: Shapes of the templates derived with ``sharing``, by the names they share: the router
    #: derives one template per command, always with the same names.
    derived: dict[tuple[str, ...], _Shape] = field(default_factory=dict, compare=False)
    #: Completions of the events built with these names (in call order): a call site always
    #: names the same fields, so they are checked once, and its events share one fields-set.
    completions: dict[tuple[str, ...], _Completion] = field(default_factory=dict, compare=False)

    @property
    def stamp(self) -> bool:
        return "at" not in self.given

    def sharing(self, names: tuple[str, ...], cls: type[Event]) -> _Shape:
        shape = self.derived.get(names)
        if shape is None:
            unknown = set(names) - self.known
            if unknown:
                raise TypeError(f"{cls.__name__}: unknown {sorted(unknown)}")
            shape = self.derived[names] = _Shape(
                given=self.given | set(names),
                factories=tuple(f for f in self.factories if f[0] not in names),
                required=self.required - set(names),
                known=self.known,
            )
        return shape

    def completion(self, names: tuple[str, ...], cls: type[Event]) -> _Completion:
        found = self.completions.get(names)
        if found is None:  # a new call site: check what it names, once
            named = set(names)
            if not (self.required <= named <= self.known):
                raise TypeError(
                    f"{cls.__name__}: missing {sorted(self.required - named)}, "
                    f"unknown {sorted(named - self.known)}"
                )
            # ``offset`` counts as set from the start: the bus numbers every event it publishes,
            # and the shared set must already hold it then (``Event.__setattr__``).
            fields_set = {*self.given, *named, "offset"}
            factories = tuple(f for f in self.factories if f[0] not in named)
            found = self.completions[names] = (fields_set, factories)
        return found


def _key_sharing(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` as a key-sharing dict: its ``copy()``s share one keys table and hold only
    their values, as the ``__dict__``s of ordinary instances of one class do (CPython; about
    330 bytes for a steering event's 22 fields instead of 840). Updating a key it has keeps a
    copy sharing; ``{**values, ...}`` would build an ordinary dict."""
    holder = type("EventValues", (), {})()  # a class of its own: its keys are these names only
    for name, value in values.items():
        setattr(holder, name, value)
    shared: dict[str, Any] = holder.__dict__
    return shared


def _start_value(f: FieldInfo) -> Any:
    """A field's value in a template before anything is given: its default, the shared
    ``EMPTY`` for a dict made by its factory, None for what a factory or the caller provides."""
    if f.default_factory is dict:
        return EMPTY
    return None if f.default_factory or f.is_required() else f.default


class EventTemplate(Generic[E]):
    """Builds events of one class that share some fields, checked and merged once.

    ``EventTemplate.of(cls)`` knows the class's defaults; ``.sharing(**fields)`` derives a
    template whose events all carry those fields (the router keeps one per command: its events
    share a dozen fields and differ in ``type`` and a few more). ``build(**fields)`` returns
    what ``cls.model_construct(**shared, **fields)`` would, made directly: pydantic's
    ``model_construct`` resolves every field's default on every call, which made it the largest
    cost of a steering command.

    Events are kept by the thousand (sinks, steering history), so they are made small: what
    depends only on the field names is worked out once per set of names, the events built with
    the same names share one fields-set (``Event.__setattr__`` copies it before it changes), and
    every event's ``__dict__`` shares one keys table with the others of its class. The cyclic
    garbage collector then has about two objects per event to walk, a third of the memory.
    """

    __slots__ = ("_cls", "_shape", "_stamp", "_values")
    _of: ClassVar[dict[type[Event], EventTemplate[Any]]] = {}

    def __init__(self, cls: type[E], values: dict[str, Any], shape: _Shape) -> None:
        self._cls = cls
        self._values = values  # every field in declaration order: given, default or None
        self._shape = shape
        self._stamp = shape.stamp

    @classmethod
    def of(cls, event_cls: type[E]) -> EventTemplate[E]:
        found = cls._of.get(event_cls)
        if found is None:
            if event_cls.__pydantic_post_init__ or event_cls.__private_attributes__:
                raise TypeError(
                    f"events are built directly; {event_cls.__name__} has private state"
                )
            fields = event_cls.model_fields
            shape = _Shape(
                given=frozenset(),
                factories=tuple(
                    (name, f.default_factory)  # type: ignore[misc]  # none takes arguments
                    for name, f in fields.items()
                    if f.default_factory not in (None, dict)
                ),
                required=frozenset(name for name, f in fields.items() if f.is_required()),
                known=frozenset(fields),
            )
            values = _key_sharing({name: _start_value(f) for name, f in fields.items()})
            found = cls._of[event_cls] = EventTemplate(event_cls, values, shape)
        return found

    def sharing(self, **shared: Any) -> EventTemplate[E]:
        shape = self._shape.sharing(tuple(shared), self._cls)
        values = self._values.copy()
        values.update(shared)
        return EventTemplate(self._cls, values, shape)

    def build(self, **fields: Any) -> E:
        return self.build_from(fields)

    def build_from(self, fields: dict[str, Any]) -> E:
        """``build(**fields)`` for a caller holding the fields in a dict of its own already
        (the router: every steering event). The dict is used up: pass one nobody else keeps."""
        if self._stamp and "at" not in fields:
            fields["at"] = _clock.now()
        names = tuple(fields)
        shape = self._shape
        fields_set, factories = shape.completions.get(names) or shape.completion(names, self._cls)
        values = self._values.copy()  # see _key_sharing: not {**a, **b}, which would not share
        values.update(fields)
        for name, factory in factories:
            values[name] = factory()
        return new_model(self._cls, values, fields_set)


def make_event(cls: type[E], **fields: Any) -> E:
    """Build an event from values that are already valid (no re-validation: hot path)."""
    return EventTemplate.of(cls).build(**fields)
