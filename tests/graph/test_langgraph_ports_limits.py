"""Ports of LangGraph's tests of a run's limits (``libs/langgraph/tests/test_pregel_async.py``):
a run's ``max_concurrency`` and a graph's ``step_timeout``, the same program on LangGraph and
on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``. Each test's comment
names the LangGraph test it follows.

LangGraph's programs have a plain list as their whole state (``StateGraph(Annotated[list,
operator.add])``); here the list is a mapping's ``items`` key (ported before ours took a
one-value state: ``test_langgraph_ports_root.py``). LangGraph's
nodes sleep a random time to overlap; here each yields to the event loop a few times, which
overlaps them as surely and times nothing.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, Literal, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, cfg, lg_errors, lg_memory, values

from tinyagents.errors import (
    ConfigurationError,
    GraphError,
    GraphValidationError,
    StepTimeoutError,
)
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


# -- step_timeout ----------------------------------------------------------------------------


class Hello(TypedDict):
    hello: str


class Hang:
    """A node that waits until ``release`` is set (for ever, unless a test sets it), and
    notes whether a cancel ended its wait."""

    def __init__(self, update: dict[str, Any] | None = None) -> None:
        self.update = {"hello": "2"} if update is None else update
        self.release = asyncio.Event()
        self.cancelled = False
        self.calls = 0

    async def __call__(self, state: Any) -> Any:
        self.calls += 1
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return self.update


def hang_beside(g: Any, hang: Hang, fast_calls: list[str]) -> Any:
    """START → [awhile, alittlewhile]: ``awhile`` hangs, ``alittlewhile`` returns at once
    (LangGraph's ``test_step_timeout_on_stream_hang``)."""

    async def alittlewhile(state: Any) -> dict[str, Any]:
        fast_calls.append("alittlewhile")
        return {"hello": "1"}

    builder = g.StateGraph(Hello)
    builder.add_node("awhile", hang)
    builder.add_node("alittlewhile", alittlewhile)
    builder.set_conditional_entry_point(
        lambda _: ["awhile", "alittlewhile"], ["awhile", "alittlewhile"]
    )
    return builder


async def test_step_timeout_cancels_a_step_that_outlives_it() -> None:
    # LangGraph: test_pregel_async.py::test_step_timeout_on_stream_hang (its 1 s is 0.1 s
    # here, and its 1.5 s node waits for ever: nothing is timed)
    ours_hang, theirs_hang = Hang(), Hang()
    ours = hang_beside(OURS, ours_hang, []).compile()
    theirs = hang_beside(THEIRS, theirs_hang, []).compile()
    ours.step_timeout = theirs.step_timeout = 0.1

    theirs_chunks: list[Any] = []
    with pytest.raises(asyncio.TimeoutError):
        async for chunk in theirs.astream({"hello": "world"}, stream_mode="updates"):
            theirs_chunks.append(chunk)
    ours_chunks: list[Any] = []
    with pytest.raises(asyncio.TimeoutError, match=r"step_timeout=0\.1 s"):
        async for chunk in ours.stream({"hello": "world"}, mode="updates"):
            ours_chunks.append(chunk)
    assert ours_chunks == theirs_chunks == [{"alittlewhile": {"hello": "1"}}]
    assert ours_hang.cancelled and theirs_hang.cancelled

    ours_hang.cancelled = False
    result = await ours.run({"hello": "world"})
    assert result.status == "failed" and isinstance(result.error, TimeoutError)
    assert "'awhile'" in str(result.error) and ours_hang.cancelled
    # as after a failing node, the result shows what the finished tasks wrote
    assert result.state == {"hello": "1"}


async def test_a_timed_out_step_goes_on_from_its_finished_tasks(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel_async.py::test_step_timeout_on_stream_hang, with a checkpointer:
    # the task that finished before the timeout keeps its result, and run(None) runs only
    # the one that was cancelled
    ours_hang, theirs_hang = Hang({}), Hang({})
    ours_fast: list[str] = []
    theirs_fast: list[str] = []
    ours = hang_beside(OURS, ours_hang, ours_fast).compile(checkpointer=checkpointer)
    theirs = hang_beside(THEIRS, theirs_hang, theirs_fast).compile(
        checkpointer=lg_memory.InMemorySaver()
    )
    ours.step_timeout = theirs.step_timeout = 0.1
    with pytest.raises(asyncio.TimeoutError):
        await theirs.ainvoke({"hello": "world"}, cfg())
    result = await ours.run({"hello": "world"}, thread_id="1")
    assert isinstance(result.error, TimeoutError)
    assert (await ours.get_state("1")).next == (await theirs.aget_state(cfg())).next

    ours_hang.release.set()
    theirs_hang.release.set()
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.status == "completed"
    assert result.state == out
    assert ours_fast == theirs_fast == ["alittlewhile"]
    assert ours_hang.calls == theirs_hang.calls == 2


def parent_command_only(g: Any) -> Any:
    async def parent_command_node(state: Any) -> Any:
        await asyncio.sleep(0)
        return g.Command(graph=g.Command.PARENT, goto="test_cmd", update={"key": "value"})

    builder = g.StateGraph(Hello)
    builder.add_node("parent_cmd", parent_command_node)
    builder.set_entry_point("parent_cmd")
    return builder


@pytest.mark.parametrize("with_timeout", [True, False])
async def test_a_parent_command_is_not_a_timeout(
    with_timeout: bool, checkpointer: Checkpointer
) -> None:
    # LangGraph: test_pregel_async.py::test_timeout_with_parent_command
    # docs/graph.md, "Sub-graphs": Command.PARENT from a graph that runs as no sub-graph fails
    # its run with a GraphError, where LangGraph lets its ParentCommand out of ainvoke
    ours = parent_command_only(OURS).compile(checkpointer=checkpointer)
    theirs = parent_command_only(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    if with_timeout:
        ours.step_timeout = theirs.step_timeout = 1
    with pytest.raises(lg_errors.ParentCommand) as exc_info:
        await theirs.ainvoke({"hello": "start"}, cfg())
    assert exc_info.value.args[0].goto == "test_cmd"
    result = await ours.run({"hello": "start"}, thread_id="1")
    assert type(result.error) is GraphError
    assert "not running as a sub-graph" in str(result.error)


def parent_goto(g: Any, with_timeout: str | bool) -> Any:
    class State(TypedDict):
        dialog_state: Annotated[list[str], operator.add]

    async def node_a_child(state: Any) -> dict[str, Any]:
        return {"dialog_state": ["a_child_state"]}

    async def node_b_child(state: Any) -> Any:
        return g.Command(
            graph=g.Command.PARENT, goto="node_b_parent", update={"dialog_state": ["b_child_state"]}
        )

    sub_builder = g.StateGraph(State)
    sub_builder.add_node("node_a_child", node_a_child)
    sub_builder.add_node("node_b_child", node_b_child)
    sub_builder.add_edge(g.START, "node_a_child")
    sub_builder.add_edge("node_a_child", "node_b_child")
    sub_graph = sub_builder.compile()
    if with_timeout in ("inner", "both"):
        sub_graph.step_timeout = 1

    async def node_b_parent(state: Any) -> dict[str, Any]:
        return {"dialog_state": ["node_b_parent"]}

    main_builder = g.StateGraph(State)
    main_builder.add_node("node_b_parent", node_b_parent)
    main_builder.add_edge(g.START, "subgraph_node")
    main_builder.add_node("subgraph_node", sub_graph, destinations=("node_b_parent",))
    return main_builder


@pytest.mark.parametrize("with_timeout", [False, "inner", "outer", "both"])
async def test_a_sub_graphs_parent_command_passes_a_step_timeout(
    with_timeout: str | bool, checkpointer: Checkpointer
) -> None:
    # LangGraph: test_pregel_async.py::test_parent_command_goto (subgraph_persist=False)
    ours = parent_goto(OURS, with_timeout).compile(checkpointer=checkpointer, name="parent")
    theirs = parent_goto(THEIRS, with_timeout).compile(
        checkpointer=lg_memory.InMemorySaver(), name="parent"
    )
    if with_timeout in ("outer", "both"):
        ours.step_timeout = theirs.step_timeout = 1
    out = await theirs.ainvoke({"dialog_state": ["init_state"]}, cfg())
    result = await ours.run({"dialog_state": ["init_state"]}, thread_id="1")
    expected = {"dialog_state": ["init_state", "b_child_state", "node_b_parent"]}
    assert out == result.state == expected


async def test_a_sub_graphs_own_step_timeout_fails_its_parent() -> None:
    hang = Hang()
    inner = StateGraph(Hello).add_node("hang", hang).add_edge(START, "hang").compile()
    inner.step_timeout = 0.05
    outer = StateGraph(Hello).add_node("sub", inner).add_edge(START, "sub").compile()
    result = await outer.run({"hello": "x"})
    assert isinstance(result.error, TimeoutError) and hang.cancelled
    assert "'hang'" in str(result.error)


async def test_step_timeout_bounds_a_step_of_one_task_in_every_kind_of_run(rt: Any) -> None:
    hang = Hang()
    graph = StateGraph(Hello).add_node("hang", hang).add_edge(START, "hang")
    compiled = graph.compile(step_timeout=0.05)
    assert compiled.step_timeout == 0.05
    result = await compiled.run({"hello": "x"})
    assert isinstance(result.error, TimeoutError) and hang.cancelled
    hang.cancelled = False
    result = await compiled.run({"hello": "x"}, runtime=rt)
    assert isinstance(result.error, TimeoutError) and hang.cancelled
    hang.release.set()
    result = await compiled.run({"hello": "x"})
    assert result.status == "completed" and result.state == {"hello": "2"}


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "1"])
def test_a_bad_step_timeout_is_refused(bad: Any) -> None:
    graph = StateGraph(Hello).add_node("a", lambda s: {}).add_edge(START, "a")
    with pytest.raises(GraphValidationError, match="step_timeout must be"):
        graph.compile(step_timeout=bad)
    compiled = graph.compile()
    with pytest.raises(GraphValidationError, match="step_timeout must be"):
        compiled.step_timeout = bad
    assert compiled.step_timeout is None


def ask_beside_hang(g: Any, hang: Hang) -> Any:
    def ask(state: Any) -> dict[str, Any]:
        return {"hello": g.interrupt("which?")}

    builder = g.StateGraph(Hello)
    builder.add_node("awhile", hang)
    builder.add_node("ask", ask)
    builder.set_conditional_entry_point(lambda _: ["awhile", "ask"], ["awhile", "ask"])
    return builder


async def test_a_question_asked_in_a_timed_out_step_waits_for_its_answer(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: pregel/_runner.py (Runner.atick): the step's timeout is raised though a
    # task of it asked a question; the question stays asked, and the answer's run runs the
    # cancelled task again
    ours_hang, theirs_hang = Hang({}), Hang({})
    ours = ask_beside_hang(OURS, ours_hang).compile(checkpointer=checkpointer, step_timeout=0.1)
    theirs = ask_beside_hang(THEIRS, theirs_hang).compile(checkpointer=lg_memory.InMemorySaver())
    theirs.step_timeout = 0.1
    with pytest.raises(asyncio.TimeoutError):
        await theirs.ainvoke({"hello": "world"}, cfg())
    result = await ours.run({"hello": "world"}, thread_id="1")
    assert isinstance(result.error, StepTimeoutError)
    assert ours_hang.cancelled and theirs_hang.cancelled
    theirs_asked = (await theirs.aget_state(cfg())).interrupts
    ours_asked = (await ours.get_state("1")).interrupts
    assert [i.value for i in ours_asked] == [i.value for i in theirs_asked] == ["which?"]

    ours_hang.release.set()
    theirs_hang.release.set()
    out = await theirs.ainvoke(THEIRS.Command(resume="that"), cfg())
    result = await ours.run(OURS.Command(resume="that"), thread_id="1")
    assert out == result.state == {"hello": "that"}
    assert ours_hang.calls == theirs_hang.calls == 2
