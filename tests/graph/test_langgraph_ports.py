"""Ports of LangGraph's own tests (``libs/langgraph/tests/test_pregel_async.py``,
``test_state.py``, ``test_interruption.py``): the same program runs on LangGraph and on
``tinyagents.graph``, and ours must give what LangGraph gives.

Each program is written once, as a function of a namespace ``g`` that holds either library's
``StateGraph``, ``START``, ``END``, ``Command``, ``Send`` and ``interrupt`` (the builders
share their API), so the two runs are of the very same graph. LangGraph runs on its
``InMemorySaver``; ours on every checkpointer backend (the ``checkpointer`` fixture).
Where our API differs by design (``run`` returns a ``GraphResult`` instead of raising; ids
are our own), a comment says so and the test compares what the two have in common.
"""

from __future__ import annotations

import operator
from types import SimpleNamespace
from typing import Annotated, Any, TypedDict

import pytest
from graphkit import logger
from langgraph_kit import (
    OURS,
    THEIRS,
    Log,
    abc_graph,
    cfg,
    lg_errors,
    lg_memory,
    pair,
    shape,
    values,
)

from tinyagents.errors import (
    GraphError,
    GraphRecursionError,
    InvalidUpdateError,
    UnknownTargetError,
)
from tinyagents.graph import Command, Send, add_messages
from tinyagents.store.checkpoint import Checkpointer


def sorted_add(x: list[str], y: list[str]) -> list[str]:
    return sorted(x + y)


# -- reducers and channels -------------------------------------------------------------------


class Docs(TypedDict, total=False):
    query: str
    answer: str
    docs: Annotated[list[str], sorted_add]


def waiting_edge_graph(g: Any) -> Any:
    """LangGraph: test_in_one_fan_out_state_graph_waiting_edge_via_branch."""

    def rewrite_query(data: Any) -> dict[str, Any]:
        return {"query": f"query: {data['query']}"}

    def analyzer_one(data: Any) -> dict[str, Any]:
        return {"query": f"analyzed: {data['query']}"}

    def retriever_one(data: Any) -> dict[str, Any]:
        return {"docs": ["doc1", "doc2"]}

    def retriever_two(data: Any) -> dict[str, Any]:
        return {"docs": ["doc3", "doc4"]}

    def qa(data: Any) -> dict[str, Any]:
        return {"answer": ",".join(data["docs"])}

    def rewrite_query_then(data: Any) -> str:
        return "retriever_two"

    graph = g.StateGraph(Docs)
    graph.add_node("rewrite_query", rewrite_query).add_node("analyzer_one", analyzer_one)
    graph.add_node("retriever_one", retriever_one).add_node("retriever_two", retriever_two)
    graph.add_node("qa", qa)
    graph.add_edge(g.START, "rewrite_query").add_edge("rewrite_query", "analyzer_one")
    graph.add_edge("analyzer_one", "retriever_one")
    graph.add_conditional_edges("rewrite_query", rewrite_query_then)
    graph.add_edge(["retriever_one", "retriever_two"], "qa").add_edge("qa", g.END)
    return graph


