"""Ports of LangGraph's tests of a run's limits (``libs/langgraph/tests/test_pregel_async.py``):
``max_concurrency``, the same program on LangGraph and on ``tinyagents.graph``, compared, as in
``test_langgraph_ports.py``. Each test's comment names the LangGraph test it follows.

LangGraph's programs have a plain list as their whole state (``StateGraph(Annotated[list,
operator.add])``); a state here is a mapping, so the list is its ``items`` key. LangGraph's
nodes sleep a random time to overlap; here each yields to the event loop a few times, which
overlaps them as surely and times nothing.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, Literal, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, cfg, lg_memory, values

from tinyagents.errors import ConfigurationError
from tinyagents.graph import START, StateGraph
from tinyagents.store.checkpoint import Checkpointer


class Items(TypedDict):
    items: Annotated[list[Any], operator.add]


class Gauge:
    """How many calls of a node run at once, and the most there were."""

    def __init__(self) -> None:
        self.currently = 0
        self.max_currently = 0

    async def overlap(self) -> None:
        self.currently += 1
        self.max_currently = max(self.max_currently, self.currently)
        for _ in range(5):
            await asyncio.sleep(0)
        self.currently -= 1


FULL = ["0", "1", *range(100), "3"]


def fan_out(g: Any, gauge: Gauge) -> Any:
    """1 → a Send to 2 for each of 0..99 → 3 (LangGraph's ``test_max_concurrency``)."""

    def one(state: Any) -> dict[str, Any]:
        return {"items": ["1"]}

    async def two(state: Any) -> dict[str, Any]:
        await gauge.overlap()
        return {"items": [state]}

    def three(state: Any) -> dict[str, Any]:
        return {"items": ["3"]}

    async def send_to_many(state: Any) -> list[Any]:
        return [g.Send("2", idx) for idx in range(100)]

    async def route_to_three(state: Any) -> Literal["3"]:
        return "3"

    builder = g.StateGraph(Items)
    builder.add_node("1", one)
    builder.add_node("2", two)
    builder.add_node("3", three)
    builder.add_edge(g.START, "1")
    builder.add_conditional_edges("1", send_to_many, ["2"])
    builder.add_conditional_edges("2", route_to_three)
    return builder


def fan_out_by_command(g: Any, gauge: Gauge) -> Any:
    """1 → Command(goto=[Send("2", i) ...]) → 2 → Command(goto="3") (LangGraph's
    ``test_max_concurrency_control``)."""

    async def node1(state: Any) -> Any:
        return g.Command(update={"items": ["1"]}, goto=[g.Send("2", idx) for idx in range(100)])

    async def node2(state: Any) -> Any:
        await gauge.overlap()
        return g.Command(update={"items": [state]}, goto="3")

    async def node3(state: Any) -> dict[str, Any]:
        return {"items": ["3"]}

    builder = g.StateGraph(Items)
    builder.add_node("1", node1, destinations=("2",))
    builder.add_node("2", node2, destinations=("3",))
    builder.add_node("3", node3)
    builder.add_edge(g.START, "1")
    return builder


@pytest.mark.parametrize("build", [fan_out, fan_out_by_command])
async def test_max_concurrency_bounds_the_tasks_of_a_step(build: Any) -> None:
    # LangGraph: test_pregel_async.py::test_max_concurrency and
    # test_max_concurrency_control (without a checkpointer)
    ours_gauge, theirs_gauge = Gauge(), Gauge()
    ours = build(OURS, ours_gauge).compile()
    theirs = build(THEIRS, theirs_gauge).compile()

    out = await theirs.ainvoke({"items": ["0"]})
    result = await ours.run({"items": ["0"]})
    assert out == result.state == {"items": FULL}
    assert ours_gauge.max_currently == theirs_gauge.max_currently == 100
    assert ours_gauge.currently == theirs_gauge.currently == 0

    ours_gauge.max_currently = theirs_gauge.max_currently = 0
    out = await theirs.ainvoke({"items": ["0"]}, {"max_concurrency": 10})
    result = await ours.run({"items": ["0"]}, max_concurrency=10)
    assert out == result.state == {"items": FULL}
    assert ours_gauge.max_currently == theirs_gauge.max_currently == 10
    assert ours_gauge.currently == theirs_gauge.currently == 0


@pytest.mark.parametrize("build", [fan_out, fan_out_by_command])
async def test_max_concurrency_holds_across_a_breakpoint(
    build: Any, checkpointer: Checkpointer
) -> None:
    # LangGraph: test_pregel_async.py::test_max_concurrency and
    # test_max_concurrency_control (the checkpointed half, interrupt_before=["2"])
    ours_gauge, theirs_gauge = Gauge(), Gauge()
    ours = build(OURS, ours_gauge).compile(checkpointer=checkpointer, interrupt_before=["2"])
    theirs = build(THEIRS, theirs_gauge).compile(
        checkpointer=lg_memory.InMemorySaver(), interrupt_before=["2"]
    )
    thread1 = {"max_concurrency": 10, **cfg()}

    out = await theirs.ainvoke({"items": ["0"]}, thread1)
    result = await ours.run({"items": ["0"]}, thread_id="1", max_concurrency=10)
    assert values(out) == result.state == {"items": ["0", "1"]}
    assert (await theirs.aget_state(thread1)).values == (await ours.get_state("1")).values
    out = await theirs.ainvoke(None, thread1)
    result = await ours.run(None, thread_id="1", max_concurrency=10)
    assert out == result.state == {"items": FULL}
    assert ours_gauge.max_currently == theirs_gauge.max_currently == 10


async def test_max_concurrency_holds_in_a_streamed_run_and_a_driven_one() -> None:
    gauge = Gauge()
    graph = fan_out(OURS, gauge).compile()
    items = [u async for u in graph.stream({"items": ["0"]}, mode="updates", max_concurrency=3)]
    assert len(items) == 102 and gauge.max_currently == 3
    gauge.max_currently = 0
    async with graph.iter({"items": ["0"]}, max_concurrency=7) as run:
        async for _ in run.supersteps():
            pass
    assert gauge.max_currently == 7


async def test_a_sub_graph_runs_its_steps_under_its_callers_max_concurrency(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph hands the run's config, max_concurrency with it, to a sub-graph it runs
    inner_gauge = Gauge()
    inner = fan_out(OURS, inner_gauge).compile()
    outer = StateGraph(Items).add_node("sub", inner).add_edge(START, "sub").compile(checkpointer)
    result = await outer.run({"items": ["0"]}, thread_id="t", max_concurrency=4)
    assert result.state["items"][-1] == "3"
    assert inner_gauge.max_currently == 4

    called_gauge = Gauge()
    called = fan_out(OURS, called_gauge).compile()
    own: dict[str, int] = {}

    async def calls(state: Items) -> dict[str, Any]:
        out = await called.run({"items": ["0"]}, **own)
        return {"items": out.state["items"][-1:]}

    caller = StateGraph(Items).add_node("calls", calls).add_edge(START, "calls")
    result = await caller.compile(checkpointer).run({"items": []}, thread_id="c", max_concurrency=6)
    assert result.state == {"items": ["3"]}
    assert called_gauge.max_currently == 6

    # docs/graph.md, "Running": a call from a node of a run that saves nothing has no limit
    # of its caller's to take, so the call passes its own
    called_gauge.max_currently = 0
    own["max_concurrency"] = 2
    result = await caller.compile().run({"items": []}, max_concurrency=6)
    assert result.state == {"items": ["3"]}
    assert called_gauge.max_currently == 2


async def test_max_concurrency_holds_in_a_runtime_managed_run(rt: Any) -> None:
    gauge = Gauge()
    graph = fan_out(OURS, gauge).compile()
    result = await graph.run({"items": ["0"]}, runtime=rt, max_concurrency=5)
    assert result.state == {"items": FULL}
    assert gauge.max_currently == 5


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3", float("nan")])
async def test_a_bad_max_concurrency_is_refused_before_anything_runs(
    bad: Any, checkpointer: Checkpointer
) -> None:
    # LangGraph took 0 as no limit and failed a step on a negative one (Semaphore's error)
    gauge = Gauge()
    graph = fan_out(OURS, gauge).compile(checkpointer=checkpointer)
    with pytest.raises(ConfigurationError, match="max_concurrency must be"):
        await graph.run({"items": ["0"]}, thread_id="1", max_concurrency=bad)
    with pytest.raises(ConfigurationError, match="max_concurrency must be"):
        graph.stream({"items": ["0"]}, thread_id="1", max_concurrency=bad)
    with pytest.raises(ConfigurationError, match="max_concurrency must be"):
        async with graph.iter({"items": ["0"]}, thread_id="1", max_concurrency=bad):
            pass
    assert await graph.history("1") == [] and gauge.max_currently == 0
