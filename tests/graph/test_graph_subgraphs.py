"""Compiled graphs as nodes: own namespace, output through the parent's reducers,
interrupts surfacing with their namespace, targeted resume, Command.PARENT."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from graphkit import LogState, chain, logger

from tinyagents.errors import GraphRecursionError
from tinyagents.graph import END, START, Command, Send, StateGraph, interrupt
from tinyagents.store.checkpoint import Checkpointer


class ChildState(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def child_graph(calls: list[str], *, ask: bool = False) -> Any:
    def prepare(state: Any) -> dict[str, Any]:
        calls.append("prepare")
        return {"log": [f"prepare:{state['log'][0]}"]}

    def review(state: Any) -> dict[str, Any]:
        calls.append("review")
        verdict = interrupt({"review": len(state["log"])}) if ask else "auto"
        return {"log": [f"review:{verdict}"]}

    graph = StateGraph(ChildState).add_node("prepare", prepare).add_node("review", review)
    graph.add_edge(START, "prepare").add_edge("prepare", "review").add_edge("review", END)
    return graph.compile()


def parent_graph(child: Any, cp: Checkpointer | None) -> Any:
    graph = StateGraph(LogState).add_node("a", logger("a")).add_node("sub", child)
    graph.add_node("b", logger("b"))
    graph.add_edge(START, "a").add_edge("a", "sub").add_edge("sub", "b").add_edge("b", END)
    return graph.compile(checkpointer=cp)


async def test_subgraph_output_goes_through_the_parent_reducers() -> None:
    calls: list[str] = []
    result = await parent_graph(child_graph(calls), None).run({"x": 1})
    assert result.status == "completed"
    # the child saw ["a"] and appended two items; the parent appends just those two
    assert result.state == {"x": 1, "log": ["a", "prepare:a", "review:auto", "b"]}


async def test_subgraph_interrupt_surfaces_with_namespace_and_resumes_the_child(
    checkpointer: Checkpointer,
) -> None:
    calls: list[str] = []
    graph = parent_graph(child_graph(calls, ask=True), checkpointer)
    result = await graph.run({}, thread_id="t")
    assert result.status == "interrupted"
    [pending] = result.interrupts
    assert pending.node == "review" and pending.value == {"review": 2}
    assert pending.ns.startswith("sub:t-")
    # the child keeps its own checkpoints under that namespace
    child_head = await checkpointer.latest("t", pending.ns)
    assert child_head is not None and [p["node"] for p in child_head.frontier] == ["review"]

    result = await graph.run(Command(resume={pending.id: "ok"}), thread_id="t")
    assert result.status == "completed"
    assert result.state["log"] == ["a", "prepare:a", "review:ok", "b"]
    assert calls == ["prepare", "review", "review"]  # prepare did not run again


async def test_resume_reaches_exactly_one_of_two_parallel_children(
    checkpointer: Checkpointer,
) -> None:
    calls: list[str] = []
    graph = StateGraph(LogState).add_node("fan", logger("fan"))
    graph.add_node("sub", child_graph(calls, ask=True)).add_edge(START, "fan")
    graph.add_conditional_edges(
        "fan", lambda s: [Send("sub", {"log": [f"job{i}"]}) for i in (1, 2)]
    )
    compiled = graph.add_edge("sub", END).compile(checkpointer=checkpointer)

    result = await compiled.run({}, thread_id="t")
    assert len(result.interrupts) == 2
    first, second = result.interrupts
    assert first.ns != second.ns and first.id != second.id

    result = await compiled.run(Command(resume={first.id: "yes"}), thread_id="t")
    assert [i.id for i in result.interrupts] == [second.id]
    assert calls.count("review") == 3  # only the resumed child ran again

    result = await compiled.run(Command(resume={second.id: "no"}), thread_id="t")
    assert result.status == "completed"
    # each child's output is what it added to its Send argument, in task order
    assert result.state["log"] == ["fan", "prepare:job1", "review:yes", "prepare:job2", "review:no"]


async def test_command_parent_hands_control_to_the_parent_graph() -> None:
    def escalate(state: Any) -> Command:
        return Command(graph=Command.PARENT, goto="rescue", update={"log": ["escalated"]})

    child = StateGraph(ChildState).add_node("escalate", escalate)
    child = child.add_edge(START, "escalate").add_edge("escalate", END).compile()
    graph = StateGraph(LogState).add_node("sub", child, destinations=["rescue"])
    graph.add_node("next", logger("next")).add_node("rescue", logger("rescue"))
    graph.add_edge(START, "sub").add_edge("sub", "next").add_edge("next", END)
    graph.add_edge("rescue", END)
    result = await graph.compile().run({})
    # the parent applies the update and adds the goto to sub's own edges
    assert result.state["log"] == ["escalated", "next", "rescue"]


async def test_nested_subgraphs_namespace_each_level(checkpointer: Checkpointer) -> None:
    calls: list[str] = []
    inner = child_graph(calls, ask=True)
    middle = StateGraph(ChildState).add_node("inner", inner)
    middle = middle.add_edge(START, "inner").add_edge("inner", END).compile()
    outer = StateGraph(LogState).add_node("middle", middle)
    compiled = (
        outer.add_edge(START, "middle").add_edge("middle", END).compile(checkpointer=checkpointer)
    )
    result = await compiled.run({"log": ["seed"]}, thread_id="t")
    [pending] = result.interrupts
    outer_part, inner_part = pending.ns.split("|")
    assert outer_part.startswith("middle:t-") and inner_part.startswith("inner:t-")
    result = await compiled.run(Command(resume="fine"), thread_id="t")
    assert result.state["log"] == ["seed", "prepare:seed", "review:fine"]


async def test_a_finished_child_is_not_run_again_when_the_parent_step_is_retried(
    checkpointer: Checkpointer,
) -> None:
    calls: list[str] = []
    boom = {"armed": True}

    def fragile(state: Any) -> dict[str, Any]:
        if boom["armed"]:
            raise RuntimeError("crash after the child finished")
        return {"log": ["fragile"]}

    graph = StateGraph(LogState).add_node("sub", child_graph(calls))
    graph.add_node("fragile", fragile)
    for name in ("sub", "fragile"):
        graph.add_edge(START, name).add_edge(name, END)
    compiled = graph.compile(checkpointer=checkpointer)
    assert (await compiled.run({"log": ["seed"]}, thread_id="t")).status == "failed"
    boom["armed"] = False
    result = await compiled.run(None, thread_id="t")
    assert result.status == "completed"
    assert calls == ["prepare", "review"]
    # a step's writes go in by node name, as LangGraph: fragile before sub
    assert result.state["log"] == ["seed", "fragile", "prepare:seed", "review:auto"]


async def test_chain_subgraph_in_a_chain() -> None:
    inner = chain("x1", "x2", state=ChildState).compile()
    graph = StateGraph(LogState).add_node("inner", inner).add_edge(START, "inner")
    result = await graph.add_edge("inner", END).compile().run({"log": ["seed"]})
    assert result.state["log"] == ["seed", "x1", "x2"]


async def test_command_parent_after_an_interrupt_with_a_checkpointer(
    checkpointer: Checkpointer,
) -> None:
    def escalate(state: Any) -> Any:
        if interrupt("escalate?") == "yes":
            return Command(graph=Command.PARENT, goto="rescue", update={"log": ["escalated"]})
        return {"log": ["handled"]}

    child = StateGraph(ChildState).add_node("escalate", escalate).add_edge(START, "escalate")
    graph = StateGraph(LogState).add_node(
        "sub", child.add_edge("escalate", END).compile(), destinations=["rescue"]
    )
    graph.add_node("next", logger("next")).add_node("rescue", logger("rescue"))
    graph.add_edge(START, "sub").add_edge("sub", "next").add_edge("next", END)
    compiled = graph.add_edge("rescue", END).compile(checkpointer=checkpointer)
    paused = await compiled.run({}, thread_id="t")
    assert [i.ns.split(":")[0] for i in paused.interrupts] == ["sub"]
    result = await compiled.run(Command(resume="yes"), thread_id="t")
    assert result.status == "completed"
    assert result.state["log"] == ["escalated", "next", "rescue"]
    history = [h.next for h in await compiled.history("t")]
    assert history == [(), ("next", "rescue"), ("sub",), ("__start__",)]


async def test_update_state_between_a_subgraph_interrupt_and_its_resume(
    checkpointer: Checkpointer,
) -> None:
    calls: list[str] = []
    graph = parent_graph(child_graph(calls, ask=True), checkpointer)
    paused = await graph.run({}, thread_id="t")
    assert paused.status == "interrupted"
    # an edit of the append channel the waiting sub-graph appends to: through the reducer
    await graph.update_state("t", {"log": ["edited"]})
    assert (await graph.get_state("t")).values["log"] == ["a", "edited"]
    result = await graph.run(Command(resume="ok"), thread_id="t")
    assert result.status == "completed", result.error
    # the sub-graph's output is what it appended to what it started from
    assert result.state["log"] == ["a", "edited", "prepare:a", "review:ok", "b"]
    assert calls == ["prepare", "review", "review"]
    assert (await graph.get_state("t")).values == result.state


async def test_nested_graph_interrupts_parallel(checkpointer: Checkpointer) -> None:
    # LangGraph: test_nested_graph_interrupts_parallel (a breakpoint inside a sub-graph node
    # that runs beside another node); the values are LangGraph's
    class InnerState(TypedDict, total=False):
        my_key: Annotated[str, operator.add]
        my_other_key: str

    async def inner_1(state: Any) -> dict[str, Any]:
        return {"my_key": "got here", "my_other_key": state["my_key"]}

    async def inner_2(state: Any) -> dict[str, Any]:
        return {"my_key": " and there", "my_other_key": state["my_key"]}

    inner = StateGraph(InnerState).add_node("inner_1", inner_1).add_node("inner_2", inner_2)
    inner.add_edge(START, "inner_1").add_edge("inner_1", "inner_2").add_edge("inner_2", END)

    class State(TypedDict):
        my_key: Annotated[str, operator.add]

    async def outer_1(state: Any) -> dict[str, Any]:
        return {"my_key": " and parallel"}

    async def outer_2(state: Any) -> dict[str, Any]:
        return {"my_key": " and back again"}

    graph = StateGraph(State).add_node("inner", inner.compile(interrupt_before=["inner_2"]))
    graph.add_node("outer_1", outer_1).add_node("outer_2", outer_2)
    graph.add_edge(START, "inner").add_edge(START, "outer_1")
    graph.add_edge(["inner", "outer_1"], "outer_2").add_edge("outer_2", END)
    app = graph.compile(checkpointer=checkpointer)

    first = await app.run({"my_key": ""}, thread_id="1")
    assert first.status == "interrupted" and first.state == {"my_key": " and parallel"}
    second = await app.run(None, thread_id="1")
    assert second.state == {"my_key": "got here and there and parallel and back again"}

    # interrupts before the parallel node
    app = graph.compile(checkpointer=checkpointer, interrupt_before=["outer_1"])
    assert (await app.run({"my_key": ""}, thread_id="4")).state == {"my_key": ""}
    assert (await app.run(None, thread_id="4")).state == {"my_key": " and parallel"}
    last = await app.run(None, thread_id="4")
    assert last.state == {"my_key": "got here and there and parallel and back again"}


async def test_a_recursion_limit_reached_in_a_sub_graph_names_its_node_and_namespace(
    checkpointer: Checkpointer,
) -> None:
    # the error named the sub-graph by its compile() name, "graph" unless given, which did
    # not say which of the parent's nodes (or which namespace of the thread) looped
    def spin(state: Any) -> dict[str, Any]:
        return {"log": ["spin"]}

    looping = StateGraph(ChildState).add_node("spin", spin).add_edge(START, "spin")
    looping.add_conditional_edges("spin", lambda s: "spin" if s["log"] else END, ["spin", END])
    parent = StateGraph(LogState).add_node("looper", looping.compile()).add_edge(START, "looper")
    result = await parent.compile(checkpointer=checkpointer).run({"log": []}, thread_id="t")
    assert result.status == "failed"
    assert isinstance(result.error, GraphRecursionError)
    message = str(result.error)
    assert "'graph'" not in message
    assert "the sub-graph of node 'looper'" in message
    assert "namespace 'looper:" in message
