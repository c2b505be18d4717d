"""Ports of LangGraph's static breakpoints in a sub-graph (``compile(interrupt_after=...)``
of a graph used as a node; ``libs/langgraph/tests/test_interruption.py`` and the
sub-graph tests of ``test_pregel_async.py``): the same program on LangGraph and on
``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.

A sub-graph's ``interrupt_after`` stops the run after that node even when it is the
sub-graph's last: the parent waits there (the sub-graph's task pending), and ``run(None)``
lets the sub-graph finish and the parent go on.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_kit import Log, cfg, pair, shape, values

from tinyagents import Runtime
from tinyagents.store.checkpoint import Checkpointer


def sub_then_z(g: Any, node: str, when: str = "interrupt_after") -> Any:
    """START → sub (s1 → s2, with a breakpoint ``when`` ``node``) → z."""
    sub = g.StateGraph(Log).add_node("s1", lambda s: {"log": ["s1"]})
    sub.add_node("s2", lambda s: {"log": ["s2"]}).add_edge(g.START, "s1").add_edge("s1", "s2")
    graph = g.StateGraph(Log).add_node("sub", sub.compile(**{when: [node]}))
    graph.add_node("z", lambda s: {"log": ["z"]})
    return graph.add_edge(g.START, "sub").add_edge("sub", "z")


async def test_a_breakpoint_after_a_subgraphs_last_node_stops_the_parent(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(lambda g: sub_then_z(g, "s2"), checkpointer)
    expected = values(await theirs.ainvoke({"log": []}, cfg()))
    theirs_state = await theirs.aget_state(cfg(), subgraphs=True)
    assert expected == {"log": []}
    assert theirs_state.next == ("sub",)
    assert theirs_state.tasks[0].state.values == {"log": ["s1", "s2"]}
    assert theirs_state.tasks[0].state.next == ()
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "interrupted", result.error
    assert result.state == expected
    state = await ours.get_state("1", subgraphs=True)
    assert state.next == theirs_state.next
    assert state.tasks[0].state is not None
    assert state.tasks[0].state.values == theirs_state.tasks[0].state.values
    assert state.tasks[0].state.next == ()
    # continued, the sub-graph finishes (s2 does not run again) and the parent goes on
    expected = values(await theirs.ainvoke(None, cfg()))
    assert expected == {"log": ["s1", "s2", "z"]}
    result = await ours.run(None, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == expected


@pytest.mark.parametrize(
    ("when", "node"),
    [("interrupt_after", "s2"), ("interrupt_after", "s1"), ("interrupt_before", "s2")],
)
async def test_a_subgraphs_breakpoint_in_the_streams(
    checkpointer: Checkpointer, when: str, node: str
) -> None:
    # the stop shows once, as the parent's ``__interrupt__`` item: ours also showed one in
    # the sub-graph's namespace (and none at all after its last node)
    ours, theirs = pair(lambda g: sub_then_z(g, node, when), checkpointer)
    expected = []
    for given in ({"log": []}, None):
        expected.append(
            [
                (shape(ns), item)
                async for ns, item in theirs.astream(
                    given, cfg(), stream_mode="updates", subgraphs=True
                )
            ]
        )
    assert expected[0][-1] == ((), {"__interrupt__": ()})
    got = []
    for given in ({"log": []}, None):
        got.append(
            [
                (shape(ns), item)
                async for ns, item in ours.stream(
                    given, thread_id="1", mode="updates", subgraphs=True
                )
            ]
        )
    assert got == expected


@pytest.mark.parametrize("when", ["interrupt_before", "interrupt_after"])
async def test_a_subgraphs_stop_beside_a_sibling_streams_the_state_then_the_stop(
    checkpointer: Checkpointer, when: str
) -> None:
    # with "updates" and "values", a step that stops at a sub-graph's breakpoint beside a
    # sibling that wrote ends with the state holding that write, then the stop, as
    # LangGraph's; ours gave the stop first
    def build(g: Any) -> Any:
        graph = sub_then_z(g, "s2" if when == "interrupt_before" else "s1", when)
        return graph.add_node("o", lambda s: {"log": ["o"]}).add_edge(g.START, "o")

    ours, theirs = pair(build, checkpointer)
    modes = ["updates", "values"]
    expected = [
        (shape(ns), mode, item)
        async for ns, mode, item in theirs.astream(
            {"log": []}, cfg(), stream_mode=modes, subgraphs=True
        )
    ]
    assert expected[-2:] == [((), "values", {"log": ["o"]}), ((), "updates", {"__interrupt__": ()})]
    got = [
        (shape(ns), mode, item)
        async for ns, mode, item in ours.stream(
            {"log": []}, thread_id="1", mode=modes, subgraphs=True
        )
    ]
    assert got[-2:] == expected[-2:]
    assert sorted(map(repr, got)) == sorted(map(repr, expected))  # the rest, in any order


def a_then_b(g: Any) -> Any:
    graph = g.StateGraph(Log).add_node("a", lambda s: {"log": ["a"]})
    graph.add_node("b", lambda s: {"log": ["b"]}).add_edge(g.START, "a").add_edge("a", "b")
    return graph.add_edge("b", g.END)


@pytest.mark.parametrize("managed", [False, True])
async def test_new_input_on_a_thread_with_a_checkpoint_stops_before_its_first_node(
    checkpointer: Checkpointer, managed: bool
) -> None:
    """``interrupt_before`` the node that runs first: a run given new input on a thread that
    has checkpoints (stopped at that very breakpoint, or finished) stops there again, as
    LangGraph's (only a run that continues the thread, with None or a Command, passes it)."""
    ours, theirs = pair(a_then_b, checkpointer, interrupt_before=["a"])
    async with Runtime(testing=True) as rt:
        runtime = rt if managed else None
        for given in ({"log": []}, {"log": ["new"]}, None, {"log": ["again"]}):
            out = values(await theirs.ainvoke(given, cfg()))
            result = await ours.run(given, thread_id="1", runtime=runtime)
            theirs_next = (await theirs.aget_state(cfg())).next
            assert result.state == out
            assert (await ours.get_state("1")).next == theirs_next
            assert result.status == ("interrupted" if theirs_next else "completed")
        assert out == {"log": ["new", "a", "b", "again"]} and theirs_next == ("a",)
