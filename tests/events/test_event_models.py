"""Typed events: plain slotted records; every type round-trips through ``EVENT_ADAPTER``."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

import pytest

from tinyagents.events import (
    EVENT_ADAPTER,
    STEERING_EVENT_TYPES,
    AnyEvent,
    Event,
    EventBus,
    GraphEvent,
    LimitEvent,
    ModelDeltaEvent,
    ModelEvent,
    RunEvent,
    SteeringEvent,
    SubAgentEvent,
    SupervisorEvent,
    ToolEvent,
    parse_event,
)
from tinyagents.protocol import CommandState, SteeringActor, SteeringKind, SteeringTarget
from tinyagents.testkit import EPOCH, FakeClock, use_clock

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
    ModelDeltaEvent: {
        "request_id": "m-1",
        "agent_id": "a",
        "tool_call_index": 0,
        "tool_name": "search",
        "args_delta": '{"q": ',
    },
    ToolEvent: {"tool_call_id": "tc-1", "name": "search", "args_summary": {"q": "x"}},
    SubAgentEvent: {"child_run_id": "r-2", "steering_kind": "pause"},
    LimitEvent: {"limit": "max_model_calls", "used": 3.0, "allowed": 2.5},
    GraphEvent: {"thread_id": "t", "step": 2, "node": "n", "data": {"x": 1}},
    SupervisorEvent: {"rule": "tool_repeated", "action": "pause"},
}


def event_types(cls: type[Event]) -> tuple[str, ...]:
    return typing.get_args(typing.get_type_hints(cls)["type"])


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
    raw = event.to_json()
    back = parse_event(raw)
    assert type(back) is cls
    assert back == event
    assert parse_event(json.loads(raw)) == event
    assert parse_event(event.to_dict(mode="json")) == event
    assert event.to_dict() == EVENT_ADAPTER.dump_python(event)


@pytest.mark.parametrize(("cls", "type_"), ALL, ids=[t for _, t in ALL])
def test_every_event_type_round_trips_holding_lone_surrogates(cls: type[Event], type_: str) -> None:
    """A lone surrogate (from a model's or a tool's output) in a value or a dict key: written
    as its escape by the standard library's JSON, the rest as pydantic writes it."""
    event = cls(type=type_, at=EPOCH, run_id="r-1", tenant_id="acme \udc00", **FIELDS[cls])
    raw = event.to_json()
    assert "\\udc00" in raw
    assert parse_event(raw) == event
    assert parse_event(raw).to_json() == raw
    assert json.loads(raw) == json.loads(dataclasses.replace(event, tenant_id="acme").to_json()) | {
        "tenant_id": "acme \udc00"
    }


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


def test_events_take_the_time_from_the_clock_and_fill_defaults() -> None:
    with use_clock(FakeClock()):
        event = ModelEvent(type="model.request", run_id="r-1", request_id="m-1")
    assert event.at == EPOCH
    assert (event.offset, event.tool_names, event.usage, event.error) == (-1, [], {}, None)
    other = ModelEvent(type="model.request", run_id="r-1", request_id="m-2")
    assert other.tool_names is not event.tool_names  # mutable defaults are never shared
    assert other.usage is not event.usage


def test_an_explicit_time_is_kept() -> None:
    event = RunEvent(type="run.started", at=EPOCH)
    assert event.at == EPOCH
    assert parse_event(event.to_json()) == event


def test_events_refuse_unknown_or_missing_fields() -> None:
    with pytest.raises(TypeError, match="surprise"):
        RunEvent(type="run.started", surprise=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="request_id"):
        ModelEvent(type="model.request")  # type: ignore[call-arg]


@pytest.mark.parametrize("cls", list(FIELDS), ids=lambda c: c.__name__)
def test_events_are_plain_slotted_records(cls: type[Event]) -> None:
    """No pydantic model underneath: a dataclass with slots (no ``__dict__`` per event)."""
    assert dataclasses.is_dataclass(cls)
    assert "__slots__" in cls.__dict__
    event = cls(type=event_types(cls)[0], **FIELDS[cls])
    assert not hasattr(event, "__dict__")
    assert not hasattr(event, "model_dump")


def test_the_bus_numbers_each_event_once() -> None:
    bus = EventBus()
    first, second = RunEvent(type="run.started"), RunEvent(type="run.completed")
    assert (bus.publish(first), bus.publish(second)) == (first, second)
    assert (first.offset, second.offset) == (0, 1)
    assert parse_event(second.to_json()).offset == 1


def test_parsing_validates_what_a_constructor_trusts() -> None:
    """The constructor trusts its caller (the emitters hold checked values); JSON from outside
    goes through the adapter, which refuses what an event cannot hold."""
    with pytest.raises(ValueError, match="request_id"):
        parse_event({"type": "model.request"})
    with pytest.raises(ValueError, match="message_count"):
        parse_event({"type": "model.request", "request_id": "m", "message_count": "many"})
    with pytest.raises(ValueError, match="colour"):
        parse_event({"type": "run.started", "colour": "red"})


def test_the_json_schema_covers_every_event_type() -> None:
    schema = json.dumps(EVENT_ADAPTER.json_schema())
    for _, type_ in ALL:
        assert f'"{type_}"' in schema