async def test_waiting_edge_joins_a_branch_and_a_chain(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(waiting_edge_graph, checkpointer)
    expected = {
        "query": "analyzed: query: what is weather in sf",
        "docs": ["doc1", "doc2", "doc3", "doc4"],
        "answer": "doc1,doc2,doc3,doc4",
    }
    assert await theirs.ainvoke({"query": "what is weather in sf"}, cfg()) == expected
    result = await ours.run({"query": "what is weather in sf"}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == expected
    # the per-step updates, in LangGraph's shape and order
    theirs_updates = [
        u async for u in theirs.astream({"query": "q"}, cfg("2"), stream_mode="updates")
    ]
    ours_updates = [u async for u in ours.stream({"query": "q"}, thread_id="2", mode="updates")]
    assert ours_updates == theirs_updates


class Counter(TypedDict, total=False):
    total: Annotated[int, operator.add]
    seen: Annotated[list[str], operator.add]


def counter_graph(g: Any) -> Any:
    """A counter channel (``Annotated[int, operator.add]``) written by parallel nodes, made
    with the loop-closure idiom ``lambda s, n=n: ...`` (a parameter with a default is the
    function's own: the node gets the state alone, as in LangGraph)."""
    graph = g.StateGraph(Counter)
    for name, n in (("one", 1), ("two", 2), ("three", 3)):
        graph.add_node(name, lambda s, n=n, name=name: {"total": n, "seen": [name]})
        graph.add_edge(g.START, name).add_edge(name, g.END)
    return graph


async def test_reducer_folds_parallel_writes(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(counter_graph, checkpointer)
    expected = await theirs.ainvoke({"total": 10}, cfg())
    assert expected["total"] == 16
    result = await ours.run({"total": 10}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state["total"] == expected["total"]
    assert sorted(result.state["seen"]) == sorted(expected["seen"])
    # a second input on the same thread carries the values on, through the reducers
    expected = await theirs.ainvoke({"total": 1}, cfg())
    assert expected["total"] == 23
    assert (await ours.run({"total": 1}, thread_id="1")).state["total"] == expected["total"]


async def test_parallel_writes_apply_in_langgraphs_order(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(counter_graph, checkpointer)
    expected = await theirs.ainvoke({"total": 10}, cfg())
    assert expected["seen"] == ["one", "three", "two"]
    assert (await ours.run({"total": 10}, thread_id="1")).state == expected


class Overwritten(TypedDict, total=False):
    value: str
    log: Annotated[list[str], operator.add]


def conflicting_graph(g: Any) -> Any:
    graph = g.StateGraph(Overwritten)
    graph.add_node("a", lambda s: {"value": "a", "log": ["a"]})
    graph.add_node("b", lambda s: {"value": "b", "log": ["b"]})
    graph.add_edge(g.START, "a").add_edge(g.START, "b").add_edge("a", g.END).add_edge("b", g.END)
    return graph


async def test_two_writes_to_a_plain_channel_in_one_step_are_an_error(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_invalid_update / "Can receive only one value per step"
    ours, theirs = pair(conflicting_graph, checkpointer)
    with pytest.raises(lg_errors.InvalidUpdateError):
        await theirs.ainvoke({"value": "start"}, cfg())
    # ours reports a failed node step as status="failed" instead of raising (docs/graph.md,
    # "Running"); the error is the same type
    result = await ours.run({"value": "start"}, thread_id="1")
    assert result.status == "failed"
    assert isinstance(result.error, InvalidUpdateError)
    assert "value" in str(result.error)
    # reading the thread applies the finished tasks' writes (docs/graph.md, "Running"), so
    # it raises the same error, as LangGraph's aget_state does
    with pytest.raises(lg_errors.InvalidUpdateError):
        await theirs.aget_state(cfg())
    with pytest.raises(InvalidUpdateError):
        await ours.get_state("1")


class Chat(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages]


class LgChat(TypedDict, total=False):
    messages: Annotated[list[Any], pytest.importorskip("langgraph.graph.message").add_messages]


async def test_add_messages_replaces_by_id_and_appends_new(checkpointer: Checkpointer) -> None:
    # LangGraph: test_messages_state (a message with a known id replaces the old one)
    def build(g: Any) -> Any:
        graph = g.StateGraph(Chat if g is OURS else LgChat)
        graph.add_node(
            "edit",
            lambda s: {
                "messages": [
                    {"id": "1", "role": "user", "content": "hi (edited)"},
                    {"id": "3", "role": "assistant", "content": "new"},
                ]
            },
        )
        return graph.add_edge(g.START, "edit").add_edge("edit", g.END)

    ours, theirs = pair(build, checkpointer)
    start = {
        "messages": [
            {"id": "1", "role": "user", "content": "hi"},
            {"id": "2", "role": "assistant", "content": "hello"},
        ]
    }
    theirs_out = await theirs.ainvoke(start, cfg())
    theirs_view = [(m.id, m.content) for m in theirs_out["messages"]]
    assert theirs_view == [("1", "hi (edited)"), ("2", "hello"), ("3", "new")]
    # ours keeps messages as given (dicts stay dicts; LangGraph converts them to its message
    # classes): compare ids and contents
    result = await ours.run(start, thread_id="1")
    assert [(m["id"], m["content"]) for m in result.state["messages"]] == theirs_view


# -- conditional edges, Send, Command ---------------------------------------------------------


class Loop(TypedDict, total=False):
    steps: Annotated[list[str], operator.add]
    n: int


def agent_tools_graph(g: Any, *, mapping: Any = "dict") -> Any:
    """LangGraph: test_conditional_graph (an agent/tools loop routed through a path map)."""

    def agent(state: Any) -> dict[str, Any]:
        return {"steps": ["agent"], "n": state.get("n", 0) + 1}

    def tools(state: Any) -> dict[str, Any]:
        return {"steps": ["tools"]}

    def should_continue(state: Any) -> str:
        return "exit" if state["n"] >= 3 else "continue"

    def route_by_name(state: Any) -> str:
        return g.END if state["n"] >= 3 else "tools"

    graph = g.StateGraph(Loop).add_node("agent", agent).add_node("tools", tools)
    graph.add_edge(g.START, "agent").add_edge("tools", "agent")
    if mapping == "dict":
        graph.add_conditional_edges("agent", should_continue, {"continue": "tools", "exit": g.END})
    else:  # a list of the nodes the router may name
        graph.add_conditional_edges("agent", route_by_name, ["tools", g.END])
    return graph


@pytest.mark.parametrize("mapping", ["dict", "list"])
async def test_conditional_edges_with_a_path_map(checkpointer: Checkpointer, mapping: str) -> None:
    ours, theirs = pair(lambda g: agent_tools_graph(g, mapping=mapping), checkpointer)
    expected = await theirs.ainvoke({"steps": []}, cfg())
    assert expected == {"steps": ["agent", "tools", "agent", "tools", "agent"], "n": 3}
    result = await ours.run({"steps": []}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == expected


class Jokes(TypedDict, total=False):
    subjects: list[str]
    jokes: Annotated[list[str], operator.add]


def map_reduce_graph(g: Any) -> Any:
    """LangGraph: test_send_sequences / the map-reduce how-to (Send fan-out from a router)."""

    def continue_to_jokes(state: Any) -> list[Any]:
        return [g.Send("generate_joke", {"subject": s}) for s in state["subjects"]]

    def generate_joke(arg: Any) -> dict[str, Any]:
        return {"jokes": [f"Joke about {arg['subject']}"]}

    def summarize(state: Any) -> dict[str, Any]:
        return {"jokes": [f"{len(state['jokes'])} jokes"]}

    graph = g.StateGraph(Jokes).add_node("generate_joke", generate_joke)
    graph.add_node("summarize", summarize)
    graph.add_conditional_edges(g.START, continue_to_jokes)
    graph.add_edge("generate_joke", "summarize").add_edge("summarize", g.END)
    return graph


async def test_send_fans_out_one_task_per_send(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(map_reduce_graph, checkpointer)
    start = {"subjects": ["cats", "dogs", "cats"]}
    expected = await theirs.ainvoke(start, cfg())
    assert expected["jokes"] == [
        "Joke about cats",
        "Joke about dogs",
        "Joke about cats",
        "3 jokes",
    ]
    assert (await ours.run(start, thread_id="1")).state == expected
    theirs_updates = [u async for u in theirs.astream(start, cfg("2"), stream_mode="updates")]
    ours_updates = [u async for u in ours.stream(start, thread_id="2", mode="updates")]
    assert ours_updates == theirs_updates


class Goto(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def command_graph(g: Any) -> Any:
    """LangGraph: test_command / test_command_goto_with_send (Command(goto, update) from a
    node, a Send among the gotos)."""

    def router(state: Any) -> Any:
        return g.Command(
            update={"log": ["router"]},
            goto=["left", g.Send("right", {"log": ["sent"]})],
        )

    def left(state: Any) -> dict[str, Any]:
        return {"log": ["left"]}

    def right(arg: Any) -> dict[str, Any]:
        return {"log": [f"right got {arg['log']}"]}

    graph = g.StateGraph(Goto)
    graph.add_node("router", router, destinations=("left", "right"))
    graph.add_node("left", left).add_node("right", right)
    graph.add_edge(g.START, "router").add_edge("left", g.END).add_edge("right", g.END)
    return graph


async def test_command_goto_and_update_from_a_node(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(command_graph, checkpointer)
    expected = await theirs.ainvoke({"log": []}, cfg())
    assert expected == {"log": ["router", "left", "right got ['sent']"]}
    assert (await ours.run({"log": []}, thread_id="1")).state == expected


def parent_command_graph(g: Any) -> Any:
    """LangGraph: test_parent_command (a sub-graph node hands update/goto to its parent)."""

    def alice(state: Any) -> Any:
        return g.Command(graph=g.Command.PARENT, goto="bob", update={"log": ["alice handed over"]})

    sub = g.StateGraph(Goto).add_node("alice", alice).add_edge(g.START, "alice")
    sub = sub.add_edge("alice", g.END).compile()
    graph = g.StateGraph(Goto).add_node("team", sub, destinations=("bob",))
    graph.add_node("bob", lambda s: {"log": ["bob"]})
    graph.add_edge(g.START, "team").add_edge("bob", g.END)
    return graph


async def test_command_to_the_parent_graph(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(parent_command_graph, checkpointer)
    expected = await theirs.ainvoke({"log": ["start"]}, cfg())
    assert expected == {"log": ["start", "alice handed over", "bob"]}
    assert (await ours.run({"log": ["start"]}, thread_id="1")).state == expected
    theirs_history = [(s.next, s.values) async for s in theirs.aget_state_history(cfg())]
    ours_history = [
        (h.next, (await ours.get_state("1", h.checkpoint_id)).values)
        for h in await ours.history("1")
    ]
    assert ours_history == theirs_history


def endless_graph(g: Any) -> Any:
    graph = g.StateGraph(Goto).add_node("a", lambda s: {"log": ["a"]})
    graph.add_node("b", lambda s: {"log": ["b"]})
    graph.add_edge(g.START, "a").add_edge("a", "b")
    graph.add_conditional_edges("b", lambda s: "a" if len(s["log"]) < 1000 else g.END)
    return graph


async def test_recursion_limit_stops_a_loop(checkpointer: Checkpointer) -> None:
    # LangGraph: test_recursion_limit (GraphRecursionError after recursion_limit steps)
    ours, theirs = pair(endless_graph, checkpointer)
    with pytest.raises(lg_errors.GraphRecursionError):
        await theirs.ainvoke({"log": []}, {**cfg(), "recursion_limit": 6})
    theirs_state = await theirs.aget_state(cfg())
    # ours: status="failed" with the error (docs/graph.md, "Running"), not a raise
    result = await ours.run({"log": []}, thread_id="1", recursion_limit=6)
    assert result.status == "failed"
    assert isinstance(result.error, GraphRecursionError)
    ours_state = await ours.get_state("1")
    # the same number of steps ran, and the same node is next
    assert ours_state.values == theirs_state.values == {"log": ["a", "b"] * 3}
    assert ours_state.next == theirs_state.next == ("a",)


# -- interrupts and resume --------------------------------------------------------------------


class Asked(TypedDict, total=False):
    answers: Annotated[list[str], operator.add]


def two_interrupts_graph(g: Any, calls: list[str]) -> Any:
    """LangGraph: test_multiple_interrupt_state (two interrupts in one node, answered in
    turn; the node runs again from its top each time)."""

    def ask(state: Any) -> dict[str, Any]:
        calls.append("ask")
        first = g.interrupt("first?")
        second = g.interrupt("second?")
        return {"answers": [first, second]}

    graph = g.StateGraph(Asked).add_node("ask", ask).add_node("done", lambda s: {})
    return graph.add_edge(g.START, "ask").add_edge("ask", "done").add_edge("done", g.END)


async def test_two_interrupts_in_one_node(checkpointer: Checkpointer) -> None:
    ours_calls: list[str] = []
    theirs_calls: list[str] = []
    ours = two_interrupts_graph(OURS, ours_calls).compile(checkpointer=checkpointer)
    theirs = two_interrupts_graph(THEIRS, theirs_calls).compile(
        checkpointer=lg_memory.InMemorySaver()
    )
    out = await theirs.ainvoke({"answers": []}, cfg())
    result = await ours.run({"answers": []}, thread_id="1")
    assert [i.value for i in out["__interrupt__"]] == [i.value for i in result.interrupts]
    assert [i.value for i in result.interrupts] == ["first?"]
    out = await theirs.ainvoke(THEIRS.Command(resume="a"), cfg())
    result = await ours.run(Command(resume="a"), thread_id="1")
    assert [i.value for i in out["__interrupt__"]] == [i.value for i in result.interrupts]
    assert [i.value for i in result.interrupts] == ["second?"]
    theirs_snapshot = await theirs.aget_state(cfg())
    ours_snapshot = await ours.get_state("1")
    assert ours_snapshot.next == theirs_snapshot.next == ("ask",)
    out = await theirs.ainvoke(THEIRS.Command(resume="b"), cfg())
    result = await ours.run(Command(resume="b"), thread_id="1")
    assert result.status == "completed"
    assert result.state == values(out) == {"answers": ["a", "b"]}
    assert ours_calls == theirs_calls == ["ask"] * 3


def parallel_interrupts_graph(g: Any) -> Any:
    """LangGraph: test_interrupt_multiple / test_multiple_interrupts_with_send (parallel
    tasks each pause; one resume maps interrupt ids to answers)."""

    def fan_out(state: Any) -> list[Any]:
        return [g.Send("ask", {"who": who}) for who in ("ann", "bob")]

    def ask(arg: Any) -> dict[str, Any]:
        return {"answers": [f"{arg['who']}: {g.interrupt(arg['who'])}"]}

    graph = g.StateGraph(Asked).add_node("ask", ask).add_conditional_edges(g.START, fan_out)
    return graph.add_edge("ask", g.END)


async def test_parallel_interrupts_resumed_together_by_id(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(parallel_interrupts_graph, checkpointer)
    out = await theirs.ainvoke({"answers": []}, cfg())
    result = await ours.run({"answers": []}, thread_id="1")
    assert sorted(i.value for i in out["__interrupt__"]) == ["ann", "bob"]
    assert sorted(i.value for i in result.interrupts) == ["ann", "bob"]
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert [t.name for t in ours_state.tasks] == [t.name for t in theirs_state.tasks]
    assert [i.value for t in ours_state.tasks for i in t.interrupts] == [
        i.value for t in theirs_state.tasks for i in t.interrupts
    ]
    theirs_answers = {i.id: f"ok {i.value}" for i in out["__interrupt__"]}
    ours_answers = {i.id: f"ok {i.value}" for i in result.interrupts}
    out = await theirs.ainvoke(THEIRS.Command(resume=theirs_answers), cfg())
    result = await ours.run(Command(resume=ours_answers), thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == out == {"answers": ["ann: ok ann", "bob: ok bob"]}


async def test_parallel_interrupts_answered_one_at_a_time(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(parallel_interrupts_graph, checkpointer)
    out = await theirs.ainvoke({"answers": []}, cfg())
    result = await ours.run({"answers": []}, thread_id="1")
    [theirs_ann] = [i for i in out["__interrupt__"] if i.value == "ann"]
    [ours_ann] = [i for i in result.interrupts if i.value == "ann"]
    out = await theirs.ainvoke(THEIRS.Command(resume={theirs_ann.id: "yes"}), cfg())
    result = await ours.run(Command(resume={ours_ann.id: "yes"}), thread_id="1")
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    assert [i.value for i in result.interrupts] == ["bob"]
    # ann's finished write is visible while bob still waits
    assert result.state == values(out) == {"answers": ["ann: yes"]}
    out = await theirs.ainvoke(THEIRS.Command(resume="no"), cfg())
    result = await ours.run(Command(resume="no"), thread_id="1")
    assert result.state == out == {"answers": ["ann: yes", "bob: no"]}


async def test_stream_updates_shows_the_interrupt(checkpointer: Checkpointer) -> None:
    # LangGraph: test_interrupt_with_stream ... {"__interrupt__": (Interrupt(...),)}
    ours, theirs = pair(lambda g: two_interrupts_graph(g, []), checkpointer)
    theirs_items = [u async for u in theirs.astream({"answers": []}, cfg(), stream_mode="updates")]
    ours_items = [u async for u in ours.stream({"answers": []}, thread_id="1", mode="updates")]
    assert [list(u) for u in ours_items] == [list(u) for u in theirs_items] == [["__interrupt__"]]
    [theirs_i] = theirs_items[0]["__interrupt__"]
    [ours_i] = ours_items[0]["__interrupt__"]
    assert isinstance(ours_items[0]["__interrupt__"], tuple)
    assert ours_i.value == theirs_i.value == "first?"
    theirs_items = [
        u async for u in theirs.astream(THEIRS.Command(resume="a"), cfg(), stream_mode="updates")
    ]
    ours_items = [u async for u in ours.stream(Command(resume="a"), thread_id="1", mode="updates")]
    assert [i.value for i in ours_items[0]["__interrupt__"]] == ["second?"]
    assert [list(u) for u in ours_items] == [list(u) for u in theirs_items]


# -- breakpoints, update_state, get_state ------------------------------------------------------


async def test_interrupt_before_then_update_state_as_node(checkpointer: Checkpointer) -> None:
    # LangGraph: test_conditional_state_graph_with_interrupt_before / the "edit the tool call"
    # how-to: stop before tools, edit as the agent, run on
    ours, theirs = pair(agent_tools_graph, checkpointer, interrupt_before=["tools"])
    out = await theirs.ainvoke({"steps": []}, cfg())
    result = await ours.run({"steps": []}, thread_id="1")
    assert result.status == "interrupted" and result.interrupts == []
    assert result.state == values(out) == {"steps": ["agent"], "n": 1}
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert ours_state.next == theirs_state.next == ("tools",)
    assert [t.name for t in ours_state.tasks] == [t.name for t in theirs_state.tasks]

    # as the agent, finishing the loop: the router now says "exit"
    await theirs.aupdate_state(cfg(), {"steps": ["edited"], "n": 3}, as_node="agent")
    await ours.update_state("1", {"steps": ["edited"], "n": 3}, as_node="agent")
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert ours_state.values == theirs_state.values == {"steps": ["agent", "edited"], "n": 3}
    assert ours_state.next == theirs_state.next == ()

    # as the agent, keeping it going: tools is next again, and the breakpoint holds
    await theirs.aupdate_state(cfg(), {"n": 1}, as_node="agent")
    await ours.update_state("1", {"n": 1}, as_node="agent")
    assert (await ours.get_state("1")).next == (await theirs.aget_state(cfg())).next == ("tools",)
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == values(out)
    assert (await ours.get_state("1")).next == (await theirs.aget_state(cfg())).next


async def test_update_state_goes_through_the_reducers(checkpointer: Checkpointer) -> None:
    # LangGraph: test_state_graph_update_state (an update to an Annotated channel is reduced,
    # one to a plain channel replaces)
    ours, theirs = pair(agent_tools_graph, checkpointer)
    await theirs.ainvoke({"steps": []}, cfg())
    await ours.run({"steps": []}, thread_id="1")
    await theirs.aupdate_state(cfg(), {"steps": ["manual"], "n": 0})
    await ours.update_state("1", {"steps": ["manual"], "n": 0})
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert ours_state.values == theirs_state.values
    assert ours_state.values["steps"][-1] == "manual" and ours_state.values["n"] == 0
    # Without as_node the update counts as the output of the node that wrote last ("agent"),
    # whose router sends the run on to "tools" again (on both)
    assert ours_state.next == theirs_state.next == ("tools",)
    assert ours_state.step == theirs_state.metadata["step"]
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == values(out)


async def test_interrupt_after_stops_after_the_step(checkpointer: Checkpointer) -> None:
    # LangGraph: test_interrupt_after (test_interruption.py)
    ours, theirs = pair(agent_tools_graph, checkpointer, interrupt_after=["agent"])
    statuses = []
    for run_input in ({"steps": []}, None, None):
        out = await theirs.ainvoke(run_input, cfg())
        result = await ours.run(run_input, thread_id="1")
        assert result.state == values(out)
        ours_next = (await ours.get_state("1")).next
        assert ours_next == (await theirs.aget_state(cfg())).next
        statuses.append((result.status, ours_next))
    # the third agent step ends the loop: LangGraph stops there too, with nothing next; ours
    # calls a stop with nothing left to run "completed"
    assert statuses == [
        ("interrupted", ("tools",)),
        ("interrupted", ("tools",)),
        ("completed", ()),
    ]


# -- history, replay, fork ---------------------------------------------------------------------


async def test_history_is_newest_first_with_next_and_values(checkpointer: Checkpointer) -> None:
    # LangGraph: test_state_graph_history / aget_state_history ordering
    ours = abc_graph(OURS, []).compile(checkpointer=checkpointer)
    theirs = abc_graph(THEIRS, []).compile(checkpointer=lg_memory.InMemorySaver())
    await theirs.ainvoke({"log": ["in"]}, cfg())
    await ours.run({"log": ["in"]}, thread_id="1")
    theirs_history = [s async for s in theirs.aget_state_history(cfg())]
    ours_history = await ours.history("1")
    assert [h.next for h in ours_history] == [s.next for s in theirs_history]
    assert [("c",), ("b",), ("a",), ("__start__",)] == [h.next for h in ours_history][1:]
    assert [h.step for h in ours_history] == [s.metadata["step"] for s in theirs_history]
    ours_values = [(await ours.get_state("1", h.checkpoint_id)).values for h in ours_history]
    assert ours_values == [s.values for s in theirs_history]
    # the input is a checkpoint of its own (step -1, the state before it), as LangGraph's
    assert [h.source for h in ours_history] == ["loop", "loop", "loop", "loop", "input"]
    # parents link each checkpoint to the one before it
    assert [h.parent_id for h in ours_history[:-1]] == [h.checkpoint_id for h in ours_history[1:]]
    assert ours_history[-1].parent_id is None


async def test_history_matches_langgraph_exactly(checkpointer: Checkpointer) -> None:
    ours = abc_graph(OURS, []).compile(checkpointer=checkpointer)
    theirs = abc_graph(THEIRS, []).compile(checkpointer=lg_memory.InMemorySaver())
    await theirs.ainvoke({"log": ["in"]}, cfg())
    await ours.run({"log": ["in"]}, thread_id="1")
    theirs_history = [
        (s.metadata["source"], s.metadata["step"], s.next)
        async for s in theirs.aget_state_history(cfg())
    ]
    ours_history = [(h.source, h.step, h.next) for h in await ours.history("1")]
    assert ours_history == theirs_history


async def abc_ran_on_both(checkpointer: Checkpointer) -> SimpleNamespace:
    """The a → b → c graph run to its end on both libraries, with the checkpoint of each
    before ``b`` and the node-call logs emptied (for a replay or a fork from there)."""
    ours_calls: list[str] = []
    theirs_calls: list[str] = []
    ours = abc_graph(OURS, ours_calls).compile(checkpointer=checkpointer)
    theirs = abc_graph(THEIRS, theirs_calls).compile(checkpointer=lg_memory.InMemorySaver())
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    [theirs_before_b] = [s async for s in theirs.aget_state_history(cfg()) if s.next == ("b",)]
    [ours_before_b] = [h for h in await ours.history("1") if h.next == ("b",)]
    theirs_calls.clear()
    ours_calls.clear()
    return SimpleNamespace(
        ours=ours,
        theirs=theirs,
        ours_calls=ours_calls,
        theirs_calls=theirs_calls,
        ours_before_b=ours_before_b,
        theirs_before_b=theirs_before_b,
    )


async def test_the_input_checkpoint_shows_the_state_before_it(checkpointer: Checkpointer) -> None:
    # LangGraph: the input's own checkpoint (step -1) — its values, next and task
    ours = abc_graph(OURS, []).compile(checkpointer=checkpointer)
    theirs = abc_graph(THEIRS, []).compile(checkpointer=lg_memory.InMemorySaver())
    await theirs.ainvoke({"log": ["in"]}, cfg())
    await ours.run({"log": ["in"]}, thread_id="1")
    await theirs.ainvoke({"log": ["again"]}, cfg())
    await ours.run({"log": ["again"]}, thread_id="1")
    theirs_inputs = [
        s async for s in theirs.aget_state_history(cfg()) if s.metadata["source"] == "input"
    ]
    ours_inputs = [h for h in await ours.history("1") if h.source == "input"]
    assert [h.step for h in ours_inputs] == [s.metadata["step"] for s in theirs_inputs] == [4, -1]
    for ours_input, theirs_input in zip(ours_inputs, theirs_inputs, strict=True):
        state = await ours.get_state("1", ours_input.checkpoint_id)
        assert state.values == theirs_input.values
        assert state.next == theirs_input.next == ("__start__",)
        assert [t.name for t in state.tasks] == [t.name for t in theirs_input.tasks]
    assert (await ours.get_state("1", ours_inputs[0].checkpoint_id)).values == {
        "log": ["in", "a", "b", "c"]
    }


async def test_replay_from_the_input_checkpoint_runs_the_whole_run_again(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: invoke(None, the input checkpoint's config) applies that input again
    ran = await abc_ran_on_both(checkpointer)
    theirs_input = [s async for s in ran.theirs.aget_state_history(cfg())][-1]
    ours_input = (await ran.ours.history("1"))[-1]
    assert (ours_input.source, ours_input.step) == (theirs_input.metadata["source"], -1)
    out = await ran.theirs.ainvoke(None, theirs_input.config)
    result = await ran.ours.run(None, thread_id="1", checkpoint_id=ours_input.checkpoint_id)
    assert result.state == out == {"log": ["a", "b", "c"]}
    assert ran.ours_calls == ran.theirs_calls == ["a", "b", "c"]


async def test_replay_from_a_checkpoint_runs_the_rest_again(checkpointer: Checkpointer) -> None:
    # LangGraph: test_checkpoint_replay / "time travel": invoke(None, checkpoint_id=...)
    ran = await abc_ran_on_both(checkpointer)
    ours, theirs, ours_calls, theirs_calls = ran.ours, ran.theirs, ran.ours_calls, ran.theirs_calls
    ours_before_b, theirs_before_b = ran.ours_before_b, ran.theirs_before_b

    out = await theirs.ainvoke(None, theirs_before_b.config)
    result = await ours.run(None, thread_id="1", checkpoint_id=ours_before_b.checkpoint_id)
    assert result.state == out == {"log": ["a", "b", "c"]}
    assert ours_calls == theirs_calls == ["b", "c"]
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values


async def test_a_replay_numbers_its_steps_as_langgraph_does(checkpointer: Checkpointer) -> None:
    # LangGraph saves a replay's start as a "fork" checkpoint one step past the checkpoint it
    # replays, and numbers the steps that run again from there; ours saved its "rewind" at
    # the replayed checkpoint's own step, so every step after a replay was one lower.
    ran = await abc_ran_on_both(checkpointer)
    await ran.theirs.ainvoke(None, ran.theirs_before_b.config)
    await ran.ours.run(None, thread_id="1", checkpoint_id=ran.ours_before_b.checkpoint_id)
    theirs = [s.metadata["step"] async for s in ran.theirs.aget_state_history(cfg())]
    ours = [h.step for h in await ran.ours.history("1")]
    assert ours == theirs == [4, 3, 2, 3, 2, 1, 0, -1]
    assert (await ran.ours.get_state("1")).metadata["step"] == 4
    # a later input goes on from there, as LangGraph's
    await ran.theirs.ainvoke({"log": ["again"]}, cfg())
    await ran.ours.run({"log": ["again"]}, thread_id="1")
    theirs = [s.metadata["step"] async for s in ran.theirs.aget_state_history(cfg())]
    assert [h.step for h in await ran.ours.history("1")] == theirs


async def test_a_replay_of_an_input_and_of_a_paused_head_number_their_steps_as_langgraph(
    checkpointer: Checkpointer,
) -> None:
    ran = await abc_ran_on_both(checkpointer)
    theirs_input = [s async for s in ran.theirs.aget_state_history(cfg())][-1]
    await ran.theirs.ainvoke(None, theirs_input.config)
    await ran.ours.run(
        None, thread_id="1", checkpoint_id=(await ran.ours.history("1"))[-1].checkpoint_id
    )
    theirs = [s.metadata["step"] async for s in ran.theirs.aget_state_history(cfg())]
    assert [h.step for h in await ran.ours.history("1")] == theirs

    def asks(g: Any) -> Any:
        def ask(state: Any) -> dict[str, Any]:
            return {"log": [g.interrupt("?")]}

        graph = g.StateGraph(Log).add_node("ask", ask).add_edge(g.START, "ask")
        return graph.add_edge("ask", g.END)

    ours, theirs_graph = pair(asks, checkpointer)
    await theirs_graph.ainvoke({"log": []}, cfg("2"))
    await ours.run({"log": []}, thread_id="2")
    head = await theirs_graph.aget_state(cfg("2"))
    await theirs_graph.ainvoke(None, head.config)
    await ours.run(None, thread_id="2", checkpoint_id=(await ours.history("2"))[0].checkpoint_id)
    theirs = [s.metadata["step"] async for s in theirs_graph.aget_state_history(cfg("2"))]
    assert [h.step for h in await ours.history("2")] == theirs == [1, 0, -1]


async def test_update_state_at_an_old_checkpoint_forks(checkpointer: Checkpointer) -> None:
    # LangGraph: test_checkpoint_fork / update_state(config with checkpoint_id) then
    # invoke(None, the new config)
    ran = await abc_ran_on_both(checkpointer)
    ours, theirs, ours_calls, theirs_calls = ran.ours, ran.theirs, ran.ours_calls, ran.theirs_calls
    ours_before_b, theirs_before_b = ran.ours_before_b, ran.theirs_before_b

    forked = await theirs.aupdate_state(theirs_before_b.config, {"log": ["edit"]})
    await ours.update_state("1", {"log": ["edit"]}, checkpoint_id=ours_before_b.checkpoint_id)
    theirs_fork_state = await theirs.aget_state(forked)
    ours_head = await ours.get_state("1")
    assert ours_head.values == theirs_fork_state.values == {"log": ["a", "edit"]}
    assert ours_head.next == theirs_fork_state.next == ("b",)
    out = await theirs.ainvoke(None, forked)
    result = await ours.run(None, thread_id="1")
    assert result.state == out == {"log": ["a", "edit", "b", "c"]}
    assert ours_calls == theirs_calls == ["b", "c"]


# -- sub-graphs --------------------------------------------------------------------------------


class Outer(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    topic: str


class Inner(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    private: str


def nested_graph(g: Any) -> Any:
    """LangGraph: test_nested_graph_interrupts / test_subgraph_checkpoint_true (a sub-graph
    node with a channel of its own, pausing on an interrupt)."""

    def inner_one(state: Any) -> dict[str, Any]:
        return {"log": ["inner_one"], "private": "secret"}

    def inner_two(state: Any) -> dict[str, Any]:
        answer = g.interrupt("inner?")
        return {"log": [f"inner_two {answer} {state['private']}"]}

    sub = g.StateGraph(Inner).add_node("inner_one", inner_one).add_node("inner_two", inner_two)
    sub.add_edge(g.START, "inner_one").add_edge("inner_one", "inner_two")
    sub = sub.add_edge("inner_two", g.END).compile()
    graph = g.StateGraph(Outer).add_node("outer_one", lambda s: {"log": ["outer_one"]})
    graph.add_node("inner", sub).add_node("outer_two", lambda s: {"log": ["outer_two"]})
    graph.add_edge(g.START, "outer_one").add_edge("outer_one", "inner")
    return graph.add_edge("inner", "outer_two").add_edge("outer_two", g.END)


async def test_subgraph_interrupt_and_state(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(nested_graph, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "interrupted"
    assert result.state == values(out) == {"log": ["outer_one"]}
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]

    theirs_state = await theirs.aget_state(cfg(), subgraphs=True)
    ours_state = await ours.get_state("1", subgraphs=True)
    assert ours_state.next == theirs_state.next == ("inner",)
    [theirs_task] = theirs_state.tasks
    [ours_task] = ours_state.tasks
    assert ours_task.name == theirs_task.name == "inner"
    assert ours_task.state is not None
    assert ours_task.state.values == theirs_task.state.values
    assert ours_task.state.values == {"log": ["outer_one", "inner_one"], "private": "secret"}
    assert ours_task.state.next == theirs_task.state.next == ("inner_two",)

    out = await theirs.ainvoke(THEIRS.Command(resume="ok"), cfg())
    result = await ours.run(Command(resume="ok"), thread_id="1")
    # A sub-graph's output: LangGraph's is its whole final state, which the parent's
    # operator.add appends again ("outer_one" twice); ours is what the sub-graph changed
    # (docs/graph.md, "Sub-graphs"), so the parent's log holds each item once.
    assert out == {
        "log": ["outer_one", "outer_one", "inner_one", "inner_two ok secret", "outer_two"]
    }
    assert result.state == {"log": ["outer_one", "inner_one", "inner_two ok secret", "outer_two"]}


@pytest.mark.parametrize("as_node", [None, "inner_two"])
async def test_update_state_of_a_paused_sub_graph(
    checkpointer: Checkpointer, as_node: str | None
) -> None:
    # LangGraph: update_state(<a sub-graph's StateSnapshot.config>, ...) changes the paused
    # sub-graph's state, through its reducers; the task that runs it continues from there.
    # Without as_node its paused task still asks; as_node="inner_two" counts the update as
    # that node's output, so nothing of the sub-graph is left to run. Ours: ns=<its .ns>
    ours, theirs = pair(nested_graph, checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    theirs_sub = (await theirs.aget_state(cfg(), subgraphs=True)).tasks[0].state
    ours_sub = (await ours.get_state("1", subgraphs=True)).tasks[0].state
    update = {"private": "edited", "log": ["by hand"]}
    await theirs.aupdate_state(theirs_sub.config, update, as_node=as_node)
    checkpoint = await ours.update_state("1", update, as_node=as_node, ns=ours_sub.ns)

    theirs_state = await theirs.aget_state(cfg(), subgraphs=True)
    ours_state = await ours.get_state("1", subgraphs=True)
    assert ours_state.next == theirs_state.next == ("inner",)  # the parent's task still waits
    theirs_sub, ours_sub = theirs_state.tasks[0].state, ours_state.tasks[0].state
    assert ours_sub.values == theirs_sub.values
    assert ours_sub.values == {"log": ["outer_one", "inner_one", "by hand"], "private": "edited"}
    assert ours_sub.next == theirs_sub.next == (() if as_node else ("inner_two",))
    assert ours_sub.checkpoint_id == checkpoint
    # the question: still asked without as_node; with it the sub-graph no longer asks it,
    # and ours stops listing it (LangGraph lists it until its task runs again, and asks
    # nothing then)
    assert len(theirs_state.tasks[0].interrupts) == 1
    assert len(ours_state.tasks[0].interrupts) == (0 if as_node else 1)
    assert len(ours_state.interrupts) == (0 if as_node else 1)

    if as_node is None:  # the question still waits: the answer goes on from the edit
        out = await theirs.ainvoke(THEIRS.Command(resume="ok"), cfg())
        result = await ours.run(Command(resume="ok"), thread_id="1")
        assert out["log"][-2:] == ["inner_two ok edited", "outer_two"]
    else:  # nothing of the sub-graph is left: the parent's task takes its state
        out = await theirs.ainvoke(None, cfg())
        result = await ours.run(None, thread_id="1")
        assert out["log"][-2:] == ["by hand", "outer_two"]
    assert result.status == "completed", result.error
    # the sub-graph's output as each library hands it up (docs/graph.md, "Sub-graphs")
    assert result.state["log"] == ["outer_one", *out["log"][2:]]


async def test_update_state_of_a_sub_graph_refuses_what_is_not_there(
    checkpointer: Checkpointer,
) -> None:
    ours = nested_graph(OURS).compile(checkpointer=checkpointer)
    await ours.run({"log": []}, thread_id="1")
    ns = (await ours.get_state("1", subgraphs=True)).tasks[0].state.ns
    before = await ours.get_state("1", subgraphs=True)
    with pytest.raises(UnknownTargetError, match="no sub-graph at 'nope:x'"):
        await ours.update_state("1", {"log": ["x"]}, ns="nope:x")
    with pytest.raises(UnknownTargetError, match="no sub-graph at 'outer_one:x'"):
        await ours.update_state("1", {"log": ["x"]}, ns="outer_one:x")  # a plain node
    with pytest.raises(UnknownTargetError, match="has no state of a sub-graph"):
        await ours.update_state("1", {"log": ["x"]}, ns="inner:not-a-task")
    with pytest.raises(GraphError, match="no such node"):
        await ours.update_state("1", {"log": ["x"]}, ns=ns, as_node="outer_two")
    with pytest.raises(InvalidUpdateError):
        await ours.update_state("1", {"topic": "outer only"}, ns=ns)  # not the inner's key
    with pytest.raises(GraphError, match="forking its past"):
        await ours.update_state("1", {"log": ["x"]}, ns=ns, checkpoint_id="ck-old")
    assert await ours.get_state("1", subgraphs=True) == before  # nothing changed


async def test_stream_with_subgraphs_leads_items_by_namespace(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_stream_subgraphs_during_execution / astream(subgraphs=True)
    def build(g: Any) -> Any:
        sub = g.StateGraph(Inner).add_node("inner_one", lambda s: {"log": ["inner_one"]})
        sub = sub.add_edge(g.START, "inner_one").add_edge("inner_one", g.END).compile()
        graph = g.StateGraph(Outer).add_node("outer", lambda s: {"log": ["outer"]})
        graph.add_node("inner", sub).add_edge(g.START, "outer").add_edge("outer", "inner")
        return graph.add_edge("inner", g.END)

    ours, theirs = pair(build, checkpointer)
    for mode in ("updates", "values"):
        theirs_items = [
            (shape(ns), payload)
            async for ns, payload in theirs.astream(
                {"log": []}, cfg(mode), stream_mode=mode, subgraphs=True
            )
        ]
        ours_items = [
            (shape(ns), payload)
            async for ns, payload in ours.stream(
                {"log": []}, thread_id=mode, mode=mode, subgraphs=True
            )
        ]
        if mode == "updates":
            # the sub-graph node's update: LangGraph's is the sub-graph's whole final state,
            # ours what it changed (docs/graph.md, "Sub-graphs")
            assert theirs_items[2] == ((), {"inner": {"log": ["outer", "inner_one"]}})
            theirs_items[2] = ((), {"inner": {"log": ["inner_one"]}})
        else:
            # so LangGraph's parent log holds "outer" twice at the end
            assert theirs_items[-1] == ((), {"log": ["outer", "outer", "inner_one"]})
            theirs_items[-1] = ((), {"log": ["outer", "inner_one"]})
        assert ours_items == theirs_items, mode


async def test_stream_several_modes_yields_mode_payload_pairs(checkpointer: Checkpointer) -> None:
    # LangGraph: test_stream_mode_multiple ... astream(stream_mode=["values", "updates"])
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer)
    modes = ["values", "updates"]
    theirs_items = [i async for i in theirs.astream({"log": []}, cfg(), stream_mode=modes)]
    ours_items = [i async for i in ours.stream({"log": []}, thread_id="1", mode=modes)]
    assert ours_items == theirs_items
    assert ours_items[:3] == [
        ("values", {"log": []}),
        ("updates", {"a": {"log": ["a"]}}),
        ("values", {"log": ["a"]}),
    ]


async def test_stream_custom_mode(checkpointer: Checkpointer) -> None:
    # LangGraph: test_stream_mode_custom (get_stream_writer there, ctx.emit here: our nodes
    # get their context as a second argument, docs/graph.md "Nodes")
    from langgraph.config import get_stream_writer

    def ours_node(state: Any, ctx: Any) -> dict[str, Any]:
        ctx.emit({"progress": 1})
        ctx.emit({"progress": 2})
        return {"log": ["node"]}

    def theirs_node(state: Any) -> dict[str, Any]:
        emit = get_stream_writer()
        emit({"progress": 1})
        emit({"progress": 2})
        return {"log": ["node"]}

    def build(g: Any) -> Any:
        graph = g.StateGraph(Goto).add_node("node", ours_node if g is OURS else theirs_node)
        return graph.add_edge(g.START, "node").add_edge("node", g.END)

    ours = build(OURS).compile(checkpointer=checkpointer)
    theirs = build(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    modes = ["custom", "updates"]
    theirs_items = [i async for i in theirs.astream({"log": []}, cfg(), stream_mode=modes)]
    ours_items = [i async for i in ours.stream({"log": []}, thread_id="1", mode=modes)]
    assert ours_items == theirs_items


# -- Command as run input, interrupts that route, retries ----------------------------------


@pytest.mark.parametrize(
    "goto",
    [
        [("send", 1)],
        [("send", 1), ("send", 2)],
        [("send", 3), "a"],
        ["a", "a"],
        [("send", 4), ("send", 4)],
    ],
)
async def test_command_goto_sends_as_input(checkpointer: Checkpointer, goto: list[Any]) -> None:
    # LangGraph: invoke(Command(goto=Send(...))) starts a Send task from outside; ours failed
    # with "unhashable type: 'dict'" (goto was de-duplicated as a dict's keys). A node named
    # twice runs once; each Send runs, equal ones too
    def build(g: Any) -> Any:
        # "w" runs only when a Send names it: ours refuses a node nothing reaches unless
        # some node declares it among its destinations
        graph = g.StateGraph(Log).add_node("a", logger("a"), destinations=("w",))
        graph.add_node("w", lambda arg: {"log": [f"w{arg['i']}"]})
        return graph.add_edge(g.START, "a").add_edge("a", g.END).add_edge("w", g.END)

    def spelled(g: Any) -> list[Any]:
        return [g.Send("w", {"i": t[1]}) if isinstance(t, tuple) else t for t in goto]

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    out = await theirs.ainvoke(THEIRS.Command(goto=spelled(THEIRS)), cfg())
    result = await ours.run(Command(goto=spelled(OURS)), thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == out
    single = spelled(OURS)[0]  # a lone Send, not in a list
    if isinstance(single, Send):
        result = await ours.run(Command(goto=single), thread_id="1")
        assert result.state["log"][-1] == f"w{single.arg['i']}"


async def test_command_goto_as_input_runs_beside_what_runs_next(checkpointer: Checkpointer) -> None:
    # LangGraph: test_command_goto_as_input / invoke(Command(goto=...)) on a paused thread
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer, interrupt_before=["b"])
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    assert (await ours.get_state("1")).next == (await theirs.aget_state(cfg())).next == ("b",)
    out = await theirs.ainvoke(THEIRS.Command(goto="c", update={"log": ["jump"]}), cfg())
    result = await ours.run(Command(goto="c", update={"log": ["jump"]}), thread_id="1")
    assert result.status == "completed", result.error
    # the goto joins the pending "b" (b runs, then c twice: once from the goto, once after b)
    assert out == {"log": ["a", "jump", "b", "c", "c"]}
    assert result.state == out


def review_graph(g: Any) -> Any:
    """LangGraph: the human-review how-to (test_interrupt_with_command): a node asks, then
    routes by the answer with Command(goto=...)."""

    def review(state: Any) -> Any:
        answer = g.interrupt({"question": "ship it?", "draft": state["log"][-1]})
        return g.Command(goto="ship" if answer == "yes" else "rework", update={"log": [answer]})

    graph = g.StateGraph(Goto).add_node("draft", lambda s: {"log": ["draft"]})
    graph.add_node("review", review, destinations=("ship", "rework"))
    graph.add_node("ship", lambda s: {"log": ["shipped"]})
    graph.add_node("rework", lambda s: {"log": ["reworked"]})
    graph.add_edge(g.START, "draft").add_edge("draft", "review")
    return graph.add_edge("ship", g.END).add_edge("rework", g.END)


@pytest.mark.parametrize("answer", ["yes", "no"])
async def test_an_answer_routes_with_command_goto(checkpointer: Checkpointer, answer: str) -> None:
    ours, theirs = pair(review_graph, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    assert result.interrupts[0].value == {"question": "ship it?", "draft": "draft"}
    out = await theirs.ainvoke(THEIRS.Command(resume=answer), cfg())
    result = await ours.run(Command(resume=answer), thread_id="1")
    assert result.state == out
    assert out["log"][-1] == ("shipped" if answer == "yes" else "reworked")


async def test_update_state_while_interrupted_then_resume(checkpointer: Checkpointer) -> None:
    # LangGraph: test_update_state_during_interrupt (the edit stays; the node asks nothing new)
    ours, theirs = pair(review_graph, checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    await theirs.aupdate_state(cfg(), {"log": ["note"]})
    await ours.update_state("1", {"log": ["note"]})
    theirs_state = await theirs.aget_state(cfg())
    ours_state = await ours.get_state("1")
    assert ours_state.values == theirs_state.values == {"log": ["draft", "note"]}
    assert ours_state.next == theirs_state.next == ("review",)
    # LangGraph's snapshot of the update's checkpoint shows no interrupts (the question is
    # still answered below); ours keeps showing the pending one (docs/graph.md: "Pending
    # tasks and interrupts stay")
    assert theirs_state.interrupts == ()
    assert [i.value for i in ours_state.interrupts] == [{"question": "ship it?", "draft": "draft"}]
    out = await theirs.ainvoke(THEIRS.Command(resume="yes"), cfg())
    result = await ours.run(Command(resume="yes"), thread_id="1")
    assert result.state == out == {"log": ["draft", "note", "yes", "shipped"]}


class Flaky(Exception):
    pass


async def test_retry_policy_retries_a_failing_node(checkpointer: Checkpointer) -> None:
    # LangGraph: test_node_retry / RetryPolicy(max_attempts=...)
    from langgraph.types import RetryPolicy as LgRetryPolicy

    from tinyagents.graph import RetryPolicy

    def build(g: Any, attempts: list[int]) -> Any:
        def flaky(state: Any) -> dict[str, Any]:
            attempts.append(1)
            if len(attempts) < 3:
                # not a ValueError: neither default retry_on retries those (nor
                # RuntimeError, OSError, ...; docs/graph.md, "Nodes")
                raise Flaky("not yet")
            return {"log": [f"ok after {len(attempts)}"]}

        # the keyword is retry= here, retry_policy= in LangGraph (ours has no jitter)
        if g is OURS:
            policy = RetryPolicy(max_attempts=3, initial_interval=0.0)
            graph = g.StateGraph(Goto).add_node("flaky", flaky, retry=policy)
        else:
            policy = LgRetryPolicy(max_attempts=3, initial_interval=0.0, jitter=False)
            graph = g.StateGraph(Goto).add_node("flaky", flaky, retry_policy=policy)
        return graph.add_edge(g.START, "flaky").add_edge("flaky", g.END)

    theirs_attempts: list[int] = []
    out = await build(THEIRS, theirs_attempts).compile().ainvoke({"log": []})
    ours_attempts: list[int] = []
    ours_graph = build(OURS, ours_attempts).compile(checkpointer=checkpointer)
    result = await ours_graph.run({"log": []}, thread_id="1")
    assert result.state == out == {"log": ["ok after 3"]}
    assert len(ours_attempts) == len(theirs_attempts) == 3


# -- Send to sub-graphs, state schemas, empty threads --------------------------------------


class Subjects(TypedDict, total=False):
    subjects: list[str]
    jokes: Annotated[list[str], operator.add]


class JokeState(TypedDict, total=False):
    subject: str
    jokes: Annotated[list[str], operator.add]


def send_to_subgraph_graph(g: Any) -> Any:
    """LangGraph: test_send_to_nested_graphs (each Send starts a sub-graph from its
    argument; each pauses on its own interrupt)."""

    def edit(state: Any) -> dict[str, Any]:
        subject = g.interrupt(f"edit {state['subject']}?")
        return {"subject": subject}

    def generate(state: Any) -> dict[str, Any]:
        return {"jokes": [f"Joke about {state['subject']}"]}

    sub = g.StateGraph(JokeState).add_node("edit", edit).add_node("generate", generate)
    sub.add_edge(g.START, "edit").add_edge("edit", "generate").add_edge("generate", g.END)
    graph = g.StateGraph(Subjects).add_node("generate_joke", sub.compile())
    graph.add_conditional_edges(
        g.START,
        lambda s: [g.Send("generate_joke", {"subject": x}) for x in s["subjects"]],
    )
    return graph.add_edge("generate_joke", g.END)


async def test_send_to_a_subgraph_with_interrupts(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(send_to_subgraph_graph, checkpointer)
    start = {"subjects": ["cats", "dogs"]}
    out = await theirs.ainvoke(start, cfg())
    result = await ours.run(start, thread_id="1")
    assert sorted(i.value for i in result.interrupts) == ["edit cats?", "edit dogs?"]
    assert sorted(i.value for i in out["__interrupt__"]) == ["edit cats?", "edit dogs?"]
    # the reducer channel starts as list(): "jokes": [] before any write (on both)
    assert result.state == values(out) == {**start, "jokes": []}
    theirs_answers = {i.id: i.value.split()[1].rstrip("?").upper() for i in out["__interrupt__"]}
    ours_answers = {i.id: i.value.split()[1].rstrip("?").upper() for i in result.interrupts}
    out = await theirs.ainvoke(THEIRS.Command(resume=theirs_answers), cfg())
    result = await ours.run(Command(resume=ours_answers), thread_id="1")
    assert result.status == "completed", result.error
    assert out == {"subjects": ["cats", "dogs"], "jokes": ["Joke about CATS", "Joke about DOGS"]}
    assert result.state == out


async def test_get_state_of_an_unknown_thread_is_empty(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer)
    theirs_state = await theirs.aget_state(cfg("nope"))
    ours_state = await ours.get_state("nope")
    assert ours_state.values == theirs_state.values == {}
    assert ours_state.next == theirs_state.next == ()
    assert ours_state.checkpoint_id is None
    assert await ours.history("nope") == [s async for s in theirs.aget_state_history(cfg("nope"))]


async def test_a_node_returning_none_writes_nothing(checkpointer: Checkpointer) -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(Goto).add_node("quiet", lambda s: None)
        graph.add_node("loud", lambda s: {"log": ["loud"]}).add_edge(g.START, "quiet")
        return graph.add_edge("quiet", "loud").add_edge("loud", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    assert (await ours.run({"log": []}, thread_id="1")).state == out == {"log": ["loud"]}
    theirs_items = [u async for u in theirs.astream({"log": []}, cfg("2"), stream_mode="updates")]
    ours_items = [u async for u in ours.stream({"log": []}, thread_id="2", mode="updates")]
    assert ours_items == theirs_items == [{"quiet": None}, {"loud": {"log": ["loud"]}}]


async def test_values_stream_skips_a_step_that_wrote_nothing(checkpointer: Checkpointer) -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(Goto).add_node("quiet", lambda s: None)
        graph.add_node("loud", lambda s: {"log": ["loud"]}).add_edge(g.START, "quiet")
        return graph.add_edge("quiet", "loud").add_edge("loud", g.END)

    ours, theirs = pair(build, checkpointer)
    theirs_items = [v async for v in theirs.astream({"log": []}, cfg(), stream_mode="values")]
    assert theirs_items == [{"log": []}, {"log": ["loud"]}]
    ours_items = [v async for v in ours.stream({"log": []}, thread_id="1", mode="values")]
    assert ours_items == theirs_items


async def test_input_keys_outside_the_schema(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer)
    # LangGraph drops an input key the state does not have; ours refuses it and changes
    # nothing (docs/graph.md, "State": "A key that is not a field is an InvalidUpdateError")
    out = await theirs.ainvoke({"log": [], "stray": 1}, cfg())
    assert out == {"log": ["a", "b", "c"]}
    with pytest.raises(InvalidUpdateError, match="stray"):
        await ours.run({"log": [], "stray": 1}, thread_id="1")
    assert (await ours.get_state("1")).checkpoint_id is None


async def test_tasks_stream_shape(checkpointer: Checkpointer) -> None:
    # LangGraph: test_stream_mode_tasks. Ids are each library's own; LangGraph's start item
    # also has "triggers" (its internal channel names, e.g. "branch:to:a"), which ours does
    # not have (docs/graph.md, Streaming: {"id", "name", "input"})
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer)

    def shape(item: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in item.items() if k not in ("id", "triggers")}

    theirs_items = [i async for i in theirs.astream({"log": []}, cfg(), stream_mode="tasks")]
    ours_items = [i async for i in ours.stream({"log": []}, thread_id="1", mode="tasks")]
    assert [shape(i) for i in ours_items] == [shape(i) for i in theirs_items]
    assert ours_items[0]["id"] == ours_items[1]["id"]  # a task's start and end share its id
    assert "triggers" in theirs_items[0] and "triggers" not in ours_items[0]


async def test_tasks_stream_shows_no_writes_and_interrupts_as_langgraph(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: a task that wrote nothing (it returned None, or paused on interrupt()) ends
    # with "result": {}, and its interrupts are dicts of value and id; ours gave None and
    # Interrupt objects
    def build(g: Any) -> Any:
        def ask(state: Any) -> dict[str, Any]:
            return {"log": [f"ask:{g.interrupt('ok?')}"]}

        graph = g.StateGraph(Log).add_node("quiet", lambda s: None).add_node("ask", ask)
        return graph.add_edge(g.START, "quiet").add_edge("quiet", "ask").add_edge("ask", g.END)

    ours, theirs = pair(build, checkpointer)

    def ends(items: list[dict[str, Any]]) -> list[Any]:
        return [
            (i["name"], i["result"], i["error"], [q["value"] for q in i["interrupts"]])
            for i in items
            if "result" in i
        ]

    theirs_items = [i async for i in theirs.astream({"log": []}, cfg(), stream_mode="tasks")]
    ours_items = [i async for i in ours.stream({"log": []}, thread_id="1", mode="tasks")]
    assert (
        ends(ours_items)
        == ends(theirs_items)
        == [
            ("quiet", {}, None, []),
            ("ask", {}, None, ["ok?"]),
        ]
    )
    (question,) = ours_items[-1]["interrupts"]
    assert set(question) == {"value", "id"}
    assert question["id"] == (await ours.get_state("1")).interrupts[0].id


async def test_tasks_stream_starts_a_steps_tasks_first(checkpointer: Checkpointer) -> None:
    # LangGraph lists the starts of a step's tasks before any of them ends, the Sends first,
    # then the nodes in add_node order
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", logger("a"))
        graph.add_node("w", lambda arg: {"log": [f"w{arg}"]}).add_node("z", logger("z"))
        graph.add_edge(g.START, "a").add_edge("z", g.END).add_edge("w", g.END)
        return graph.add_conditional_edges("a", lambda s: ["z", g.Send("w", 1)])

    ours, theirs = pair(build, checkpointer)

    def kind(item: dict[str, Any]) -> tuple[str, str]:
        return (item["name"], "start" if "input" in item else "end")

    theirs_items = [i async for i in theirs.astream({"log": []}, cfg(), stream_mode="tasks")]
    ours_items = [i async for i in ours.stream({"log": []}, thread_id="1", mode="tasks")]
    expected = [("a", "start"), ("a", "end"), ("w", "start"), ("z", "start")]
    assert [kind(i) for i in theirs_items][:4] == expected
    assert [kind(i) for i in ours_items][:4] == expected
    # the ends come as the tasks finish
    assert sorted(kind(i) for i in ours_items[4:]) == [("w", "end"), ("z", "end")]
