"""Sub-graphs called from inside a node (``await sub.run(...)``, ``sub.stream(...)``): the
caller's checkpointer, thread and interrupts, ``Command.PARENT``, ``get_state(subgraphs=True)``
and the history (issue 10 item 11). Every test that takes ``checkpointer`` runs on the memory
and the SQLite backends.

Several are ports of LangGraph's ``tests/test_pregel_async.py`` (``subgraph.ainvoke(state)``
in a node is ``(await subgraph.run(state)).state`` here); the expected values are LangGraph's.
"""

from __future__ import annotations

import operator
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Annotated, Any, TypedDict

import pytest
from graphkit import LogState, logger

from tinyagents import Runtime
from tinyagents.errors import GraphError
from tinyagents.graph import END, START, Command, Send, StateGraph, interrupt
from tinyagents.graph.stream import INTERRUPT_KEY
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringKind, SteeringTarget
from tinyagents.store.checkpoint import Checkpointer
from tinyagents.testkit import EventWaiter


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in stream]


def asking_child(calls: list[str]) -> Any:
    """prepare → ask (interrupts) → END, on the log channel; records what ran in ``calls``."""

    def prepare(state: Any) -> dict[str, Any]:
        calls.append("prepare")
        return {"log": ["prepare"]}

    def ask(state: Any) -> dict[str, Any]:
        calls.append("ask")
        return {"log": [f"ask:{interrupt('which?')}"]}

    graph = StateGraph(LogState).add_node("prepare", prepare).add_node("ask", ask)
    graph.add_edge(START, "prepare").add_edge("prepare", "ask").add_edge("ask", END)
    return graph.compile()


def calling_parent(child: Any, cp: Checkpointer | None, calls: list[str]) -> Any:
    """a → caller (runs ``child`` from inside its function) → b."""

    async def caller(state: Any) -> dict[str, Any]:
        calls.append("caller")
        result = await child.run({"log": [f"from:{state['log'][-1]}"]})
        return {"log": result.state["log"]}

    graph = StateGraph(LogState).add_node("a", logger("a")).add_node("caller", caller)
    graph.add_node("b", logger("b")).add_edge(START, "a").add_edge("a", "caller")
    return graph.add_edge("caller", "b").add_edge("b", END).compile(checkpointer=cp)


# -- the caller's checkpointer, thread and interrupts --------------------------------------


async def test_an_interrupt_in_a_called_subgraph_pauses_the_caller_and_resumes_inside(
    checkpointer: Checkpointer,
) -> None:
    calls: list[str] = []
    graph = calling_parent(asking_child(calls), checkpointer, calls)
    paused = await graph.run({"log": []}, thread_id="t")
    assert paused.status == "interrupted" and paused.state == {"log": ["a"]}
    [question] = paused.interrupts
    assert question.value == "which?" and question.node == "ask"
    assert question.ns.startswith("caller:t-")
    # the sub-graph checkpoints in that namespace of the caller's thread
    child_head = await checkpointer.latest("t", question.ns)
    assert child_head is not None and [p["node"] for p in child_head.frontier] == ["ask"]
    assert (await graph.get_state("t")).next == ("caller",)

    result = await graph.run(Command(resume={question.id: "left"}), thread_id="t")
    assert result.status == "completed", result.error
    assert result.state == {"log": ["a", "from:a", "prepare", "ask:left", "b"]}
    # the calling node ran again from its top; inside the sub-graph only "ask" ran again
    assert calls == ["caller", "prepare", "ask", "caller", "ask"]
    assert (await graph.get_state("t")).values == result.state


