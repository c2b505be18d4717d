"""Ports of LangGraph's tests of ``bulk_update_state`` (``libs/langgraph/tests/
test_pregel_async.py``; ``abulk_update_state`` there): the same program on LangGraph and on
``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``. Each test's comment names
the LangGraph test it follows.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, cfg, lg_errors, lg_memory

from tinyagents.errors import InvalidUpdateError
from tinyagents.graph import END, StateUpdate
from tinyagents.store.checkpoint import Checkpointer

lg_types = pytest.importorskip("langgraph.types")


class FooBaz(TypedDict, total=False):
    foo: str
    baz: str


def a_then_b(g: Any) -> Any:
    def node_a(state: Any) -> dict[str, Any]:
        return {"foo": "bar"}

    def node_b(state: Any) -> dict[str, Any]:
        return {"baz": "qux"}

    return (
        g.StateGraph(FooBaz)
        .add_node("node_a", node_a)
        .add_node("node_b", node_b)
        .add_edge(g.START, "node_a")
        .add_edge("node_a", "node_b")
    )


async def test_bulk_state_updates(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel_async.py::test_bulk_state_updates
    ours = a_then_b(OURS).compile(checkpointer=checkpointer)
    saver = lg_memory.InMemorySaver()
    theirs = a_then_b(THEIRS).compile(checkpointer=saver)
    Theirs = lg_types.StateUpdate

    await theirs.abulk_update_state(cfg("1"), [[Theirs({"foo": "bar"}, "node_a")]])
    await ours.bulk_update_state("1", [[StateUpdate({"foo": "bar"}, "node_a")]])
    await theirs.abulk_update_state(
        cfg("1"),
        [[Theirs({"foo": "updated"}, "node_a"), Theirs({"baz": "new"}, "node_b")]],
    )
    head = await ours.bulk_update_state(
        "1",
        [[StateUpdate({"foo": "updated"}, "node_a"), StateUpdate({"baz": "new"}, "node_b")]],
    )
    theirs_state, ours_state = await theirs.aget_state(cfg("1")), await ours.get_state("1")
    assert ours_state.values == theirs_state.values == {"foo": "updated", "baz": "new"}
    assert ours_state.next == theirs_state.next
    assert ours_state.checkpoint_id == head
    theirs_saved = [c async for c in saver.alist(cfg("1"))]
    assert len(await ours.history("1")) == len(theirs_saved) == 2

    # several supersteps at once, each its own checkpoint
    await theirs.abulk_update_state(
        cfg("2"),
        [
            [Theirs({"foo": "bar"}, "node_a")],
            [Theirs({"foo": "updated"}, "node_a"), Theirs({"baz": "new"}, "node_b")],
        ],
    )
    await ours.bulk_update_state(
        "2",
        [
            [StateUpdate({"foo": "bar"}, "node_a")],
            [StateUpdate({"foo": "updated"}, "node_a"), StateUpdate({"baz": "new"}, "node_b")],
        ],
    )
    theirs_state, ours_state = await theirs.aget_state(cfg("2")), await ours.get_state("2")
    assert ours_state.values == theirs_state.values == {"foo": "updated", "baz": "new"}
    assert ours_state.next == theirs_state.next
    theirs_saved = [c async for c in saver.alist(cfg("2"))]
    assert len(await ours.history("2")) == len(theirs_saved) == 2

    # bad input: LangGraph's InvalidUpdateError, or its ValueError where ours is an
    # InvalidUpdateError too (docs/graph.md, "Threads"); nothing is saved
    bad: list[Any] = [
        [[StateUpdate({"foo": "error"}), StateUpdate({"baz": "error"})]],  # no as_node
        [],  # no supersteps
        [[], []],  # no updates
        [[StateUpdate(None, END), StateUpdate(None, "__copy__")]],
    ]
    for supersteps in bad:
        with pytest.raises(InvalidUpdateError):
            await ours.bulk_update_state("2", supersteps)
    assert len(await ours.history("2")) == 2
    with pytest.raises(lg_errors.InvalidUpdateError):
        await theirs.abulk_update_state(
            cfg("2"), [[Theirs({"foo": "error"}, None), Theirs({"bar": "error"}, None)]]
        )
    with pytest.raises(ValueError, match="No supersteps provided"):
        await theirs.abulk_update_state(cfg("2"), [])
    with pytest.raises(ValueError, match="No updates provided"):
        await theirs.abulk_update_state(cfg("2"), [[], []])


class Tasks(TypedDict, total=False):
    foo: str
    tasks: Annotated[list[int], operator.add]


def fan_in(g: Any) -> Any:
    """START → a, START → b, [a, b] → c (a join): two updates of one superstep, as a and as
    b, route as both nodes finished, so c is next."""

    def node(name: str) -> Any:
        return lambda state: {"tasks": [ord(name)]}

    graph = g.StateGraph(Tasks)
    for name in ("a", "b", "c"):
        graph.add_node(name, node(name))
    return graph.add_edge(g.START, "a").add_edge(g.START, "b").add_edge(["a", "b"], "c")


async def test_a_superstep_of_updates_routes_as_all_its_nodes(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel_async.py::test_batch_update_as_input (several updates of one
    # superstep are the writes of one step, reduced together)
    ours = fan_in(OURS).compile(checkpointer=checkpointer)
    theirs = fan_in(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    Theirs = lg_types.StateUpdate
    await theirs.abulk_update_state(
        cfg(), [[Theirs({"tasks": [1]}, "a"), Theirs({"tasks": [2]}, "b")]]
    )
    await ours.bulk_update_state(
        "1", [[StateUpdate({"tasks": [1]}, "a"), StateUpdate({"tasks": [2]}, "b")]]
    )
    theirs_state, ours_state = await theirs.aget_state(cfg()), await ours.get_state("1")
    assert ours_state.values == theirs_state.values == {"tasks": [1, 2]}
    assert ours_state.next == theirs_state.next == ("c",)
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == out == {"tasks": [1, 2, ord("c")]}


async def test_two_updates_of_one_value_in_a_superstep_conflict(
    checkpointer: Checkpointer,
) -> None:
    # as two nodes writing one plain value in a step: LangGraph's InvalidUpdateError
    ours = a_then_b(OURS).compile(checkpointer=checkpointer)
    with pytest.raises(InvalidUpdateError):
        await ours.bulk_update_state(
            "1", [[StateUpdate({"foo": "x"}, "node_a"), StateUpdate({"foo": "y"}, "node_b")]]
        )
    assert await ours.history("1") == []


async def test_bulk_update_state_checks_every_superstep_before_saving_any(
    checkpointer: Checkpointer,
) -> None:
    ours = a_then_b(OURS).compile(checkpointer=checkpointer)
    with pytest.raises(InvalidUpdateError, match="no such node"):
        await ours.bulk_update_state(
            "1",
            [[StateUpdate({"foo": "x"}, "node_a")], [StateUpdate({"foo": "y"}, "nope")]],
        )
    with pytest.raises(InvalidUpdateError, match="nope"):
        await ours.bulk_update_state(
            "1", [[StateUpdate({"foo": "x"}, "node_a")], [StateUpdate({"nope": 1}, "node_b")]]
        )
    with pytest.raises(InvalidUpdateError, match="StateUpdate"):
        await ours.bulk_update_state("1", [[{"foo": "x"}]])
    assert await ours.history("1") == []
