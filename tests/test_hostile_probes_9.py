"""A hostile or careless user's ninth round: a supervisor spec's ``watches`` and
``criteria``, a ``Send`` to no node, a steer's priority by name, ``update_budget``'s
keywords.

Each test is a probe that found something (named in its docstring) or holds a decision down.
"""

from __future__ import annotations

import json
import operator
from collections.abc import AsyncIterator
from typing import Annotated, Any, TypedDict

import pytest

from tinyagents.errors import ArgumentError, InvalidCommandError, InvalidRouteError
from tinyagents.graph import START, Send, StateGraph
from tinyagents.protocol import (
    Boundary,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringPriority,
    SteeringTarget,
)
from tinyagents.protocol.commands import PRIORITY_NAMES
from tinyagents.runs import RunHandle, RunInfo
from tinyagents.runtime import Runtime
from tinyagents.supervisor import SupervisorSpec, SupervisorSpecError

# -- a supervisor spec ------------------------------------------------------------------------


def test_a_spec_watching_the_same_thing_twice_is_refused() -> None:
    """Found: ``watches: [agents, agents]`` was kept as it was given, a list that says one
    thing twice (a copy-paste, or a merge of two specs). Refused, on its line, as a key given
    twice is."""
    with pytest.raises(SupervisorSpecError, match=r"watches.*'agents' twice") as caught:
        SupervisorSpec.from_yaml("on_violation: pause\nwatches:\n  - agents\n  - agents\n")
    assert caught.value.line == 2
    with pytest.raises(SupervisorSpecError, match="'agents' twice"):
        SupervisorSpec(watches=["agents", "agents"])
    assert SupervisorSpec(watches=["agents"]).watches == ["agents"]


def test_criteria_holding_a_nul_are_refused() -> None:
    """Found: ``criteria: "Stay on billing\\0"`` was taken: a NUL no judge reads as text (and
    a store's text column refuses), sent with every judge call. Refused on its line."""
    with pytest.raises(SupervisorSpecError, match=r"criteria.*NUL") as caught:
        SupervisorSpec.from_yaml('model: openai/gpt-4o-mini\ncriteria: "Stay on billing\\0"\n')
    assert caught.value.line == 2
    with pytest.raises(SupervisorSpecError, match="NUL"):
        SupervisorSpec(criteria="a\x00b")
    assert SupervisorSpec(criteria="Stay on billing.\n").criteria == "Stay on billing.\n"


def test_a_hex_count_is_read_as_yaml_1_2_reads_it() -> None:
    """Decision held down: ``count: 0x10`` is 16. The spec's YAML is read by YAML 1.2's core
    schema, where ``0x10`` and ``0o20`` are ints as ``16`` is (the loader's docstring says
    so); the loader hands over an int, and refusing a spelling YAML defines as a number would
    make the spec's YAML a dialect of its own."""
    spec = SupervisorSpec.from_yaml("rules:\n  - when: tool_repeated\n    count: 0x10\n")
    assert spec.rules[0].count == 16  # type: ignore[union-attr]


# -- a Send to no node ------------------------------------------------------------------------


class _State(TypedDict):
    x: Annotated[list[int], operator.add]


def test_a_send_to_an_empty_node_name_fails_its_run_with_a_typed_error() -> None:
    """Probed: ``Send("", {})`` is built. As LangGraph's ``Send``, which takes any name and
    fails when it is routed: a router sending to ``""`` fails the run with the
    ``InvalidRouteError`` naming the node, as a ``Send`` to any unknown node does (no node
    can be named ``""``, which ``add_node`` refuses)."""
    assert Send("", {}).node == ""

    def route(state: _State) -> list[Send]:
        return [Send("", {"x": []})]

    graph = StateGraph(_State)
    graph.add_node("n", lambda state: {"x": [1]})
    graph.add_conditional_edges(START, route)
    with pytest.raises(InvalidRouteError, match="sent the graph to unknown node ''"):
        graph.compile().run_sync({"x": []})


# -- a steer's priority by name ---------------------------------------------------------------


@pytest.fixture
async def rt() -> AsyncIterator[Runtime]:
    async with Runtime(testing=True) as runtime:
        yield runtime


async def _handle(rt: Runtime) -> RunHandle:
    return await rt.register(RunHandle(RunInfo(run_id="r-1"), submitter=rt))


@pytest.mark.parametrize("name", ["low", "normal", "high", "critical"])
async def test_a_steer_takes_the_priority_names_the_operator_api_takes(
    rt: Runtime, name: str
) -> None:
    """Found: ``handle.steer("x", priority="high")`` was an ``InvalidCommandError`` ("Input
    should be 0, 50, 100 or 200") where ``POST /runs/{id}/commands`` takes ``"high"``. One
    mapping (``protocol.PRIORITY_NAMES``) now serves both."""
    handle = await _handle(rt)
    receipt = await handle.steer("focus", priority=name)
    assert receipt.status == "accepted"
    assert PRIORITY_NAMES[name] is SteeringPriority[name.upper()]
    (sent,) = handle.inbox.take(Boundary.BEFORE_MODEL_CALL)
    assert sent.priority is SteeringPriority[name.upper()]
    wire = {**sent.model_dump(mode="json"), "priority": name}
    assert SteeringCommand.model_validate_json(json.dumps(wire)).priority is sent.priority


@pytest.mark.parametrize("name", ["HIGH", "High", "urgent", ""])
def test_a_priority_name_the_api_refuses_is_refused(name: str) -> None:
    with pytest.raises(InvalidCommandError, match=r"priority.*low, normal, high, critical"):
        SteeringCommand(
            target=SteeringTarget.agent_run("r-1"),
            actor=SteeringActor.human("bob"),
            kind=SteeringKind.PAUSE,
            priority=name,  # type: ignore[arg-type]
        )


# -- update_budget's keywords -----------------------------------------------------------------


@pytest.mark.parametrize("kw", [{"max_turns": 5}, {"max_depth": 3}])
async def test_update_budget_refuses_an_unknown_keyword_naming_the_budget_fields(
    rt: Runtime, kw: dict[str, Any]
) -> None:
    """Found: ``update_budget(max_turns=5)`` raised a plain ``TypeError``. Now an
    ``ArgumentError`` (still a ``TypeError``, as it was, for ``except TypeError``) naming the
    limits it can change; nothing is sent."""
    handle = await _handle(rt)
    with pytest.raises(ArgumentError, match="max_model_calls, max_output_tokens") as caught:
        await handle.update_budget(**kw)
    assert isinstance(caught.value, TypeError)
    assert rt.steering_history("r-1") == []
