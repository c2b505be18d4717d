"""Typed events: every type round-trips through ``EVENT_ADAPTER``; ``make_event`` builds them."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest

from tinyagents.events.bus import EventBus
from tinyagents.events.models import (
    EMPTY,
    EVENT_ADAPTER,
    STEERING_EVENT_TYPES,
    AnyEvent,
    Event,
    EventTemplate,
    GraphEvent,
    LimitEvent,
    ModelEvent,
    RunEvent,
    SteeringEvent,
    SubAgentEvent,
    SupervisorEvent,
    ToolEvent,
    make_event,
)
from tinyagents.protocol.commands import SteeringActor, SteeringKind, SteeringTarget
from tinyagents.protocol.state import CommandState
from tinyagents.testkit import FakeClock, use_clock
from tinyagents.testkit.clock import EPOCH

#: Per event class: the fields it needs, with non-default values so a lossy round-trip shows.
FIELDS: dict[type[Event], dict[str, Any]] = {
    SteeringEvent: {
        "target": SteeringTarget.graph_task("g-1", "t-1"),
        "actor": SteeringActor.human("ana", tenant_id="acme", scopes=["agent:control"]),
        "kind": SteeringKind.APPROVE,
        "correlation_id": "c-1",
        "policy_id": "authority",
        "payload_summary": {"value": [1, "two", None]},
        "affected": {"tool_call_id": "tc-1"},
        "transformed_by": "budget",
        "original_payload_summary": {"max_tokens": 10},
    },
    RunEvent: {"status": "running", "usage": {"model_calls": 1}, "detail": {"k": "v"}},
    ModelEvent: {"request_id": "m-1", "tool_names": ["search"], "message_count": 3},
    ToolEvent: {"tool_call_id": "tc-1", "name": "search", "args_summary": {"q": "x"}},
    SubAgentEvent: {"child_run_id": "r-2", "steering_kind": "pause"},
    LimitEvent: {"limit": "max_model_calls", "used": 3.0, "allowed": 2.5},
    GraphEvent: {"thread_id": "t", "step": 2, "node": "n", "data": {"x": 1}},
    SupervisorEvent: {"rule": "tool_repeated", "action": "pause"},
}


def event_types(cls: type[Event]) -> tuple[str, ...]:
    return typing.get_args(cls.model_fields["type"].annotation)


ALL = [(cls, type_) for cls in FIELDS for type_ in event_types(cls)]


def test_the_tests_cover_every_event_class_of_the_union() -> None:
    union = typing.get_args(typing.get_args(AnyEvent)[0])
    assert set(union) == set(FIELDS)
    assert len({t for _, t in ALL}) == len(ALL)  # one class per type string


@pytest.mark.parametrize(("cls", "type_"), ALL, ids=[t for _, t in ALL])
def test_every_event_type_round_trips(cls: type[Event], type_: str) -> None:
    event = cls(
        type=type_,
        offset=41,
        at=EPOCH,
        run_id="r-1",
        root_run_id="r-0",
        parent_run_id="r-0",
        tenant_id="acme",
        **FIELDS[cls],
    )
    raw = event.model_dump_json()
    back = EVENT_ADAPTER.validate_json(raw)
    assert type(back) is cls
    assert back == event
    assert EVENT_ADAPTER.validate_python(json.loads(raw)) == event


def test_unknown_event_type_is_refused() -> None:
    with pytest.raises(ValueError, match=r"steering\.exploded"):
        EVENT_ADAPTER.validate_python({"type": "steering.exploded"})


def test_the_eight_steering_event_types() -> None:
    assert STEERING_EVENT_TYPES == (
        "steering.requested",
        "steering.accepted",
        "steering.rejected",
        "steering.deferred",
        "steering.delivered",
        "steering.applied",
        "steering.superseded",
        "steering.failed",
    )
    assert {f"steering.{state}" for state in CommandState} == set(STEERING_EVENT_TYPES)
    assert {f"steering.{state}" for state in CommandState if state.terminal} == {
        "steering.rejected",
        "steering.applied",
        "steering.superseded",
        "steering.failed",
    }


def test_make_event_takes_the_time_from_the_clock_and_fills_defaults() -> None:
    with use_clock(FakeClock()):
        event = make_event(ModelEvent, type="model.request", run_id="r-1", request_id="m-1")
    assert event.at == EPOCH
    assert (event.offset, event.tool_names, event.usage, event.error) == (-1, [], {}, None)
    assert event == ModelEvent(type="model.request", run_id="r-1", request_id="m-1", at=EPOCH)
    other = make_event(ModelEvent, type="model.request", run_id="r-1", request_id="m-2")
    assert other.tool_names is not event.tool_names  # mutable defaults are never shared


def test_make_event_keeps_an_explicit_time() -> None:
    event = make_event(RunEvent, type="run.started", at=EPOCH)
    assert event.at == EPOCH
    assert EVENT_ADAPTER.validate_json(event.model_dump_json()) == event


def test_events_refuse_unknown_fields() -> None:
    with pytest.raises(ValueError, match="surprise"):
        RunEvent(type="run.started", surprise=1)  # type: ignore[call-arg]


@pytest.mark.parametrize(("cls", "type_"), ALL, ids=[t for _, t in ALL])
def test_make_event_equals_the_validated_event(cls: type[Event], type_: str) -> None:
    built = make_event(cls, type=type_, at=EPOCH, run_id="r-1", **FIELDS[cls])
    validated = cls(type=type_, at=EPOCH, run_id="r-1", **FIELDS[cls])
    constructed = cls.model_construct(type=type_, at=EPOCH, run_id="r-1", **FIELDS[cls])
    assert type(built) is cls
    assert built == validated
    assert built.model_dump() == validated.model_dump()
    assert repr(built) == repr(validated)
    # ``offset`` counts as set from the start: the bus numbers every event it publishes.
    assert built.model_fields_set == constructed.model_fields_set | {"offset"}
    assert EVENT_ADAPTER.validate_json(built.model_dump_json()) == validated
    built.offset = 3  # events stay mutable for the bus to number them
    assert built.offset == 3


def test_events_built_alike_share_a_fields_set_until_one_of_them_changes() -> None:
    # Sharing it keeps a heap of events small; an assignment must not leak into the others.
    template = EventTemplate.of(SteeringEvent).sharing(**FIELDS[SteeringEvent], at=EPOCH)
    first, second = (template.build(type="steering.requested") for _ in range(2))
    assert first.__pydantic_fields_set__ is second.__pydantic_fields_set__
    first.offset = 7  # already counted as set: nothing copied
    EventBus().publish(second)  # the bus numbering it
    assert first.__pydantic_fields_set__ is second.__pydantic_fields_set__
    assert (first.offset, second.offset) == (7, 0)
    validated = RunEvent(type="run.started")
    EventBus().publish(validated)
    assert validated.offset == 0 and "offset" in validated.model_fields_set
    first.reason = "changed"
    assert "reason" in first.model_fields_set
    assert "reason" not in second.model_fields_set
    assert second.model_dump(exclude_unset=True).keys() == second.model_fields_set
    assert EVENT_ADAPTER.validate_json(first.model_dump_json()) == first


def test_dict_fields_left_empty_share_one_read_only_empty_dict() -> None:
    first = make_event(RunEvent, type="run.started", at=EPOCH)
    second = make_event(RunEvent, type="run.completed", at=EPOCH, usage={"model_calls": 1})
    assert first.usage is EMPTY and first.detail is EMPTY and second.detail is EMPTY
    assert first.usage == {} and first.model_dump()["usage"] == {}
    assert type(first.model_dump()["usage"]) is dict
    assert EVENT_ADAPTER.validate_json(first.model_dump_json()) == first
    with pytest.raises(TypeError, match="assign a new dict"):
        first.usage["model_calls"] = 2
    with pytest.raises(TypeError, match="assign a new dict"):
        first.detail.update(k="v")
    first.usage = {"model_calls": 2}  # what to do instead
    assert second.detail == {} and EMPTY == {}


def test_make_event_refuses_unknown_or_missing_fields() -> None:
    with pytest.raises(TypeError, match="unknown \\['colour'\\]"):
        make_event(RunEvent, type="run.started", colour="red")
    with pytest.raises(TypeError, match="missing \\['request_id'\\]"):
        make_event(ModelEvent, type="model.request")