async def test_double_interrupt_in_a_called_subgraph(checkpointer: Checkpointer) -> None:
    # LangGraph: test_double_interrupt_subgraph (a sub-graph invoked from a node)
    class AgentState(TypedDict):
        input: Any

    def node_1(state: Any) -> dict[str, Any]:
        return {"input": interrupt("interrupt node 1")}

    def node_2(state: Any) -> dict[str, Any]:
        return {"input": interrupt("interrupt node 2")}

    sub = StateGraph(AgentState).add_node("node_1", node_1).add_node("node_2", node_2)
    sub.add_edge(START, "node_1").add_edge("node_1", "node_2")
    subgraph = sub.add_edge("node_2", END).compile()

    async def invoke_sub_agent(state: Any) -> dict[str, Any]:
        return (await subgraph.run(state)).state

    parent = StateGraph(AgentState).add_node("invoke_sub_agent", invoke_sub_agent)
    parent.add_edge(START, "invoke_sub_agent").add_edge("invoke_sub_agent", END)
    parent_agent = parent.compile(checkpointer=checkpointer)

    [first] = await collect(parent_agent.stream({"input": "test"}, thread_id="1", mode="updates"))
    assert [i.value for i in first[INTERRUPT_KEY]] == ["interrupt node 1"]
    [second] = await collect(
        parent_agent.stream(Command(resume=True), thread_id="1", mode="updates")
    )
    assert [i.value for i in second[INTERRUPT_KEY]] == ["interrupt node 2"]
    last = await collect(parent_agent.stream(Command(resume=True), thread_id="1", mode="updates"))
    assert last == [{"invoke_sub_agent": {"input": True}}]


