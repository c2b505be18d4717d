"""Typed events, discriminated by ``type``.

Every event carries where it happened in the run tree (``run_id``, ``root_run_id``,
``parent_run_id``, ``tenant_id``), when (``at``) and its position in the bus (``offset``, set on
publish). ``EVENT_ADAPTER`` parses any event back from JSON.

Events are built on hot paths (every steering step, every model call), so the emitters use
``make_event`` which skips re-validation of values that were validated already.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from tinyagents import _clock
from tinyagents.steering.commands import AnyActor, AnyTarget, SteeringKind


class Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str
    offset: int = -1
    at: datetime = Field(default_factory=_clock.now)
    run_id: str | None = None
    root_run_id: str | None = None
    parent_run_id: str | None = None
    tenant_id: str | None = None


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
TERMINAL_STEERING_EVENTS = frozenset(
    {"steering.rejected", "steering.applied", "steering.superseded", "steering.failed"}
)


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
        "graph.checkpoint",
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


_object_setattr = object.__setattr__


class EventTemplate(Generic[E]):
    """Builds events of one class that share some fields, checked and merged once.

    ``EventTemplate.of(cls)`` knows the class's defaults; ``.sharing(**fields)`` derives a
    template whose events all carry those fields (the router keeps one per command: its events
    share a dozen fields and differ in ``type`` and a few more). ``build(**fields)`` returns
    what ``cls.model_construct(**shared, **fields)`` would, made directly: pydantic's
    ``model_construct`` resolves every field's default on every call, which made it the largest
    cost of a steering command.
    """

    __slots__ = ("_cls", "_factories", "_given", "_known", "_required", "_stamp", "_values")
    _of: ClassVar[dict[type[Event], EventTemplate[Any]]] = {}

    def __init__(
        self,
        cls: type[E],
        values: dict[str, Any],
        given: frozenset[str],
        factories: tuple[tuple[str, Callable[[], Any]], ...],
        required: frozenset[str],
        known: frozenset[str],
    ) -> None:
        self._cls = cls
        self._values = values  # every field in declaration order: given, default or None
        self._given = given
        self._factories = factories
        self._required = required
        self._known = known
        self._stamp = "at" not in given

    @classmethod
    def of(cls, event_cls: type[E]) -> EventTemplate[E]:
        found = cls._of.get(event_cls)
        if found is None:
            if event_cls.__pydantic_post_init__ or event_cls.__private_attributes__:
                raise TypeError(
                    f"events are built directly; {event_cls.__name__} has private state"
                )
            fields = event_cls.model_fields
            found = cls._of[event_cls] = EventTemplate(
                event_cls,
                values={
                    name: None if f.default_factory or f.is_required() else f.default
                    for name, f in fields.items()
                },
                given=frozenset(),
                factories=tuple(
                    (name, f.default_factory)  # type: ignore[misc]  # none takes arguments
                    for name, f in fields.items()
                    if f.default_factory is not None
                ),
                required=frozenset(name for name, f in fields.items() if f.is_required()),
                known=frozenset(fields),
            )
        return found

    def sharing(self, **shared: Any) -> EventTemplate[E]:
        names = shared.keys()
        if not names <= self._known:
            raise TypeError(f"{self._cls.__name__}: unknown {sorted(names - self._known)}")
        return EventTemplate(
            self._cls,
            values={**self._values, **shared},
            given=self._given | names,
            factories=tuple(f for f in self._factories if f[0] not in shared),
            required=self._required - names,
            known=self._known,
        )

    def build(self, **fields: Any) -> E:
        if self._stamp and "at" not in fields:
            fields["at"] = _clock.now()
        names = fields.keys()
        if not (self._required <= names <= self._known):
            raise TypeError(
                f"{self._cls.__name__}: missing {sorted(self._required - names)}, "
                f"unknown {sorted(names - self._known)}"
            )
        values = {**self._values, **fields}
        for name, factory in self._factories:
            if name not in fields:
                values[name] = factory()
        event = self._cls.__new__(self._cls)
        _object_setattr(event, "__dict__", values)
        _object_setattr(event, "__pydantic_fields_set__", {*self._given, *names})
        _object_setattr(event, "__pydantic_extra__", None)
        _object_setattr(event, "__pydantic_private__", None)
        return event


def make_event(cls: type[E], **fields: Any) -> E:
    """Build an event from values that are already valid (no re-validation: hot path)."""
    return EventTemplate.of(cls).build(**fields)
