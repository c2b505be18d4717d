"""Typed events, discriminated by ``type``.

Every event carries where it happened in the run tree (``run_id``, ``root_run_id``,
``parent_run_id``, ``tenant_id``), when (``at``) and its position in the bus (``offset``, set on
publish). ``EVENT_ADAPTER`` parses any event back from JSON.

Events are built on hot paths (every steering step, every model call), so the emitters use
``make_event`` which skips re-validation of values that were validated already.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

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


@dataclass(frozen=True, slots=True)
class _Blueprint:
    """What ``make_event`` needs to know about one event class, worked out once."""

    #: Every field in declaration order: its default, or None when required or made by a factory.
    template: dict[str, Any]
    factories: tuple[tuple[str, Callable[[], Any]], ...]
    required: frozenset[str]
    known: frozenset[str]


_BLUEPRINTS: dict[type[Event], _Blueprint] = {}
_object_setattr = object.__setattr__


def _blueprint(cls: type[Event]) -> _Blueprint:
    found = _BLUEPRINTS.get(cls)
    if found is None:
        if cls.__pydantic_post_init__ or cls.__private_attributes__:
            raise TypeError(f"make_event builds plain events only; {cls.__name__} has private state")
        fields = cls.model_fields
        factories = tuple(
            (name, f.default_factory)
            for name, f in fields.items()
            if f.default_factory is not None
        )
        found = _BLUEPRINTS[cls] = _Blueprint(
            template={
                name: None if f.is_required() or f.default_factory else f.default
                for name, f in fields.items()
            },
            factories=factories,  # type: ignore[arg-type]  # no factory here takes arguments
            required=frozenset(name for name, f in fields.items() if f.is_required()),
            known=frozenset(fields),
        )
    return found


def make_event(cls: type[E], **fields: Any) -> E:
    """Build an event from values that are already valid (no re-validation: hot path).

    The result is what ``cls.model_construct(**fields)`` returns, built directly: pydantic's
    ``model_construct`` resolves every field's default on every call, which made it the largest
    cost of a steering command (four events each).
    """
    plan = _blueprint(cls)
    if "at" not in fields:
        fields["at"] = _clock.now()
    names = fields.keys()
    if not (plan.required <= names <= plan.known):
        raise TypeError(
            f"{cls.__name__}: missing {sorted(plan.required - names)}, "
            f"unknown {sorted(names - plan.known)}"
        )
    values = {**plan.template, **fields}
    for name, factory in plan.factories:
        if name not in fields:
            values[name] = factory()
    event = cls.__new__(cls)
    _object_setattr(event, "__dict__", values)
    _object_setattr(event, "__pydantic_fields_set__", set(names))
    _object_setattr(event, "__pydantic_extra__", None)
    _object_setattr(event, "__pydantic_private__", None)
    return event