async def test_the_same_and_different_subgraphs_called_in_one_node(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_multiple_subgraphs
    class State(TypedDict, total=False):
        a: int
        b: int
        result: int
        add_result: int
        multiply_result: int

    def add(state: Any) -> dict[str, Any]:
        return {"result": state["a"] + state["b"]}

    def multiply(state: Any) -> dict[str, Any]:
        return {"result": state["a"] * state["b"]}

    add_subgraph = StateGraph(State).add_node("add", add).add_edge(START, "add")
    add_subgraph = add_subgraph.add_edge("add", END).compile()
    multiply_subgraph = StateGraph(State).add_node("multiply", multiply)
    multiply_subgraph = multiply_subgraph.add_edge(START, "multiply").add_edge("multiply", END)
    multiply_subgraph = multiply_subgraph.compile()

    async def call_same_subgraph(state: Any) -> dict[str, Any]:
        result = (await add_subgraph.run(state)).state
        another = (await add_subgraph.run({"a": result["result"], "b": 10})).state
        return {"result": another["result"]}

    same = StateGraph(State).add_node("call_same_subgraph", call_same_subgraph)
    same.add_edge(START, "call_same_subgraph").add_edge("call_same_subgraph", END)
    same = same.compile(checkpointer=checkpointer)
    assert (await same.run({"a": 2, "b": 3}, thread_id="1")).state["result"] == 15

    async def call_multiple_subgraphs(state: Any) -> dict[str, Any]:
        add_result = (await add_subgraph.run(state)).state
        multiply_result = (await multiply_subgraph.run(state)).state
        return {"add_result": add_result["result"], "multiply_result": multiply_result["result"]}

    multiple = StateGraph(State).add_node("call_multiple_subgraphs", call_multiple_subgraphs)
    multiple.add_edge(START, "call_multiple_subgraphs").add_edge("call_multiple_subgraphs", END)
    multiple = multiple.compile(checkpointer=checkpointer)
    result = await multiple.run({"a": 2, "b": 3}, thread_id="2")
    assert (result.state["add_result"], result.state["multiply_result"]) == (5, 6)


async def test_each_call_of_a_node_has_its_own_namespace(checkpointer: Checkpointer) -> None:
    first_calls: list[str] = []
    second_calls: list[str] = []
    first, second = asking_child(first_calls), asking_child(second_calls)

    async def caller(state: Any) -> dict[str, Any]:
        one = await first.run({"log": ["one"]})
        two = await second.run({"log": ["two"]})
        return {"log": one.state["log"] + two.state["log"]}

    graph = StateGraph(LogState).add_node("caller", caller).add_edge(START, "caller")
    graph = graph.add_edge("caller", END).compile(checkpointer=checkpointer)
    [q1] = (await graph.run({"log": []}, thread_id="t")).interrupts
    [q2] = (await graph.run(Command(resume="x"), thread_id="t")).interrupts
    assert q2.ns == f"{q1.ns}|1" and q1.id != q2.id  # LangGraph's namespace of a 2nd call
    # the second call's state is read, and changed, in its namespace
    states = (await graph.get_state("t", subgraphs=True)).tasks[0].states
    assert [s.ns for s in states] == [q1.ns, q2.ns]
    await graph.update_state("t", {"log": ["edited"]}, ns=q2.ns)
    result = await graph.run(Command(resume="y"), thread_id="t")
    assert result.state == {"log": ["one", "prepare", "ask:x", "two", "prepare", "edited", "ask:y"]}
    # a finished call is not run again when the node runs again: it gives its final state
    assert first_calls == second_calls == ["prepare", "ask", "ask"]


async def test_parallel_callers_resume_one_at_a_time(checkpointer: Checkpointer) -> None:
    calls: list[str] = []
    child = asking_child(calls)

    async def caller(state: Any) -> dict[str, Any]:
        return {"log": (await child.run(state)).state["log"]}

    graph = StateGraph(LogState).add_node("fan", logger("fan")).add_node("caller", caller)
    graph.add_edge(START, "fan").add_conditional_edges(
        "fan", lambda s: [Send("caller", {"log": [f"job{i}"]}) for i in (1, 2)]
    )
    graph = graph.add_edge("caller", END).compile(checkpointer=checkpointer)
    first, second = (await graph.run({}, thread_id="t")).interrupts
    assert first.ns != second.ns
    result = await graph.run(Command(resume={second.id: "two"}), thread_id="t")
    assert [i.id for i in result.interrupts] == [first.id]
    result = await graph.run(Command(resume={first.id: "one"}), thread_id="t")
    assert result.status == "completed"
    assert result.state["log"] == [
        "fan",
        "job1",
        "prepare",
        "ask:one",
        "job2",
        "prepare",
        "ask:two",
    ]
    assert calls.count("prepare") == 2  # no sub-graph started twice


async def test_nested_calls_namespace_each_level(checkpointer: Checkpointer) -> None:
    calls: list[str] = []
    inner = asking_child(calls)

    async def middle_node(state: Any) -> dict[str, Any]:
        return {"log": (await inner.run({"log": []})).state["log"]}

    middle = StateGraph(LogState).add_node("middle_node", middle_node)
    middle = middle.add_edge(START, "middle_node").add_edge("middle_node", END).compile()

    async def outer_node(state: Any) -> dict[str, Any]:
        return {"log": (await middle.run({"log": []})).state["log"]}

    graph = StateGraph(LogState).add_node("outer_node", outer_node).add_edge(START, "outer_node")
    graph = graph.add_edge("outer_node", END).compile(checkpointer=checkpointer)
    [question] = (await graph.run({"log": ["seed"]}, thread_id="t")).interrupts
    outer_part, inner_part = question.ns.split("|")
    assert outer_part.startswith("outer_node:t-") and inner_part.startswith("middle_node:t-")
    result = await graph.run(Command(resume="deep"), thread_id="t")
    assert result.state == {"log": ["seed", "prepare", "ask:deep"]}
    assert calls == ["prepare", "ask", "ask"]


async def test_a_failed_called_subgraph_continues_from_its_checkpoint(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_checkpoint_recovery_async, with the failure inside a called sub-graph
    calls: list[str] = []
    boom = {"armed": True}

    def prepare(state: Any) -> dict[str, Any]:
        calls.append("prepare")
        return {"log": ["prepare"]}

    def fragile(state: Any) -> dict[str, Any]:
        calls.append("fragile")
        if boom["armed"]:
            raise RuntimeError("Simulated failure")
        return {"log": ["fragile"]}

    child = StateGraph(LogState).add_node("prepare", prepare).add_node("fragile", fragile)
    child.add_edge(START, "prepare").add_edge("prepare", "fragile")
    child = child.add_edge("fragile", END).compile()

    async def caller(state: Any) -> dict[str, Any]:
        return {"log": (await child.run({"log": []})).state["log"]}

    graph = StateGraph(LogState).add_node("caller", caller).add_edge(START, "caller")
    graph = graph.add_edge("caller", END).compile(checkpointer=checkpointer)
    failed = await graph.run({"log": ["start"]}, thread_id="t")
    assert failed.status == "failed" and isinstance(failed.error, RuntimeError)
    state = await graph.get_state("t")
    assert state.values == {"log": ["start"]} and state.next == ("caller",)

    boom["armed"] = False
    result = await graph.run(None, thread_id="t")
    assert result.state == {"log": ["start", "prepare", "fragile"]}
    assert calls == ["prepare", "fragile", "fragile"]  # prepare's checkpoint was kept


async def test_a_breakpoint_inside_a_called_subgraph_pauses_the_caller(
    checkpointer: Checkpointer,
) -> None:
    calls: list[str] = []
    inner = StateGraph(LogState).add_node("one", logger("one")).add_node("two", logger("two"))
    inner.add_edge(START, "one").add_edge("one", "two").add_edge("two", END)
    stopping = inner.compile(interrupt_before=["two"])

    async def caller(state: Any) -> dict[str, Any]:
        calls.append("caller")
        return {"log": (await stopping.run({"log": []})).state["log"]}

    graph = StateGraph(LogState).add_node("caller", caller).add_node("side", logger("side"))
    graph.add_edge(START, "caller").add_edge(START, "side")
    graph = graph.add_edge("caller", END).add_edge("side", END).compile(checkpointer=checkpointer)
    paused = await graph.run({"log": []}, thread_id="t")
    # stopped with no question: the finished sibling's write shows, the caller is next
    assert paused.status == "interrupted" and paused.interrupts == []
    assert paused.state == {"log": ["side"]}
    assert (await graph.get_state("t")).next == ("caller",)
    state = await graph.get_state("t", subgraphs=True)
    [sub_state] = state.tasks[0].states
    assert sub_state.values == {"log": ["one"]} and sub_state.next == ("two",)
    result = await graph.run(None, thread_id="t")
    assert result.state == {"log": ["one", "two", "side"]}
    assert calls == ["caller", "caller"]


# -- Command.PARENT --------------------------------------------------------------------------


def escalating_child() -> Any:
    def escalate(state: Any) -> Any:
        if interrupt("escalate?") == "yes":
            return Command(graph=Command.PARENT, goto="rescue", update={"log": ["escalated"]})
        return {"log": ["handled"]}

    child = StateGraph(LogState).add_node("escalate", escalate).add_edge(START, "escalate")
    return child.add_edge("escalate", END).compile()


def parent_of_escalation(child: Any, cp: Checkpointer | None) -> Any:
    async def caller(state: Any) -> dict[str, Any]:
        result = await child.run({"log": []})
        return {"log": result.state["log"]}

    graph = StateGraph(LogState).add_node("caller", caller, destinations=["rescue"])
    graph.add_node("next", logger("next")).add_node("rescue", logger("rescue"))
    graph.add_edge(START, "caller").add_edge("caller", "next").add_edge("next", END)
    return graph.add_edge("rescue", END).compile(checkpointer=cp)


async def test_command_parent_from_a_called_subgraph_after_an_interrupt(
    checkpointer: Checkpointer,
) -> None:
    graph = parent_of_escalation(escalating_child(), checkpointer)
    paused = await graph.run({}, thread_id="t")
    assert [i.ns.split(":")[0] for i in paused.interrupts] == ["caller"]
    result = await graph.run(Command(resume="yes"), thread_id="t")
    assert result.status == "completed", result.error
    # the command is the calling task's output: its update, and its goto added to the edges
    assert result.state["log"] == ["escalated", "next", "rescue"]
    assert [h.next for h in await graph.history("t")][:2] == [(), ("next", "rescue")]


@pytest.mark.parametrize("node_kind", ["plain", "with_context"])
async def test_command_parent_from_a_called_subgraph_without_checkpointer(node_kind: str) -> None:
    def escalate(state: Any) -> Command:
        return Command(graph=Command.PARENT, goto="rescue", update={"log": ["escalated"]})

    child = StateGraph(LogState).add_node("escalate", escalate).add_edge(START, "escalate")
    child = child.add_edge("escalate", END).compile()

    async def plain(state: Any) -> dict[str, Any]:
        try:
            await child.run({"log": []})
        except Exception:  # the hand-over is no error a node could swallow
            return {"log": ["swallowed"]}
        return {"log": ["not handed over"]}

    async def with_context(state: Any, ctx: Any) -> dict[str, Any]:
        return await plain(state)

    graph = StateGraph(LogState)
    caller = plain if node_kind == "plain" else with_context
    graph.add_node("caller", caller, destinations=["rescue"])
    graph.add_node("next", logger("next")).add_node("rescue", logger("rescue"))
    graph.add_edge(START, "caller").add_edge("caller", "next").add_edge("next", END)
    result = await graph.add_edge("rescue", END).compile().run({})
    assert result.state["log"] == ["escalated", "next", "rescue"]


async def test_command_parent_of_a_top_level_run_inside_a_node_is_refused() -> None:
    # an explicit thread_id makes the run a separate one: it has no parent to hand over to
    def escalate(state: Any) -> Command:
        return Command(graph=Command.PARENT, goto="x")

    child = StateGraph(LogState).add_node("escalate", escalate).add_edge(START, "escalate")
    child = child.add_edge("escalate", END).compile()

    async def caller(state: Any) -> dict[str, Any]:
        result = await child.run({"log": []}, thread_id="separate")
        return {"log": [type(result.error).__name__]}

    graph = StateGraph(LogState).add_node("caller", caller).add_edge(START, "caller")
    result = await graph.add_edge("caller", END).compile().run({})
    assert result.state["log"] == ["GraphError"]


async def test_a_called_subgraph_refuses_command_input(checkpointer: Checkpointer) -> None:
    child = asking_child([])

    async def caller(state: Any) -> dict[str, Any]:
        await child.run(Command(resume="x"))
        return {}

    graph = StateGraph(LogState).add_node("caller", caller).add_edge(START, "caller")
    graph = graph.add_edge("caller", END).compile(checkpointer=checkpointer)
    result = await graph.run({}, thread_id="t")
    assert isinstance(result.error, GraphError) and "state input" in str(result.error)


# -- streaming -------------------------------------------------------------------------------


async def test_a_node_streams_a_called_subgraph(checkpointer: Checkpointer) -> None:
    calls: list[str] = []
    child = asking_child(calls)
    seen: list[Any] = []

    async def caller(state: Any) -> dict[str, Any]:
        seen.clear()
        async for item in child.stream({"log": []}, mode="updates"):
            seen.append(item)
        return {"log": ["streamed"]}

    graph = StateGraph(LogState).add_node("caller", caller).add_edge(START, "caller")
    graph = graph.add_edge("caller", END).compile(checkpointer=checkpointer)
    paused = await graph.run({}, thread_id="t")
    [question] = paused.interrupts
    assert seen[0] == {"prepare": {"log": ["prepare"]}}
    assert [i.id for i in seen[1][INTERRUPT_KEY]] == [question.id]
    result = await graph.run(Command(resume="up"), thread_id="t")
    assert result.state == {"log": ["streamed"]}
    assert seen == [{"ask": {"log": ["ask:up"]}}]  # it continued inside the sub-graph
    assert calls == ["prepare", "ask", "ask"]


async def test_the_callers_stream_shows_a_called_subgraph_with_its_namespace(
    checkpointer: Checkpointer,
) -> None:
    graph = calling_parent(asking_child([]), checkpointer, [])
    items = await collect(graph.stream({"log": []}, thread_id="t", mode="updates", subgraphs=True))
    assert items[0] == ((), {"a": {"log": ["a"]}})
    ns, update = items[1]
    assert (
        len(ns) == 1
        and ns[0].startswith("caller:t-")
        and update == {"prepare": {"log": ["prepare"]}}
    )
    assert items[-1][0] == () and INTERRUPT_KEY in items[-1][1]


async def test_the_callers_stream_shows_a_subgraph_a_node_streams(
    checkpointer: Checkpointer,
) -> None:
    child = asking_child([])
    seen: list[Any] = []

    async def caller(state: Any) -> dict[str, Any]:
        async for item in child.stream({"log": []}, mode="updates"):
            seen.append(item)
        return {"log": ["streamed"]}

    graph = StateGraph(LogState).add_node("caller", caller).add_edge(START, "caller")
    graph = graph.add_edge("caller", END).compile(checkpointer=checkpointer)
    items = await collect(graph.stream({}, thread_id="t", mode="updates", subgraphs=True))
    # as for a sub-graph node: its items under its namespace, then the caller's pause
    [(ns, update), (inner_ns, inner_pause), (top, paused)] = items
    assert len(ns) == 1 and ns[0].startswith("caller:t-") and inner_ns == ns
    assert update == {"prepare": {"log": ["prepare"]}} == seen[0]
    assert inner_pause[INTERRUPT_KEY] == paused[INTERRUPT_KEY]
    assert top == () and [i.value for i in paused[INTERRUPT_KEY]] == ["which?"]
    # the node's own stream is as it was: namespaces relative to the call
    assert [i.value for i in seen[1][INTERRUPT_KEY]] == ["which?"]
    items = await collect(
        graph.stream(Command(resume="x"), thread_id="t", mode="updates", subgraphs=True)
    )
    assert items == [(ns, {"ask": {"log": ["ask:x"]}}), ((), {"caller": {"log": ["streamed"]}})]


# -- get_state(subgraphs=True) and the history ---------------------------------------------


async def test_get_state_with_subgraphs_shows_the_called_subgraphs_state(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_subgraph_checkpoint_true_interrupt
    class SubgraphState(TypedDict, total=False):
        bar: str
        baz: str

    def subgraph_node_1(state: Any) -> dict[str, Any]:
        return {"baz": interrupt("Provide baz value")}

    def subgraph_node_2(state: Any) -> dict[str, Any]:
        return {"bar": state["bar"] + state["baz"]}

    sub = StateGraph(SubgraphState).add_node("subgraph_node_1", subgraph_node_1)
    sub.add_node("subgraph_node_2", subgraph_node_2).add_edge(START, "subgraph_node_1")
    sub.add_edge("subgraph_node_1", "subgraph_node_2").add_edge("subgraph_node_2", END)
    subgraph = sub.compile()

    class ParentState(TypedDict):
        foo: str

    def node_1(state: Any) -> dict[str, Any]:
        return {"foo": "hi! " + state["foo"]}

    async def node_2(state: Any) -> dict[str, Any]:
        response = (await subgraph.run({"bar": state["foo"]})).state
        return {"foo": response["bar"]}

    builder = StateGraph(ParentState).add_node("node_1", node_1).add_node("node_2", node_2)
    builder.add_edge(START, "node_1").add_edge("node_1", "node_2").add_edge("node_2", END)
    graph = builder.compile(checkpointer=checkpointer)
    paused = await graph.run({"foo": "foo"}, thread_id="1")
    assert paused.state == {"foo": "hi! foo"}
    assert [i.value for i in paused.interrupts] == ["Provide baz value"]

    state = await graph.get_state("1", subgraphs=True)
    [task] = state.tasks
    assert task.name == "node_2" and task.state is not None
    assert task.state.values == {"bar": "hi! foo"}
    assert task.state.next == ("subgraph_node_1",) and task.state.ns == paused.interrupts[0].ns
    assert [i.value for i in task.state.tasks[0].interrupts] == ["Provide baz value"]
    # without subgraphs=True the tasks are there, their sub-graph states are not
    assert (await graph.get_state("1")).tasks[0].state is None
    # a process that has not made the call yet finds the graph the node refers to
    graph.called.clear()
    assert (await graph.get_state("1", subgraphs=True)).tasks[0].state == task.state

    # the sub-graph's own history, by its namespace
    sub_history = await graph.history("1", ns=task.state.ns)
    assert [h.source for h in sub_history] == ["loop", "input"]
    assert sub_history[0].checkpoint_id == task.state.checkpoint_id

    result = await graph.run(Command(resume="baz"), thread_id="1")
    assert result.state == {"foo": "hi! foobaz"}
    # the history keeps the checkpoint the call paused in, and its sub-graph state
    [at_pause] = [h for h in await graph.history("1") if h.next == ("node_2",)]
    old = await graph.get_state("1", at_pause.checkpoint_id, subgraphs=True)
    assert old.tasks[0].state is not None
    assert old.tasks[0].state.values == {"bar": "hi! foobaz", "baz": "baz"}


async def test_get_state_with_subgraphs_shows_a_subgraph_nodes_state(
    checkpointer: Checkpointer,
) -> None:
    graph = StateGraph(LogState).add_node("sub", asking_child([])).add_edge(START, "sub")
    graph = graph.add_edge("sub", END).compile(checkpointer=checkpointer)
    await graph.run({"log": ["in"]}, thread_id="t")
    state = await graph.get_state("t", subgraphs=True)
    [task] = state.tasks
    assert task.state is not None and task.state.values == {"log": ["in", "prepare"]}
    assert [t.name for t in task.state.tasks] == ["ask"]


# -- the shared channels of a parent and a called sub-graph -------------------------------


class Shared(TypedDict, total=False):
    items: Annotated[list[str], operator.add]


async def test_update_state_while_a_called_subgraph_waits(checkpointer: Checkpointer) -> None:
    def ask(state: Any) -> dict[str, Any]:
        return {"items": [f"sub:{interrupt('?')}"]}

    child = StateGraph(Shared).add_node("ask", ask).add_edge(START, "ask")
    child = child.add_edge("ask", END).compile()

    async def caller(state: Any) -> dict[str, Any]:
        result = await child.run({"items": []})
        return {"items": result.state["items"]}

    graph = StateGraph(Shared).add_node("caller", caller).add_edge(START, "caller")
    graph = graph.add_edge("caller", END).compile(checkpointer=checkpointer)
    await graph.run({"items": ["in"]}, thread_id="t")
    await graph.update_state("t", {"items": ["edited"]})
    result = await graph.run(Command(resume="ok"), thread_id="t")
    assert result.status == "completed", result.error
    # the sub-graph continued from where it stopped (it started before the edit)
    assert result.state == {"items": ["in", "edited", "sub:ok"]}


# -- in a runtime: steering answers a called sub-graph's interrupt -------------------------


async def test_steering_approves_an_interrupt_of_a_called_subgraph(
    checkpointer: Checkpointer,
) -> None:
    calls: list[str] = []
    graph = calling_parent(asking_child(calls), checkpointer, calls)
    async with Runtime(testing=True) as rt:
        waiter = EventWaiter()
        rt.bus.add_sink(waiter)
        handle = await rt.start_graph(graph, {"log": []}, thread_id="t")
        paused = await waiter.event("graph.interrupt", handle.run_id, node="ask")
        assert paused.data["ns"].startswith("caller:t-")
        approve = SteeringCommand(
            target=SteeringTarget.graph_task(handle.run_id, paused.task_id),
            actor=SteeringActor.test(),
            kind=SteeringKind.APPROVE,
            payload={"value": "approved"},
        )
        assert (await rt.submit(approve)).status == "accepted"
        result = await handle.result()
    assert result.status.value == "completed"
    log = result.output["log"]
    assert log[:3] == ["a", "from:a", "prepare"] and log[4] == "b"
    assert log[3].startswith("ask:{") and "'approved': True" in log[3]  # the approval's answer
    assert calls == ["caller", "prepare", "ask", "caller", "ask"]


# -- docs/graph.md ----------------------------------------------------------------------------

DOC = Path(__file__).parents[2] / "docs" / "graph.md"


def test_the_docs_example_prints_what_the_page_shows(
    tmp_path: Path, run_script: Callable[..., CompletedProcess[str]]
) -> None:
    text = DOC.read_text()
    start = text.index("## Calling a sub-graph from a node\n")
    body = text[start : text.index("\n## ", start + 1)]
    pattern = r"```python\n((?:(?!```).)*)```\n\nprints\n\n```\n(.*?)```"
    [(program, shown)] = re.findall(pattern, body, flags=re.S)
    done = run_script(program, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == shown.splitlines()
    # what the section claims: the call paused the caller, its state shows under the task,
    # and the resume continued inside the sub-graph
    assert done.stdout.splitlines()[-1] == "completed ['checked', 'signed by ana', 'published']"


@pytest.mark.parametrize("kind", ["node", "called"])
async def test_doubly_nested_graph_interrupts(checkpointer: Checkpointer, kind: str) -> None:
    # LangGraph: test_doubly_nested_graph_interrupts (a breakpoint in a grandchild graph),
    # with the grandchild a sub-graph node or called from the child's node
    class State(TypedDict):
        my_key: str

    async def grandchild_1(state: Any) -> dict[str, Any]:
        return {"my_key": state["my_key"] + " here"}

    async def grandchild_2(state: Any) -> dict[str, Any]:
        return {"my_key": state["my_key"] + " and there"}

    grandchild = StateGraph(State).add_node("grandchild_1", grandchild_1)
    grandchild.add_node("grandchild_2", grandchild_2).add_edge(START, "grandchild_1")
    grandchild.add_edge("grandchild_1", "grandchild_2").add_edge("grandchild_2", END)
    stopping = grandchild.compile(interrupt_before=["grandchild_2"])

    async def call_grandchild(state: Any) -> dict[str, Any]:
        return (await stopping.run(state)).state

    child = StateGraph(State)
    child.add_node("child_1", stopping if kind == "node" else call_grandchild)
    child = child.add_edge(START, "child_1").add_edge("child_1", END).compile()

    async def parent_1(state: Any) -> dict[str, Any]:
        return {"my_key": "hi " + state["my_key"]}

    async def parent_2(state: Any) -> dict[str, Any]:
        return {"my_key": state["my_key"] + " and back again"}

    graph = StateGraph(State).add_node("parent_1", parent_1).add_node("child", child)
    graph.add_node("parent_2", parent_2).add_edge(START, "parent_1")
    graph.add_edge("parent_1", "child").add_edge("child", "parent_2").add_edge("parent_2", END)
    app = graph.compile(checkpointer=checkpointer)

    assert (await app.run({"my_key": "my value"}, thread_id="1")).state == {"my_key": "hi my value"}
    assert (await app.run(None, thread_id="1")).state == {
        "my_key": "hi my value here and there and back again"
    }

    updates = await collect(app.stream({"my_key": "my value"}, thread_id="2", mode="updates"))
    assert updates == [{"parent_1": {"my_key": "hi my value"}}, {INTERRUPT_KEY: ()}]
    assert await collect(app.stream(None, thread_id="2", mode="updates")) == [
        {"child": {"my_key": "hi my value here and there"}},
        {"parent_2": {"my_key": "hi my value here and there and back again"}},
    ]

    values = await collect(app.stream({"my_key": "my value"}, thread_id="3"))
    assert values == [{"my_key": "my value"}, {"my_key": "hi my value"}]
    assert await collect(app.stream(None, thread_id="3")) == [
        {"my_key": "hi my value"},
        {"my_key": "hi my value here and there"},
        {"my_key": "hi my value here and there and back again"},
    ]


async def test_an_update_that_ends_a_second_call_drops_its_question(
    checkpointer: Checkpointer,
) -> None:
    # an update as the paused second call's asking node ends that call (namespace
    # "caller:<task id>|1"): its question is dropped, and run(None) finishes the caller
    first_calls: list[str] = []
    second_calls: list[str] = []
    first, second = asking_child(first_calls), asking_child(second_calls)

    async def caller(state: Any) -> dict[str, Any]:
        one = await first.run({"log": ["one"]})
        two = await second.run({"log": ["two"]})
        return {"log": one.state["log"] + two.state["log"]}

    graph = StateGraph(LogState).add_node("caller", caller).add_edge(START, "caller")
    graph = graph.compile(checkpointer=checkpointer)
    await graph.run({"log": []}, thread_id="t")
    [q2] = (await graph.run(Command(resume="x"), thread_id="t")).interrupts
    await graph.update_state("t", {"log": ["skipped"]}, ns=q2.ns, as_node="ask")
    assert (await graph.get_state("t")).interrupts == ()
    result = await graph.run(None, thread_id="t")
    assert result.status == "completed"
    assert result.state == {"log": ["one", "prepare", "ask:x", "two", "prepare", "skipped"]}
    assert second_calls == ["prepare", "ask"]


async def test_a_recursion_limit_reached_in_a_called_subgraph_names_its_caller(
    checkpointer: Checkpointer,
) -> None:
    # the error named the called graph by its compile() name, "graph" unless given one
    def spin(state: Any) -> dict[str, Any]:
        return {"log": ["spin"]}

    looping = StateGraph(LogState).add_node("spin", spin).add_edge(START, "spin")
    looping.add_conditional_edges("spin", lambda s: "spin" if s["log"] else END, ["spin", END])
    once = chain_of_one().compile()
    child = looping.compile()

    async def caller(state: Any) -> dict[str, Any]:
        await once.run({"log": ["x"]})  # the node's first call; the looping one is its second
        result = await child.run({"log": ["x"]})
        assert result.error is not None
        raise result.error

    graph = StateGraph(LogState).add_node("caller", caller).add_edge(START, "caller")
    result = await graph.compile(checkpointer=checkpointer).run({"log": []}, thread_id="t")
    assert result.status == "failed"
    message = str(result.error)
    assert "Recursion limit" in message and "'graph'" not in message
    assert re.search(r"the sub-graph of node 'caller' \(namespace 'caller:[^|']+\|1'\)", message)


def chain_of_one() -> Any:
    return StateGraph(LogState).add_node("one", logger("one")).add_edge(START, "one")
