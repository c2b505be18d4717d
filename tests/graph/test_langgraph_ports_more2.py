"""Still more ports of LangGraph's own tests and of the behaviour of its code
(``libs/langgraph/tests/test_pregel_async.py``, ``langgraph/graph/_branch.py``,
``langgraph/graph/state.py``): the same program on LangGraph and on ``tinyagents.graph``,
compared, as in ``test_langgraph_ports.py``.

This file covers routers that return no destination (``None``, ``START``) and a router added
twice to one node; ... (see each test's comment for the LangGraph test or code it ports).

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture). A difference docs/graph.md documents is asserted as ours, with a
comment naming the section.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import operator
from typing import Annotated, Any, Literal, TypedDict

import pytest
from graphkit import logger
from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph_kit import (
    OURS,
    THEIRS,
    Log,
    abc_graph,
    cfg,
    lg_errors,
    lg_memory,
    lg_message,
    lg_types,
    pair,
    values,
)
from pydantic import BaseModel, Field
from test_langgraph_ports_stream import plain

from tinyagents.errors import (
    ConfigurationError,
    GraphError,
    GraphValidationError,
    InterruptError,
    InvalidRouteError,
    InvalidUpdateError,
)
from tinyagents.graph import END, START, Command, RetryPolicy, Send, StateGraph
from tinyagents.store.checkpoint import Checkpointer

# -- routers that name no destination ------------------------------------------------------


def route_to(g: Any, result: Any) -> Any:
    """START → a, a's router returns ``result``; b → END."""
    graph = g.StateGraph(Log).add_node("a", logger("a")).add_node("b", logger("b"))
    graph.add_edge(g.START, "a").add_edge("b", g.END)

    def router(state: Any) -> Any:
        return result

    return graph.add_conditional_edges("a", router)


@pytest.mark.parametrize("result", [None, "__start__", ["b", None]])
async def test_a_router_returning_no_destination_is_a_value_error(result: Any) -> None:
    # LangGraph's Branch (graph/_branch.py, _finish) raises ValueError("Branch did not return
    # a valid destination") for None and START; ours is an InvalidRouteError, which is a
    # KeyError (a result outside a path_map, as LangGraph's) and a ValueError both
    ours, theirs = pair(lambda g: route_to(g, result), None)
    with pytest.raises(ValueError, match="valid destination"):
        await theirs.ainvoke({"log": []})
    outcome = await ours.run({"log": []})
    assert isinstance(outcome.error, InvalidRouteError)
    assert isinstance(outcome.error, ValueError) and isinstance(outcome.error, KeyError)
    assert "router 'router' after 'a' returned" in str(outcome.error)
    assert outcome.state == {"log": ["a"]}
    with pytest.raises(ValueError):
        outcome.raise_for_status()


async def test_a_send_to_end_is_an_invalid_update() -> None:
    # LangGraph's Branch (graph/_branch.py, _finish) raises InvalidUpdateError("Cannot send a
    # packet to the END node") for a router's Send(END, ...); ours raised a plain GraphError.
    # A node's Command(goto=Send(END, ...)) LangGraph drops with a logged warning ("Ignoring
    # unknown node name __end__ in pending sends"); ours refuses it the same way
    ours, theirs = pair(lambda g: route_to(g, g.Send(g.END, {})), None)
    with pytest.raises(lg_errors.InvalidUpdateError, match="END node"):
        await theirs.ainvoke({"log": []})
    outcome = await ours.run({"log": []})
    assert isinstance(outcome.error, InvalidUpdateError)
    assert "Send to END" in str(outcome.error) and outcome.state == {"log": ["a"]}

    def command_graph(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", lambda s: g.Command(goto=g.Send(g.END, {})))
        return graph.add_edge(g.START, "a")

    outcome = await command_graph(OURS).compile().run({"log": []})
    assert isinstance(outcome.error, InvalidUpdateError)
    with pytest.raises(InvalidUpdateError, match="Send to END"):
        await route_to(OURS, "b").compile().run(Command(goto=Send(END, {})))


def test_the_same_router_added_twice_to_a_node_is_refused() -> None:
    # LangGraph's add_conditional_edges (graph/state.py) refuses a second branch of the same
    # name on a node: "Branch with name `router` already exists for node `a`". Ours refuses
    # the same router added twice (it would route each result twice); two different routers
    # on one node are allowed, lambdas too (LangGraph refuses a second lambda by its name)
    def build(g: Any) -> Any:
        return route_to(g, "b")

    theirs = build(THEIRS)
    with pytest.raises(ValueError, match="already exists for node `a`"):
        theirs.add_conditional_edges("a", theirs.branches["a"]["router"].path.func)
    ours = build(OURS)
    router = ours.branches[0].router
    with pytest.raises(GraphValidationError, match="router 'router' is already a conditional"):
        ours.add_conditional_edges("a", router)
    with pytest.raises(GraphValidationError):
        ours.add_conditional_edges("a", router, {"b": "b"})
    ours.add_conditional_edges("a", lambda s: "b").add_conditional_edges("a", lambda s: "b")
    ours.add_conditional_edges("b", router)  # the same router on another node is fine


# -- time travel: a replay from an older checkpoint, a fork by update_state ------------------


class Switch(TypedDict, total=False):
    myval: Annotated[int, operator.add]
    otherval: bool


async def values_of(graph: Any, history: list[Any]) -> list[dict[str, Any]]:
    """The values at each of our ``history`` entries."""
    return [(await graph.get_state("1", h.checkpoint_id)).values for h in history]


def switch_graph(g: Any) -> Any:
    """LangGraph: test_run_from_checkpoint_id_retains_previous_writes (one callable object
    shared by two nodes, flipping a switch on each call)."""

    class Anode:
        def __init__(self) -> None:
            self.switch = False

        async def __call__(self, state: Any) -> dict[str, Any]:
            self.switch = not self.switch
            return {"myval": 2 if self.switch else 1, "otherval": self.switch}

    builder = g.StateGraph(Switch)
    thenode = Anode()
    builder.add_node("node_one", thenode).add_node("node_two", thenode)
    builder.add_edge(g.START, "node_one")

    def edge_of(src: str) -> Any:
        swap = "node_one" if src == "node_two" else "node_two"

        def _edge(st: Any) -> Literal["__end__", "node_one", "node_two"]:
            if st["myval"] > 3:
                return g.END
            if st["otherval"]:
                return swap
            return src

        return _edge

    builder.add_conditional_edges("node_one", edge_of("node_one"))
    return builder.add_conditional_edges("node_two", edge_of("node_two"))


async def test_a_replay_from_an_older_checkpoint_keeps_the_writes_before_it(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_run_from_checkpoint_id_retains_previous_writes
    ours, theirs = pair(switch_graph, checkpointer)
    out = await theirs.ainvoke({"myval": 1}, cfg())
    result = await ours.run({"myval": 1}, thread_id="1")
    assert result.state == out == {"myval": 4, "otherval": False}
    history = [c async for c in theirs.aget_state_history(cfg())]
    ours_history = await ours.history("1")
    assert await values_of(ours, ours_history) == [h.values for h in history]
    assert [h.next for h in ours_history] == [h.next for h in history]
    assert [h.step for h in ours_history] == [h.metadata["step"] for h in history]

    old = history[1].config["configurable"]["checkpoint_id"]
    out = await theirs.ainvoke(None, cfg(checkpoint_id=old))
    result = await ours.run(None, thread_id="1", checkpoint_id=ours_history[1].checkpoint_id)
    assert result.state == out == {"myval": 5, "otherval": True}
    new_history = [c async for c in theirs.aget_state_history(cfg())]
    ours_new = await ours.history("1")
    assert len(ours_new) == len(new_history) == len(history) + 2
    # the checkpoint a replay starts from is LangGraph's "fork", our "rewind" (docs/graph.md,
    # "Reading and changing a thread": history's sources)
    assert new_history[1].metadata["source"] == "fork"
    assert ours_new[1].source == "rewind"
    assert await values_of(ours, ours_new) == [h.values for h in new_history]
    assert [h.next for h in ours_new] == [h.next for h in new_history]
    assert [h.step for h in ours_new] == [h.metadata["step"] for h in new_history]


async def test_an_update_at_an_older_checkpoint_drops_what_ran_after_it(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_fork_does_not_apply_pending_writes
    class Total(TypedDict):
        value: Annotated[int, operator.add]

    def build(g: Any) -> Any:
        graph = g.StateGraph(Total).add_node("node_a", lambda s: {"value": 10})
        graph.add_node("node_b", lambda s: {"value": 100})
        return graph.add_edge(g.START, "node_a").add_edge("node_a", "node_b")

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke({"value": 1}, cfg())
    await ours.run({"value": 1}, thread_id="1")
    [before_a] = [s async for s in theirs.aget_state_history(cfg()) if s.next == ("node_a",)]
    fork = await theirs.aupdate_state(before_a.config, {"value": 20}, as_node="node_a")
    ours_before_a = next(h for h in await ours.history("1") if h.next == ("node_a",))
    await ours.update_state(
        "1", {"value": 20}, as_node="node_a", checkpoint_id=ours_before_a.checkpoint_id
    )
    out = await theirs.ainvoke(None, fork)
    result = await ours.run(None, thread_id="1")
    assert result.state == out == {"value": 121}


# -- interrupts: asked in a loop, asked twice, asked by parallel nodes ------------------------


class Age(TypedDict, total=False):
    age: int
    other: str


async def test_a_node_asking_again_in_a_loop(checkpointer: Checkpointer) -> None:
    # LangGraph: test_interrupt_loop
    def build(g: Any) -> Any:
        async def ask_age(s: Any) -> dict[str, Any]:
            question = "How old are you?"
            value = None
            for _ in range(10):
                value = g.interrupt(question)
                if not value.isdigit() or int(value) < 18:
                    question = "invalid response"
                    value = None
                else:
                    break
            assert value is not None
            return {"age": int(value)}

        return g.StateGraph(Age).add_node("node", ask_age).add_edge(g.START, "node")

    ours, theirs = pair(build, checkpointer)
    for data, expected in [
        ({"other": ""}, [{"__interrupt__": ["How old are you?"]}]),
        ("13", [{"__interrupt__": ["invalid response"]}]),
        ("15", [{"__interrupt__": ["invalid response"]}]),
        ("19", [{"node": {"age": 19}}]),
    ]:
        theirs_in = data if isinstance(data, dict) else THEIRS.Command(resume=data)
        ours_in = data if isinstance(data, dict) else Command(resume=data)
        theirs_items = [e async for e in theirs.astream(theirs_in, cfg())]
        ours_items = [e async for e in ours.stream(ours_in, thread_id="1", mode="updates")]
        assert plain(theirs_items) == plain(ours_items) == expected


async def test_a_node_asking_twice_writes_nothing_until_it_returns(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_multiple_interrupt_state_persistence
    class Steps(TypedDict):
        steps: Annotated[list[str], operator.add]

    def build(g: Any) -> Any:
        def interruptible_node(state: Any) -> dict[str, Any]:
            first = g.interrupt("First interrupt")
            second = g.interrupt("Second interrupt")
            return {"steps": [first, second]}

        graph = g.StateGraph(Steps).add_node("node", interruptible_node)
        return graph.add_edge(g.START, "node")

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke({"steps": []}, cfg())
    await ours.run({"steps": []}, thread_id="1")
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values
    await theirs.ainvoke(THEIRS.Command(resume="step1"), cfg())
    await ours.run(Command(resume="step1"), thread_id="1")
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values
    assert (await ours.get_state("1")).values == {"steps": []}
    out = await theirs.ainvoke(THEIRS.Command(resume="step2"), cfg())
    result = await ours.run(Command(resume="step2"), thread_id="1")
    assert result.state == out == {"steps": ["step1", "step2"]}
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values


class Texts(TypedDict, total=False):
    text_1: str
    text_2: str


def two_humans(g: Any) -> Any:
    async def human_node_1(state: Any) -> dict[str, Any]:
        return {"text_1": g.interrupt(state["text_1"])}

    async def human_node_2(state: Any) -> dict[str, Any]:
        return {"text_2": g.interrupt(state["text_2"])}

    graph = g.StateGraph(Texts).add_node("human_node_1", human_node_1)
    graph.add_node("human_node_2", human_node_2)
    return graph.add_edge(g.START, "human_node_1").add_edge(g.START, "human_node_2")


async def test_a_single_resume_with_several_interrupts_pending_is_refused(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_null_resume_disallowed_with_multiple_interrupts
    ours, theirs = pair(two_humans, checkpointer)
    data = {"text_1": "original text 1", "text_2": "original text 2"}
    await theirs.ainvoke(data, cfg())
    await ours.run(data, thread_id="1")
    with pytest.raises(RuntimeError, match="multiple pending interrupts"):
        await theirs.ainvoke(THEIRS.Command(resume="singular resume"), cfg())
    # ours raises InterruptError (a RuntimeError) listing the ids (docs/graph.md, "Command")
    with pytest.raises(RuntimeError) as raised:
        await ours.run(Command(resume="singular resume"), thread_id="1")
    assert isinstance(raised.value, InterruptError)
    pending = (await ours.get_state("1")).interrupts
    assert all(i.id in str(raised.value) for i in pending)
    theirs_map = {
        i.id: f"resume for prompt: {i.value}" for i in (await theirs.aget_state(cfg())).interrupts
    }
    ours_map = {i.id: f"resume for prompt: {i.value}" for i in pending}
    out = await theirs.ainvoke(THEIRS.Command(resume=theirs_map), cfg())
    result = await ours.run(Command(resume=ours_map), thread_id="1")
    assert (
        result.state
        == out
        == {
            "text_1": "resume for prompt: original text 1",
            "text_2": "resume for prompt: original text 2",
        }
    )


async def test_interrupts_in_the_values_and_updates_streams(checkpointer: Checkpointer) -> None:
    # LangGraph: test_interrupt_stream_mode_values
    class Robot(TypedDict, total=False):
        robot_input: str
        human_input: str

    def build(g: Any) -> Any:
        def robot_input_node(state: Any) -> dict[str, Any]:
            return {"robot_input": "beep boop i am a robot"}

        def human_input_node(state: Any) -> Any:
            return g.Command(update={"human_input": g.interrupt("interrupt")})

        graph = g.StateGraph(Robot).add_node(robot_input_node).add_node(human_input_node)
        graph.add_edge(g.START, "robot_input_node")
        return graph.add_edge("robot_input_node", "human_input_node")

    ours, theirs = pair(build, checkpointer)
    modes = ["updates", "values"]
    theirs_items = [e async for e in theirs.astream({}, cfg(), stream_mode=modes)]
    ours_items = [e async for e in ours.stream({}, thread_id="1", mode=modes)]
    assert plain(ours_items) == plain(theirs_items)
    assert len(ours_items) == 4
    theirs_items = [
        e
        async for e in theirs.astream(
            THEIRS.Command(resume="i am a human"), cfg(), stream_mode=modes
        )
    ]
    ours_items = [
        e async for e in ours.stream(Command(resume="i am a human"), thread_id="1", mode=modes)
    ]
    assert plain(ours_items) == plain(theirs_items)
    assert ours_items[-1] == (
        "values",
        {"robot_input": "beep boop i am a robot", "human_input": "i am a human"},
    )


async def test_a_router_after_sends(checkpointer: Checkpointer) -> None:
    # LangGraph: test_cond_edge_after_send, with a TypedDict state (ported before ours took
    # a one-value state such as StateGraph(Annotated[list, operator.add]): those are in
    # test_langgraph_ports_root.py)
    def build(g: Any) -> Any:
        async def send_for_fun(state: Any) -> list[Any]:
            return [g.Send("2", state), g.Send("2", state)]

        async def route_to_three(state: Any) -> Literal["3"]:
            return "3"

        graph = g.StateGraph(Log)
        for name in ("1", "2", "3"):
            graph.add_node(name, logger(name))
        graph.add_edge(g.START, "1").add_conditional_edges("1", send_for_fun)
        return graph.add_conditional_edges("2", route_to_three)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": ["0"]}, cfg())
    result = await ours.run({"log": ["0"]}, thread_id="1")
    assert result.state == out == {"log": ["0", "1", "2", "2", "3"]}


# -- a node that ran before the node that asks -----------------------------------------------


class Topics(TypedDict, total=False):
    topics: list[str]
    answers: Annotated[list[str], operator.add]


async def test_a_node_before_the_asking_node_does_not_run_again(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_node_before_interrupt_resume_graph_api
    calls: dict[int, list[str]] = {id(OURS): [], id(THEIRS): []}

    def build(g: Any) -> Any:
        def setup(state: Any) -> dict[str, Any]:
            calls[id(g)].append("setup")
            return {"topics": [f"topic {i + 1}" for i in range(len(state["topics"]))]}

        def ask(state: Any) -> dict[str, Any]:
            calls[id(g)].append("ask")
            return {"answers": [g.interrupt(f"Whats the answer for {t}?") for t in state["topics"]]}

        graph = g.StateGraph(Topics).add_node("setup", setup).add_node("ask", ask)
        return graph.add_edge(g.START, "setup").add_edge("setup", "ask").add_edge("ask", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"topics": ["a", "b"], "answers": []}, cfg())
    result = await ours.run({"topics": ["a", "b"], "answers": []}, thread_id="1")
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    assert [i.value for i in result.interrupts] == ["Whats the answer for topic 1?"]
    out = await theirs.ainvoke(THEIRS.Command(resume="answer1"), cfg())
    result = await ours.run(Command(resume="answer1"), thread_id="1")
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    assert [i.value for i in result.interrupts] == ["Whats the answer for topic 2?"]
    out = await theirs.ainvoke(THEIRS.Command(resume="answer2"), cfg())
    result = await ours.run(Command(resume="answer2"), thread_id="1")
    assert (
        result.state == out == {"topics": ["topic 1", "topic 2"], "answers": ["answer1", "answer2"]}
    )
    assert calls[id(OURS)] == calls[id(THEIRS)] == ["setup", "ask", "ask", "ask"]


async def test_nodes_before_a_node_asking_twice(checkpointer: Checkpointer) -> None:
    # LangGraph: test_multiple_nodes_before_interrupt_resume_graph_api and
    # test_node_before_multiple_interrupt_cycles_graph_api
    class Count(TypedDict, total=False):
        value: int
        data: str

    def build(g: Any) -> Any:
        def multi_interrupt(state: Any) -> dict[str, Any]:
            first = g.interrupt(f"Result so far is {state['value']}. First?")
            second = g.interrupt("Second question?")
            return {"data": f"{first},{second}"}

        graph = g.StateGraph(Count).add_node("step_a", lambda s: {"value": s["value"] + 1})
        graph.add_node("step_b", lambda s: {"value": s["value"] * 2})
        graph.add_node("multi_interrupt", multi_interrupt).add_edge(g.START, "step_a")
        graph.add_edge("step_a", "step_b").add_edge("step_b", "multi_interrupt")
        return graph.add_edge("multi_interrupt", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"value": 5, "data": ""}, cfg())
    result = await ours.run({"value": 5, "data": ""}, thread_id="1")
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    assert [i.value for i in result.interrupts] == ["Result so far is 12. First?"]
    out = await theirs.ainvoke(THEIRS.Command(resume="first_answer"), cfg())
    result = await ours.run(Command(resume="first_answer"), thread_id="1")
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    out = await theirs.ainvoke(THEIRS.Command(resume="second_answer"), cfg())
    result = await ours.run(Command(resume="second_answer"), thread_id="1")
    assert result.state == out == {"value": 12, "data": "first_answer,second_answer"}


async def test_history_tasks_hold_what_each_task_wrote(checkpointer: Checkpointer) -> None:
    # LangGraph: test_supersteps_populate_task_results (its reference run; bulk_update_state
    # is ported in test_langgraph_ports_bulk.py)
    class NumText(TypedDict, total=False):
        num: int
        text: str

    def build(g: Any) -> Any:
        graph = g.StateGraph(NumText)
        graph.add_node("double", lambda s: {"num": s["num"] * 2, "text": s["text"] * 2})
        return graph.add_edge(g.START, "double").add_edge("double", g.END)

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke({"num": 1, "text": "one"}, cfg())
    await ours.run({"num": 1, "text": "one"}, thread_id="1")

    def first_result(snapshots: list[Any], node: str) -> Any:
        return next((t.result for s in snapshots for t in s.tasks if t.name == node), None)

    theirs_history = [s async for s in theirs.aget_state_history(cfg())]
    ours_history = [await ours.get_state("1", h.checkpoint_id) for h in await ours.history("1")]
    for node, expected in [
        ("__start__", {"num": 1, "text": "one"}),
        ("double", {"num": 2, "text": "oneone"}),
    ]:
        assert first_result(ours_history, node) == first_result(theirs_history, node) == expected


# -- Command(graph=PARENT) -----------------------------------------------------------------


async def test_a_parent_command_goto_from_a_sub_graph(checkpointer: Checkpointer) -> None:
    # LangGraph: test_parent_command_goto (without its step timeouts): the parent takes the
    # command's update as the sub-graph node's output; what the sub-graph wrote before is
    # not given back
    class Dialog(TypedDict):
        dialog_state: Annotated[list[str], operator.add]

    def build(g: Any) -> Any:
        async def node_b_child(state: Any) -> Any:
            return g.Command(
                graph=g.Command.PARENT,
                goto="node_b_parent",
                update={"dialog_state": ["b_child_state"]},
            )

        sub = g.StateGraph(Dialog).add_node(
            "node_a_child", lambda s: {"dialog_state": ["a_child_state"]}
        )
        sub.add_node(node_b_child).add_edge(g.START, "node_a_child")
        sub.add_edge("node_a_child", "node_b_child")
        main = g.StateGraph(Dialog).add_node(
            "node_b_parent", lambda s: {"dialog_state": ["node_b_parent"]}
        )
        main.add_node("subgraph_node", sub.compile(), destinations=("node_b_parent",))
        return main.add_edge(g.START, "subgraph_node")

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"dialog_state": ["init_state"]}, cfg())
    result = await ours.run({"dialog_state": ["init_state"]}, thread_id="1")
    assert result.state == out == {"dialog_state": ["init_state", "b_child_state", "node_b_parent"]}


# -- Sends pending at a breakpoint, and update_state ---------------------------------------


def react_graph(g: Any, called: list[str]) -> Any:
    """LangGraph: test_send_react_interrupt. ``agent`` answers with a tool call, its router
    sends each call to its tool (``foo``)."""
    ai_message = AIMessage(
        "", id="ai1", tool_calls=[ToolCall(name="foo", args={"hi": [1, 2, 3]}, id="")]
    )

    async def agent(state: Any) -> dict[str, Any]:
        return {"messages": ai_message}

    def route(state: Any) -> Any:
        if isinstance(state["messages"][-1], AIMessage):
            return [g.Send(call["name"], call) for call in state["messages"][-1].tool_calls]
        return None

    async def foo(call: Any) -> dict[str, Any]:
        called.append(str(call["args"]))
        return {"messages": ToolMessage(str(call["args"]), tool_call_id=call["id"])}

    builder = g.StateGraph(lg_message.MessagesState).add_node(agent).add_node(foo)
    return builder.add_edge(g.START, "agent").add_conditional_edges("agent", route)


def said(messages: list[Any]) -> list[tuple[str, Any, Any]]:
    return [(m.type, m.content, getattr(m, "tool_calls", None)) for m in messages]


async def test_a_pending_send_at_a_breakpoint_then_continue(checkpointer: Checkpointer) -> None:
    # LangGraph: test_send_react_interrupt, the "simple interrupt-resume flow"
    called: dict[int, list[str]] = {id(OURS): [], id(THEIRS): []}
    ours, theirs = (
        react_graph(g, called[id(g)]).compile(checkpointer=cp, interrupt_before=["foo"])
        for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver()))
    )
    hello = {"messages": [HumanMessage("hello")]}
    out = await theirs.ainvoke(hello, cfg())
    result = await ours.run(hello, thread_id="1")
    assert said(result.state["messages"]) == said(out["messages"])
    assert len(out["messages"]) == 2 and called[id(OURS)] == called[id(THEIRS)] == []
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert said(result.state["messages"]) == said(out["messages"])
    assert called[id(OURS)] == called[id(THEIRS)] == ["{'hi': [1, 2, 3]}"]


@pytest.mark.parametrize("replace", ["drop the call", "new call"])
async def test_an_update_at_a_breakpoint_routes_the_sends_again(
    checkpointer: Checkpointer, replace: str
) -> None:
    # LangGraph: test_send_react_interrupt, the "interrupt-update-resume flow" (the update
    # drops the tool call: the pending Send goes) and the one "creating new Send in update
    # call" (the update changes it: the old Send goes, a new one comes)
    called: dict[int, list[str]] = {id(OURS): [], id(THEIRS): []}
    ours, theirs = (
        react_graph(g, called[id(g)]).compile(checkpointer=cp, interrupt_before=["foo"])
        for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver()))
    )
    hello = {"messages": [HumanMessage("hello")]}
    await theirs.ainvoke(hello, cfg())
    await ours.run(hello, thread_id="1")
    mine, their = await ours.get_state("1"), await theirs.aget_state(cfg())
    assert mine.next == their.next == ("foo",)
    assert [t.name for t in mine.tasks] == [t.name for t in their.tasks] == ["foo"]
    # a stop before a step saves nothing: the head is the previous step's checkpoint
    assert (mine.step, mine.source) == (their.metadata["step"], their.metadata["source"])
    if replace == "drop the call":
        update = AIMessage("Bye now", id="ai1", tool_calls=[])
    else:
        call = ToolCall(name="foo", args={"hi": [4, 5, 6]}, id="tool1")
        update = AIMessage("", id="ai1", tool_calls=[call])
    await theirs.aupdate_state(cfg(), {"messages": update})
    await ours.update_state("1", {"messages": update})
    mine, their = await ours.get_state("1"), await theirs.aget_state(cfg())
    assert said(mine.values["messages"]) == said(their.values["messages"])
    assert mine.next == their.next
    assert [t.name for t in mine.tasks] == [t.name for t in their.tasks]
    assert (mine.step, mine.source) == (their.metadata["step"], their.metadata["source"])
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert said(result.state["messages"]) == said(out["messages"])
    expected = [] if replace == "drop the call" else ["{'hi': [4, 5, 6]}"]
    assert called[id(OURS)] == called[id(THEIRS)] == expected


# -- START and END where an edge cannot take them ------------------------------------------


@pytest.mark.parametrize(
    ("mistake", "message"),
    [
        ("a join from END", "END has no outgoing edges"),
        ("a join to START", "START has no incoming edges"),
        ("a router on END", "END has no outgoing edges"),
        ("a path_map to START", "START has no incoming edges"),
    ],
)
def test_start_and_end_are_refused_where_an_edge_cannot_take_them(
    mistake: str, message: str
) -> None:
    # LangGraph's add_edge (graph/state.py) refuses END as a source and START as a target, in
    # a join too ("END cannot be a start node", "START cannot be an end node"); ours refused
    # them in a single edge only: a join from END was taken (its target never ran, silently),
    # a join to START failed compile() as "no path to END". A router on END and a path_map to
    # START are refused too (LangGraph's compile() refuses the first as an unknown node, the
    # second as an unknown target), where ours reported unreachable nodes.
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", logger("a")).add_node("b", logger("b"))
        graph.add_edge(g.START, "a").add_edge(g.START, "b")
        if mistake == "a join from END":
            return graph.add_edge(["a", g.END], "b")
        if mistake == "a join to START":
            return graph.add_edge(["a", "b"], g.START)
        if mistake == "a router on END":
            return graph.add_conditional_edges(g.END, lambda s: "a")
        return graph.add_conditional_edges("a", lambda s: "x", {"x": g.START, "y": "b"})

    with pytest.raises(ValueError):
        build(THEIRS).compile()
    with pytest.raises(GraphValidationError, match=message):
        build(OURS)


# -- test_state.py: schemas read from the annotations of nodes and routers -----------------


class Question(TypedDict):
    question: str


class Output(TypedDict):
    input_state: Question


class FooState(Question):
    foo: str


async def test_state_schema_with_type_hint() -> None:
    # LangGraph: test_state.py::test_state_schema_with_type_hint (the nodes whose first
    # parameter says FooState see its keys; a second parameter without a hint is the config
    # there, our NodeContext here)
    def build(g: Any) -> Any:
        def complete_hint(state: Question) -> Output:
            return {"input_state": state}

        def miss_first_hint(state, config) -> Output:
            return {"input_state": dict(state)}

        def miss_all_hint(state, config):
            return {"input_state": dict(state)}

        def pre_foo(_: Any) -> FooState:
            return {"foo": "bar"}

        def pre_bar(_: Any) -> FooState:
            return {"foo": "bar"}

        class Foo:
            def __call__(self, state: FooState) -> Output:
                state = dict(state)
                assert state.pop("foo") == "bar"
                return {"input_state": state}

        class Bar:
            def my_node(self, state: FooState) -> Output:
                state = dict(state)
                assert state.pop("foo") == "bar"
                return {"input_state": state}

        graph = g.StateGraph(Question, output_schema=Output)
        actions = [complete_hint, miss_first_hint, miss_all_hint, pre_foo, Foo(), pre_bar]
        actions.append(Bar().my_node)
        names = [getattr(a, "__name__", type(a).__name__) for a in actions]
        for name, action in zip(names, actions, strict=True):
            graph.add_node(name, action)
        graph.set_entry_point(names[0])
        for before, after in itertools.pairwise(names):
            graph.add_edge(before, after)
        return graph.set_finish_point(names[-1])

    ours, theirs = pair(build, None)
    data = {"question": "Hello World!"}
    theirs_items = [c async for c in theirs.astream(data, stream_mode="updates")]
    ours_items = [c async for c in ours.stream(data, mode="updates")]
    assert ours_items == theirs_items
    assert ours_items[3] == {"pre_foo": {"foo": "bar"}}
    assert ours_items[4] == {"Foo": {"input_state": data}}


class Overall(TypedDict, total=False):
    foo: Annotated[int, operator.add]
    bar: str


class Private(TypedDict):
    baz: str


async def test_input_schema_conditional_edge() -> None:
    # LangGraph: test_state.py::test_input_schema_conditional_edge (a node's private key
    # "baz"; node_2 writes a key of no schema, which LangGraph drops; ours refuses an unknown
    # key, docs/graph.md "State": "a key that is not a field is an InvalidUpdateError")
    def build(g: Any, extra: dict[str, Any]) -> Any:
        def node_1(state: Overall) -> dict[str, Any]:
            return {"foo": 1, "baz": "bar"}

        def node_2(state: Private) -> dict[str, Any]:
            return {"foo": 1, "bar": state["baz"], **extra}

        def node_3(state: Overall) -> dict[str, Any]:
            return {"foo": 1}

        def router(state: Overall) -> str:
            assert state == {"foo": 2, "bar": "bar"}
            return "node_3" if state["foo"] == 2 else "__end__"

        graph = g.StateGraph(Overall).add_node(node_1).add_node(node_2).add_node(node_3)
        graph.add_conditional_edges("node_2", router)
        return graph.add_edge("__start__", "node_1").add_edge("node_1", "node_2")

    theirs = build(THEIRS, {"something_else": "meow"}).compile()
    assert await theirs.ainvoke({"foo": 0}) == {"foo": 3, "bar": "bar"}
    ours = build(OURS, {}).compile()
    assert (await ours.run({"foo": 0})).state == {"foo": 3, "bar": "bar"}
    refused = await build(OURS, {"something_else": "meow"}).compile().run({"foo": 0})
    assert isinstance(refused.error, InvalidUpdateError)
    assert "something_else" in str(refused.error)


class Node2State(TypedDict):
    foo: Annotated[int, operator.add]
    baz: str


async def test_private_input_schema_conditional_edge() -> None:
    # LangGraph: test_state.py::test_private_input_schema_conditional_edge
    def build(g: Any) -> Any:
        def node_1(state: Overall) -> dict[str, Any]:
            return {"foo": 1, "baz": "meow"}

        def node_2(state: Node2State) -> dict[str, Any]:
            return {"foo": 1, "bar": state["baz"]}

        def router(state: Private) -> str:
            assert state == {"baz": "meow"}
            return "node_2" if state["baz"] == "meow" else "__end__"

        graph = g.StateGraph(Overall).add_node(node_1).add_node(node_2)
        graph.add_conditional_edges("node_1", router)
        return graph.add_edge("__start__", "node_1")

    ours, theirs = pair(build, None)
    result = await ours.run({"foo": 0})
    assert result.state == await theirs.ainvoke({"foo": 0}) == {"foo": 2, "bar": "meow"}


async def test_interruption_without_state_updates(checkpointer: Checkpointer) -> None:
    # LangGraph: test_interruption.py::test_interruption_without_state_updates (nodes that
    # write nothing, interrupt_after="*")
    class Input(TypedDict):
        input: str

    def build(g: Any) -> Any:
        graph = g.StateGraph(Input)
        for name in ("step_1", "step_2", "step_3"):
            graph.add_node(name, lambda s: None)
        graph.add_edge(g.START, "step_1").add_edge("step_1", "step_2")
        return graph.add_edge("step_2", "step_3").add_edge("step_3", g.END)

    ours, theirs = pair(build, checkpointer, interrupt_after="*")
    data: Any = {"input": "hello world"}
    for expected_next in [("step_2",), ("step_3",), ()]:
        await theirs.ainvoke(data, cfg())
        await ours.run(data, thread_id="1")
        data = None
        mine, their = await ours.get_state("1"), await theirs.aget_state(cfg())
        assert mine.next == their.next == expected_next
        assert [(h.step, h.next) for h in await ours.history("1")] == [
            (h.metadata["step"], h.next) async for h in theirs.aget_state_history(cfg())
        ]


async def test_parent_command_from_nested_subgraph() -> None:
    # LangGraph: test_parent_command_async.py::test_parent_command_from_nested_subgraph (two
    # graphs called from a node; one returns Command(graph=PARENT, goto=...), and the calling
    # node stops there). Ours needs the goto target declared on the calling node, or
    # compile() refuses it as unreachable (docs/graph.md, "Nodes": destinations=)
    class Parent(TypedDict):
        jump_from_idx: int

    class Child(TypedDict):
        jump: bool

    def build(g: Any) -> Any:
        async def child_node(state: Any) -> Any:
            if state["jump"]:
                return g.Command(graph=g.Command.PARENT, goto="parent_second")
            return state

        child_0 = g.StateGraph(Child).add_node("node", child_node).add_edge(g.START, "node")
        child_1 = g.StateGraph(Child).add_node("node", child_node).add_edge(g.START, "node")
        child_0, child_1 = child_0.compile(), child_1.compile()

        async def parent_first(state: Any, *config: Any) -> Any:
            call = child_0.run if g is OURS else child_0.ainvoke
            await call({"jump": state["jump_from_idx"] == 1}, *config)
            if state["jump_from_idx"] == 1:
                raise AssertionError("Shouldn't be here")
            call = child_1.run if g is OURS else child_1.ainvoke
            await call({"jump": state["jump_from_idx"] == 2}, *config)
            if state["jump_from_idx"] == 2:
                raise AssertionError("Shouldn't be here")
            return state

        async def first_with_config(state: Any, config: RunnableConfig) -> Any:
            return await parent_first(state, config)

        graph = g.StateGraph(Parent)
        if g is OURS:
            graph.add_node("parent_first", parent_first, destinations=["parent_second"])
        else:
            graph.add_node("parent_first", first_with_config)
        graph.add_node("parent_second", lambda s: s).add_edge(g.START, "parent_first")
        return graph.add_edge("parent_second", g.END)

    ours, theirs = pair(build, None)
    for idx in (1, 2, 3):
        out = await theirs.ainvoke({"jump_from_idx": idx}, {"recursion_limit": 10})
        result = await ours.run({"jump_from_idx": idx}, recursion_limit=10)
        assert result.state == out == {"jump_from_idx": idx}


async def test_a_node_reads_its_config_as_langgraphs_runnable_config(
    checkpointer: Checkpointer,
) -> None:
    # a LangGraph node that takes `config: RunnableConfig` reads the thread, its node and
    # step from it; ours got a NodeContext there, which `config["configurable"]` failed on
    def build(g: Any) -> Any:
        def node(state: Any, config: RunnableConfig) -> dict[str, Any]:
            meta = config.get("metadata", {})
            ns = config["configurable"]["checkpoint_ns"]
            seen = [config["configurable"]["thread_id"], meta["langgraph_node"]]
            seen += [str(meta["langgraph_step"]), ns.split(":")[0], meta["thread_id"]]
            return {"log": ["|".join(seen)]}

        graph = g.StateGraph(Log).add_node("a", node).add_node("b", node)
        return graph.add_edge(g.START, "a").add_edge("a", "b")

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg("t"))
    result = await ours.run({"log": []}, thread_id="t")
    assert result.state == out == {"log": ["t|a|1|a|t", "t|b|2|b|t"]}


async def test_a_router_reads_its_config_as_langgraphs_runnable_config(
    checkpointer: Checkpointer,
) -> None:
    # a LangGraph router may take `config` too (it runs in its node's task, so it reads that
    # task's node and step); ours called it with the state alone: a TypeError
    seen: dict[int, list[str]] = {id(OURS): [], id(THEIRS): []}

    def build(g: Any) -> Any:
        def route(state: Any, config: RunnableConfig) -> Any:
            meta = config["metadata"]
            thread = config["configurable"]["thread_id"]
            seen[id(g)].append(f"{thread} {meta['langgraph_node']}@{meta['langgraph_step']}")
            if len(state["log"]) > 2:
                return g.END
            return "a" if thread == "t" else "b"

        def node(state: Any, config: RunnableConfig) -> dict[str, Any]:
            return {"log": [config["metadata"]["langgraph_node"]]}

        graph = g.StateGraph(Log).add_node("a", node).add_node("b", node)
        graph.set_conditional_entry_point(route, ["a", "b"])
        return graph.add_conditional_edges("a", route, ["a", "b", g.END])

    ours, theirs = pair(build, checkpointer)
    for thread in ("t", "u"):
        out = await theirs.ainvoke({"log": []}, cfg(thread))
        result = await ours.run({"log": []}, thread_id=thread)
        assert result.state == out == {"log": ["a", "a", "a"] if thread == "t" else ["b"]}
    assert seen[id(OURS)] == seen[id(THEIRS)]


class Asked(TypedDict, total=False):
    q: str


class AskedOut(TypedDict, total=False):
    q: str
    extra: str


class AskedIn(TypedDict, total=False):
    q: str
    inonly: str


class Secret(TypedDict, total=False):
    secret: str


async def test_nodes_and_routers_see_the_state_schemas_keys_only() -> None:
    # LangGraph (graph/state.py: a node's input schema defaults to the state schema, and its
    # reader reads those channels only): the keys of the input and output schemas and the
    # private keys of other nodes' input schemas are channels, yet a node or router without
    # a schema of its own does not see them; one annotated with a schema sees its keys
    def build(g: Any, seen: list[Any]) -> Any:
        def one(state: Asked) -> dict[str, Any]:
            seen.append(("one", sorted(state)))
            return {"extra": "E", "secret": "s"}

        def two(state: Secret) -> dict[str, Any]:
            seen.append(("two", sorted(state)))
            return {"q": "2"}

        def three(state):
            seen.append(("three", sorted(state)))
            return {}

        def four(state: AskedOut) -> dict[str, Any]:
            seen.append(("four", sorted(state)))
            return {}

        def route(state):
            seen.append(("route", sorted(state)))
            return "four"

        graph = g.StateGraph(Asked, input_schema=AskedIn, output_schema=AskedOut)
        graph.add_node("one", one).add_node("two", two).add_node("three", three)
        graph.add_node("four", four).add_edge(g.START, "one").add_edge("one", "two")
        return graph.add_edge("two", "three").add_conditional_edges("three", route)

    theirs_seen: list[Any] = []
    ours_seen: list[Any] = []
    theirs = build(THEIRS, theirs_seen).compile()
    ours = build(OURS, ours_seen).compile()
    out = await theirs.ainvoke({"q": "x", "inonly": "i"})
    result = await ours.run({"q": "x", "inonly": "i"})
    assert result.state == out == {"q": "2", "extra": "E"}
    assert ours_seen == theirs_seen
    assert ours_seen == [
        ("one", ["q"]),
        ("two", ["secret"]),
        ("three", ["q"]),
        ("route", ["q"]),
        ("four", ["extra", "q"]),
    ]


# -- fan-outs: Sends from two routers, a join after a router, a conditional entry point -------


async def test_concurrent_emit_sends() -> None:
    # LangGraph: test_concurrent_emit_sends, with a TypedDict state (a root-channel state is
    # not supported: docs/graph.md, "State")
    def build(g: Any) -> Any:
        def node(name: str) -> Any:
            async def call(state: Any) -> dict[str, Any]:
                if isinstance(state, dict) and "log" in state:
                    return {"log": [name]}
                return {"log": [f"{name}|{state['n']}"]}

            return call

        async def send_for_fun(state: Any) -> list[Any]:
            return [g.Send("2", {"n": 1}), g.Send("2", {"n": 2}), "3.1"]

        async def send_for_profit(state: Any) -> list[Any]:
            return [g.Send("2", {"n": 3}), g.Send("2", {"n": 4})]

        async def route_to_three(state: Any) -> Literal["3"]:
            return "3"

        graph = g.StateGraph(Log)
        for name in ("1", "1.1", "2", "3", "3.1"):
            graph.add_node(name, node(name))
        graph.add_edge(g.START, "1").add_edge(g.START, "1.1")
        graph.add_conditional_edges("1", send_for_fun)
        graph.add_conditional_edges("1.1", send_for_profit)
        return graph.add_conditional_edges("2", route_to_three)

    ours, theirs = pair(build, None)
    out = await theirs.ainvoke({"log": ["0"]})
    result = await ours.run({"log": ["0"]})
    assert result.state == out
    assert out["log"] == ["0", "1", "1.1", "3.1", "2|1", "2|2", "2|3", "2|4", "3"]


def sorted_add(x: list[str], y: list[str] | list[tuple[str, str]]) -> list[str]:
    if isinstance(y[0], tuple):
        for rem, _ in y:
            x.remove(rem)
        y = [t[1] for t in y]
    return sorted(operator.add(x, y))


class Query(TypedDict, total=False):
    query: str
    answer: str
    docs: Annotated[list[str], sorted_add]


async def test_in_one_fan_out_state_graph_waiting_edge_multiple_cond_edge() -> None:
    # LangGraph: test_in_one_fan_out_state_graph_waiting_edge_multiple_cond_edge
    def build(g: Any) -> Any:
        async def rewrite_query(data: Query) -> Query:
            return {"query": f"query: {data['query']}"}

        async def retriever_picker(data: Query) -> list[str]:
            return ["analyzer_one", "retriever_two"]

        async def analyzer_one(data: Query) -> Query:
            return {"query": f"analyzed: {data['query']}"}

        async def retriever_one(data: Query) -> Query:
            return {"docs": ["doc1", "doc2"]}

        async def retriever_two(data: Query) -> Query:
            await asyncio.sleep(0.05)
            return {"docs": ["doc3", "doc4"]}

        async def qa(data: Query) -> Query:
            return {"answer": ",".join(data["docs"])}

        async def decider(data: Query) -> None:
            return None

        def decider_cond(data: Query) -> str:
            return "qa" if data["query"].count("analyzed") > 1 else "rewrite_query"

        workflow = g.StateGraph(Query)
        for fn in (rewrite_query, analyzer_one, retriever_one, retriever_two, decider, qa):
            workflow.add_node(fn.__name__, fn)
        workflow.set_entry_point("rewrite_query")
        workflow.add_conditional_edges("rewrite_query", retriever_picker)
        workflow.add_edge("analyzer_one", "retriever_one")
        workflow.add_edge(["retriever_one", "retriever_two"], "decider")
        workflow.add_conditional_edges("decider", decider_cond)
        return workflow.set_finish_point("qa")

    ours, theirs = pair(build, None)
    data = {"query": "what is weather in sf"}
    out = await theirs.ainvoke(data)
    assert (await ours.run(data)).state == out
    assert out["answer"] == "doc1,doc1,doc2,doc2,doc3,doc3,doc4,doc4"
    theirs_items = [c async for c in theirs.astream(data)]
    assert [c async for c in ours.stream(data, mode="updates")] == theirs_items
    assert {"decider": None} in theirs_items


async def test_conditional_entrypoint_graph_state() -> None:
    # LangGraph: test_conditional_entrypoint_graph_state
    class Agent(TypedDict, total=False):
        input: str
        output: str
        steps: Annotated[list[str], operator.add]

    def build(g: Any) -> Any:
        async def left(data: Any) -> dict[str, Any]:
            return {"output": data["input"] + "->left"}

        async def right(data: Any) -> dict[str, Any]:
            return {"output": data["input"] + "->right"}

        def should_start(data: Any) -> str:
            assert data["steps"] == [], "Expected input to be read from the state"
            return "go-right" if len(data["input"]) > 10 else "go-left"

        workflow = g.StateGraph(Agent).add_node("left", left).add_node("right", right)
        workflow.set_conditional_entry_point(should_start, {"go-left": "left", "go-right": "right"})
        workflow.add_conditional_edges("left", lambda data: g.END)
        return workflow.add_edge("right", g.END)

    ours, theirs = pair(build, None)
    data = {"input": "what is weather in sf"}
    out = await theirs.ainvoke(data)
    assert (
        (await ours.run(data)).state
        == out
        == {**data, "output": data["input"] + "->right", "steps": []}
    )
    theirs_items = [c async for c in theirs.astream(data)]
    assert [c async for c in ours.stream(data, mode="updates")] == theirs_items


# -- a resume map naming a task's first interrupt ------------------------------------------


@pytest.mark.parametrize("nested", [False, True])
async def test_a_tasks_first_interrupt_id_answers_its_next_interrupt(
    checkpointer: Checkpointer, nested: bool
) -> None:
    # LangGraph's resume map (pregel/_algo.py, _scratchpad: "Older versions gave all of a
    # task's interrupts the first id") reads a task's first interrupt id as its next
    # interrupt's, so code that keeps the id of a node's first question answers the node's
    # later ones with it; ours refused it as "no pending interrupt with id ..."
    def build(g: Any) -> Any:
        def ask(state: Any) -> dict[str, Any]:
            return {"log": [g.interrupt("first?"), g.interrupt("second?")]}

        graph = g.StateGraph(Log).add_node("ask", ask).add_edge(g.START, "ask")
        if not nested:
            return graph
        return g.StateGraph(Log).add_node("sub", graph.compile()).add_edge(g.START, "sub")

    ours, theirs = pair(build, checkpointer)
    first_theirs = (await theirs.ainvoke({"log": []}, cfg()))["__interrupt__"][0].id
    first_ours = (await ours.run({"log": []}, thread_id="1")).interrupts[0].id
    out = await theirs.ainvoke(THEIRS.Command(resume={first_theirs: "A"}), cfg())
    result = await ours.run(Command(resume={first_ours: "A"}), thread_id="1")
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    assert result.interrupts[0].id != first_ours  # each question has an id of its own
    out = await theirs.ainvoke(THEIRS.Command(resume={first_theirs: "B"}), cfg())
    result = await ours.run(Command(resume={first_ours: "B"}), thread_id="1")
    assert result.state == out == {"log": ["A", "B"]}


async def test_update_state_as_a_node_the_graph_does_not_have(checkpointer: Checkpointer) -> None:
    # LangGraph's update_state (pregel/main.py) raises InvalidUpdateError("Node zzz does not
    # exist"); ours raised a bare GraphError: it is an InvalidUpdateError now (still a
    # GraphError), naming the nodes there are, and changes nothing
    ours, theirs = pair(lambda g: route_to(g, "b"), checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    with pytest.raises(lg_errors.InvalidUpdateError, match="does not exist"):
        await theirs.aupdate_state(cfg(), {"log": ["x"]}, as_node="zzz")
    head = (await ours.get_state("1")).checkpoint_id
    with pytest.raises(InvalidUpdateError, match=r"as_node='zzz'\): no such node \(nodes: a, b"):
        await ours.update_state("1", {"log": ["x"]}, as_node="zzz")
    assert (await ours.get_state("1")).checkpoint_id == head


# -- a step part-way through: a Send and a node, one of them asking ------------------------


class Market(TypedDict, total=False):
    my_key: Annotated[str, operator.add]
    market: str


def market_graph(g: Any, calls: list[str]) -> Any:
    """LangGraph: test_partial_pending_checkpoint. START sends ``tool_one`` the state and
    triggers ``tool_two``, which asks in the DE market (it has a retry policy: an interrupt
    is not retried)."""

    def tool_one(s: Any) -> dict[str, Any]:
        return {"my_key": " one"}

    def tool_two_node(s: Any) -> dict[str, Any]:
        calls.append("tool_two")
        answer = g.interrupt("Just because...") if s["market"] == "DE" else " all good"
        return {"my_key": answer}

    def start(state: Any) -> list[Any]:
        return ["tool_two", g.Send("tool_one", state)]

    policy = lg_types.RetryPolicy() if g is THEIRS else RetryPolicy()
    graph = g.StateGraph(Market).add_node("tool_two", tool_two_node, retry_policy=policy)
    return graph.add_node("tool_one", tool_one).set_conditional_entry_point(start)


async def test_partial_pending_checkpoint(checkpointer: Checkpointer) -> None:
    # LangGraph: test_partial_pending_checkpoint (its runs with a checkpointer; ours refuses
    # interrupt() without one, docs/graph.md "Running")
    calls: dict[int, list[str]] = {id(OURS): [], id(THEIRS): []}
    ours, theirs = (
        market_graph(g, calls[id(g)]).compile(checkpointer=cp)
        for g, cp in ((OURS, checkpointer), (THEIRS, lg_memory.InMemorySaver()))
    )
    data = {"my_key": "value ⛰️", "market": "DE"}
    theirs_items = [c async for c in theirs.astream(data, cfg("2"))]
    ours_items = [c async for c in ours.stream(data, thread_id="2", mode="updates")]
    assert sorted(map(repr, plain(ours_items))) == sorted(map(repr, plain(theirs_items)))
    assert calls[id(OURS)] == calls[id(THEIRS)] == ["tool_two"]  # an interrupt is not retried
    resume = " my answer"
    theirs_items = [c async for c in theirs.astream(THEIRS.Command(resume=resume), cfg("2"))]
    ours_items = [
        c async for c in ours.stream(Command(resume=resume), thread_id="2", mode="updates")
    ]
    assert (
        ours_items
        == theirs_items
        == [
            {"tool_one": {"my_key": " one"}, "__metadata__": {"cached": True}},
            {"tool_two": {"my_key": " my answer"}},
        ]
    )

    # interrupt, then clear the interrupt and the next tasks: finished tasks are kept
    out = await theirs.ainvoke(data, cfg("1"))
    result = await ours.run(data, thread_id="1")
    assert result.state == values(out) == {"my_key": "value ⛰️ one", "market": "DE"}
    mine, their = await ours.get_state("1"), await theirs.aget_state(cfg("1"))
    assert mine.values == their.values and mine.next == their.next == ("tool_two",)
    assert [(t.name, t.result) for t in mine.tasks] == [(t.name, t.result) for t in their.tasks]
    await theirs.aupdate_state(cfg("1"), None, as_node=THEIRS.END)
    await ours.update_state("1", None, as_node=END)
    mine, their = await ours.get_state("1"), await theirs.aget_state(cfg("1"))
    assert mine.values == their.values == {"my_key": "value ⛰️ one", "market": "DE"}
    assert mine.next == their.next == () and mine.tasks == their.tasks == ()
    assert mine.interrupts == their.interrupts == ()
    assert (mine.source, mine.step) == (their.metadata["source"], their.metadata["step"])


async def test_node_not_cancelled_on_other_node_interrupted(checkpointer: Checkpointer) -> None:
    # LangGraph: test_node_not_cancelled_on_other_node_interrupted
    class Hello(TypedDict):
        hello: Annotated[str, operator.add]

    runs: dict[int, list[str]] = {id(OURS): [], id(THEIRS): []}

    def build(g: Any) -> Any:
        async def awhile(state: Any) -> dict[str, Any]:
            try:
                await asyncio.sleep(0.2)
            except asyncio.CancelledError:
                runs[id(g)].append("cancelled")
                raise
            runs[id(g)].append("awhile")
            return {"hello": " again"}

        async def iambad(state: Any) -> dict[str, Any]:
            return {"hello": g.interrupt("I am bad")}

        graph = g.StateGraph(Hello).add_node("agent", awhile).add_node("bad", iambad)
        return graph.set_conditional_entry_point(lambda _: ["agent", "bad"])

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"hello": "world"}, cfg())
    result = await ours.run({"hello": "world"}, thread_id="1")
    assert result.state == values(out) == {"hello": "world again"}
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == values(out) == {"hello": "world again"}
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    out = await theirs.ainvoke(THEIRS.Command(resume=" okay"), cfg())
    result = await ours.run(Command(resume=" okay"), thread_id="1")
    assert result.state == out == {"hello": "world again okay"}
    assert runs[id(OURS)] == runs[id(THEIRS)] == ["awhile"]


async def test_update_state_as_end_keeps_what_the_finished_tasks_wrote(
    make_checkpointer: Any,
) -> None:
    # the update of test_partial_pending_checkpoint given values too (LangGraph refuses
    # values with as_node=END; ours takes them as the thread's last word, docs/graph.md
    # "Reading and changing a thread"): the finished task's write stays, then the update's,
    # in one channel, and a checkpoint of deltas or a snapshot reads them back alike
    for snapshot_every in (1, 50):
        cp = await make_checkpointer(snapshot_every=snapshot_every)
        thread = f"t{snapshot_every}"
        graph = half_paused(OURS).compile(checkpointer=cp)
        await graph.run({"log": []}, thread_id=thread)
        assert (await graph.get_state(thread)).values == {"log": ["other"]}
        await graph.update_state(thread, {"log": ["closed"]}, as_node=END)
        snapshot = await graph.get_state(thread)
        assert snapshot.values == {"log": ["other", "closed"]}
        assert snapshot.next == () and snapshot.interrupts == ()
        result = await graph.run(None, thread_id=thread)
        assert result.status == "completed" and result.state == {"log": ["other", "closed"]}
        again = half_paused(OURS).compile(checkpointer=cp)
        assert (await again.get_state(thread)).values == {"log": ["other", "closed"]}


def half_paused(g: Any) -> Any:
    """``asker`` pauses while ``other`` finishes, in one step."""

    def asker(state: Any) -> dict[str, Any]:
        return {"log": ["asker:" + g.interrupt("q")]}

    graph = g.StateGraph(Log).add_node("asker", asker).add_node("other", logger("other"))
    return graph.add_edge(g.START, "asker").add_edge(g.START, "other")


async def test_update_state_as_end_follows_the_finished_tasks_edges(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph's update_state(None, as_node=END) (pregel/main.py, "clear all tasks") applies
    # the writes of the step's tasks that finished, their edges with them, and drops the
    # unfinished ones: "other" finished, so "after" (its edge) and "jumped" (its Command's
    # goto) are next, while the paused "asker" is dropped. Ours ended the thread there
    def build(g: Any) -> Any:
        def asker(state: Any) -> dict[str, Any]:
            return {"log": ["asker:" + g.interrupt("q")]}

        def other(state: Any) -> Any:
            return g.Command(update={"log": ["other"]}, goto="jumped")

        graph = g.StateGraph(Log).add_node("asker", asker)
        graph.add_node("other", other, destinations=("jumped",))
        graph.add_node("after", logger("after")).add_node("jumped", logger("j"))
        graph.add_edge(g.START, "asker").add_edge(g.START, "other")
        return graph.add_edge("other", "after")

    ours, theirs = pair(build, checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    await theirs.aupdate_state(cfg(), None, as_node=THEIRS.END)
    await ours.update_state("1", None, as_node=END)
    mine, their = await ours.get_state("1"), await theirs.aget_state(cfg())
    assert mine.values == their.values == {"log": ["other"]}
    assert mine.next == their.next == ("after", "jumped")
    assert mine.interrupts == their.interrupts == ()
    assert (mine.step, mine.source) == (their.metadata["step"], their.metadata["source"])
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.status == "completed"
    assert result.state == values(out) == {"log": ["other", "after", "j"]}


@pytest.mark.parametrize("as_node", [END, "c"])
async def test_a_thread_that_update_state_as_end_started_has_no_input_to_run(
    as_node: str, checkpointer: Checkpointer
) -> None:
    # LangGraph's update_state(None, as_node=END) on a new thread (or as a node whose edges
    # lead to END) saves a checkpoint that wrote nothing, and invoke(None) there raises
    # EmptyInputError ("Received no input for __start__"), as on a thread with no checkpoint;
    # ours completed with nothing run
    calls: list[str] = []
    ours, theirs = pair(lambda g: abc_graph(g, calls), checkpointer)
    await theirs.aupdate_state(cfg(), None, as_node=as_node)
    await ours.update_state("1", None, as_node=as_node)
    mine, their = await ours.get_state("1"), await theirs.aget_state(cfg())
    assert mine.values == their.values == {"log": []} and mine.next == their.next == ()
    with pytest.raises(lg_errors.EmptyInputError, match="no input"):
        await theirs.ainvoke(None, cfg())
    with pytest.raises(GraphError, match="pass an input to start it"):
        await ours.run(None, thread_id="1")
    assert calls == []
    # an input starts it, in both
    out = await theirs.ainvoke({"log": ["go"]}, cfg())
    result = await ours.run({"log": ["go"]}, thread_id="1")
    assert result.state == out == {"log": ["go", "a", "b", "c"]}


async def test_update_state_as_end_at_a_past_checkpoint_applies_that_steps_writes(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph's update_state(past config, None, as_node=END) takes that checkpoint's tasks
    # as finished with the writes they recorded (they ran since), and follows their edges:
    # at "next: b" the update holds b's write and c is next. Ours rewound there and ended the
    # thread, dropping b (or, at the input's checkpoint, the input) and all that followed
    for age in range(5):  # the head, each step's checkpoint, the input's
        calls: list[str] = []
        ours, theirs = pair(lambda g, calls=calls: abc_graph(g, calls), checkpointer)
        thread = f"t{age}"
        await theirs.ainvoke({"log": ["x"]}, cfg(thread))
        await ours.run({"log": ["x"]}, thread_id=thread)
        past = [s async for s in theirs.aget_state_history(cfg(thread))][age]
        mine = (await ours.history(thread))[age]
        assert mine.next == past.next and mine.source == past.metadata["source"]
        await theirs.aupdate_state(past.config, None, as_node=THEIRS.END)
        await ours.update_state(thread, None, as_node=END, checkpoint_id=mine.checkpoint_id)
        their, now = await theirs.aget_state(cfg(thread)), await ours.get_state(thread)
        assert (now.values, now.next) == (their.values, their.next), age
        assert (now.step, now.source) == (their.metadata["step"], their.metadata["source"])
        calls.clear()
        out = await theirs.ainvoke(None, cfg(thread))
        result = await ours.run(None, thread_id=thread)
        assert result.state == out == {"log": ["x", "a", "b", "c"]}
        assert calls[: len(calls) // 2] == calls[len(calls) // 2 :]  # the same nodes ran again


async def test_update_state_as_end_at_a_past_fan_out_step(checkpointer: Checkpointer) -> None:
    # the same at a step of two tasks, one of which paused and was answered later: both are
    # done at that checkpoint, and the join after them is next
    def build(g: Any) -> Any:
        def asker(state: Any) -> dict[str, Any]:
            return {"log": ["asker:" + g.interrupt("q")]}

        graph = g.StateGraph(Log).add_node("first", logger("first")).add_node("asker", asker)
        graph.add_node("other", logger("other")).add_node("join", logger("join"))
        graph.add_edge(g.START, "first").add_edge("first", "asker").add_edge("first", "other")
        return graph.add_edge(["asker", "other"], "join")

    for age in (1, 2, 3):  # the checkpoints before join, before the fan-out, before first
        ours, theirs = pair(build, checkpointer)
        thread = f"t{age}"
        for given in ({"log": ["x"]}, THEIRS.Command(resume="y")):
            await theirs.ainvoke(given, cfg(thread))
        for given in ({"log": ["x"]}, Command(resume="y")):
            await ours.run(given, thread_id=thread)
        past = [s async for s in theirs.aget_state_history(cfg(thread))][age]
        mine = (await ours.history(thread))[age]
        assert mine.next == past.next
        await theirs.aupdate_state(past.config, None, as_node=THEIRS.END)
        await ours.update_state(thread, None, as_node=END, checkpoint_id=mine.checkpoint_id)
        their, now = await theirs.aget_state(cfg(thread)), await ours.get_state(thread)
        assert (now.values, now.next, now.step) == (
            their.values,
            their.next,
            their.metadata["step"],
        )
        out = await theirs.ainvoke(None, cfg(thread))
        result = await ours.run(None, thread_id=thread)
        assert result.state == values(out)
        assert [i.value for i in result.interrupts] == [
            i.value for i in out.get("__interrupt__", ())
        ]


class SubMarket(TypedDict, total=False):
    my_key: str
    market: str


async def test_dynamic_interrupt_subgraph(checkpointer: Checkpointer) -> None:
    # LangGraph: test_dynamic_interrupt_subgraph (its runs with a checkpointer)
    calls: dict[int, list[str]] = {id(OURS): [], id(THEIRS): []}

    def build(g: Any) -> Any:
        def tool_two_node(s: Any) -> dict[str, Any]:
            calls[id(g)].append("do")
            answer = g.interrupt("Just because...") if s["market"] == "DE" else " all good"
            return {"my_key": answer}

        policy = lg_types.RetryPolicy() if g is THEIRS else RetryPolicy()
        sub = g.StateGraph(SubMarket).add_node("do", tool_two_node, retry_policy=policy)
        sub.add_edge(g.START, "do")
        graph = g.StateGraph(Market).add_node("tool_two", sub.compile())
        return graph.add_edge(g.START, "tool_two")

    ours, theirs = pair(build, checkpointer)
    data = {"my_key": "value ⛰️", "market": "DE"}
    theirs_items = [c async for c in theirs.astream(data, cfg("2"))]
    ours_items = [c async for c in ours.stream(data, thread_id="2", mode="updates")]
    assert plain(ours_items) == plain(theirs_items) == [{"__interrupt__": ["Just because..."]}]
    assert calls[id(OURS)] == calls[id(THEIRS)] == ["do"]  # an interrupt is not retried
    theirs_items = [c async for c in theirs.astream(THEIRS.Command(resume=" my answer"), cfg("2"))]
    ours_items = [
        c async for c in ours.stream(Command(resume=" my answer"), thread_id="2", mode="updates")
    ]
    # a sub-graph gives back what it changed, LangGraph's its whole output (docs/graph.md,
    # "Sub-graphs"): "market" it was given is not in our update
    assert theirs_items == [{"tool_two": {"my_key": " my answer", "market": "DE"}}]
    assert ours_items == [{"tool_two": {"my_key": " my answer"}}]
    assert (await ours.get_state("2")).values == (await theirs.aget_state(cfg("2"))).values

    # interrupt, then clear it and the next tasks
    await theirs.ainvoke(data, cfg("1"))
    await ours.run(data, thread_id="1")
    mine, their = await ours.get_state("1"), await theirs.aget_state(cfg("1"))
    assert mine.values == their.values and mine.next == their.next == ("tool_two",)
    assert [i.value for i in mine.interrupts] == [i.value for i in their.interrupts]
    await theirs.aupdate_state(cfg("1"), None, as_node=THEIRS.END)
    await ours.update_state("1", None, as_node=END)
    mine, their = await ours.get_state("1"), await theirs.aget_state(cfg("1"))
    assert mine.values == their.values == data
    assert mine.next == their.next == () and mine.interrupts == their.interrupts == ()
    assert (mine.source, mine.step) == (their.metadata["source"], their.metadata["step"])


# -- node names given as a str enum --------------------------------------------------------


class NodeName(str, enum.Enum):  # noqa: UP042 (a StrEnum's str() is its value; this one's is not)
    BAZ = "baz"
    QUX = "qux"


class FooBar(TypedDict, total=False):
    foo: str
    bar: str


class FooBarLog(FooBar, total=False):
    log: Annotated[list[str], operator.add]


async def test_enum_node_names() -> None:
    # LangGraph: test_pregel.py::test_enum_node_names
    def build(g: Any) -> Any:
        def baz(state: Any) -> dict[str, Any]:
            return {"bar": state["foo"] + "!"}

        graph = g.StateGraph(FooBar).add_node(NodeName.BAZ, baz)
        return graph.add_edge(g.START, NodeName.BAZ).add_edge(NodeName.BAZ, g.END)

    ours, theirs = pair(build, None)
    out = await theirs.ainvoke({"foo": "hello"})
    assert (await ours.run({"foo": "hello"})).state == out == {"foo": "hello", "bar": "hello!"}


@pytest.mark.parametrize("how", ["edge", "router", "send", "goto"])
async def test_enum_node_names_across_an_interrupt(checkpointer: Checkpointer, how: str) -> None:
    # test_enum_node_names with a question: the node named by an enum member (by an edge, a
    # router's result, a Send or a Command's goto) pauses, and the answer reaches it. Ours
    # gave its task another id once the name came back from the checkpoint as plain text
    # ("baz", not NodeName.BAZ), so the answer never reached it: the run asked again
    def build(g: Any) -> Any:
        def baz(state: Any) -> dict[str, Any]:
            return {"bar": state["foo"] + "!" + g.interrupt("q?")}

        def start(state: Any) -> Any:
            if how == "goto":
                return g.Command(goto=NodeName.BAZ)
            return {"log": ["start"]}

        graph = g.StateGraph(FooBarLog).add_node(NodeName.BAZ, baz)
        graph.add_node("start", start, destinations=[NodeName.BAZ]).add_edge(g.START, "start")
        graph.add_node(NodeName.QUX, logger("qux")).add_edge(NodeName.BAZ, NodeName.QUX)
        if how == "edge":
            graph.add_edge("start", NodeName.BAZ)
        elif how == "router":
            graph.add_conditional_edges("start", lambda s: NodeName.BAZ, [NodeName.BAZ])
        elif how == "send":
            graph.add_conditional_edges("start", lambda s: [g.Send(NodeName.BAZ, dict(s))])
        return graph

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"foo": "hello"}, cfg())
    result = await ours.run({"foo": "hello"}, thread_id="1")
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    out = await theirs.ainvoke(THEIRS.Command(resume="x"), cfg())
    result = await ours.run(Command(resume="x"), thread_id="1")
    assert result.status == "completed"
    assert result.state == out
    assert out["bar"] == "hello!x" and out["log"][-1] == "qux"


# -- a reducer that cannot take (current, update) ------------------------------------------


def one_arg_reducer(a: Any) -> Any:
    return a


def three_arg_reducer(a: Any, b: Any, c: Any) -> Any:
    return a


class OneArg(TypedDict):
    hello: Annotated[str, one_arg_reducer]


class ThreeArgs(TypedDict):
    hello: Annotated[str, three_arg_reducer]


@pytest.mark.parametrize("state", [OneArg, ThreeArgs])
def test_a_reducer_that_cannot_take_two_values_is_refused(state: Any) -> None:
    # LangGraph: test_pregel.py::test_graph_validation ("Invalid reducer signature. Expected
    # (a, b) -> c"), raised by StateGraph(); ours took such a reducer and failed the first
    # step that wrote the channel. It is a ConfigurationError now (ours, like every schema
    # error; LangGraph's is a ValueError), naming the field
    with pytest.raises(ValueError, match="Invalid reducer signature"):
        THEIRS.StateGraph(state)
    with pytest.raises(ConfigurationError, match=r"reducer of 'hello'.*\(current, update\)"):
        OURS.StateGraph(state)


def with_default(a: Any, b: Any, c: Any = None) -> Any:
    return a + b


def varargs(*values: Any) -> Any:
    return values[0] + values[1]


class Fine(TypedDict):
    a: Annotated[int, with_default]
    b: Annotated[int, varargs]
    c: Annotated[set[str], set.union]  # a builtin whose signature cannot be read
    d: Annotated[int, max]


def test_reducers_that_take_two_values_are_taken() -> None:
    OURS.StateGraph(Fine)


# -- Sends to a pydantic sub-graph whose nodes ask, answered one at a time -----------------


class ChildPrompt(BaseModel):
    prompt: str = Field(..., description="What is going to be asked to the user?")
    human_input: str | None = Field(None, description="What the human said")
    human_inputs: Annotated[list[str], operator.add] = Field(default_factory=list)


class ParentPrompts(BaseModel):
    prompts: list[str] = Field(..., description="What is going to be asked to the user?")
    human_inputs: Annotated[list[str], operator.add] = Field(default_factory=list)


def prompts_graph(g: Any, askers: int) -> Any:
    """LangGraph: test_pregel.py::test_parallel_interrupts (``askers=1``) and
    test_parallel_interrupts_double (``askers=2``: two parallel nodes of the child ask)."""

    def get_human_input(state: ChildPrompt) -> dict[str, Any]:
        human_input = g.interrupt(state.prompt)
        return {"human_input": human_input, "human_inputs": [human_input]}

    def get_dolphin_input(state: ChildPrompt) -> dict[str, Any]:
        return {"human_inputs": [g.interrupt(state.prompt)]}

    child = g.StateGraph(ChildPrompt).add_node("get_human_input", get_human_input)
    child.add_edge(g.START, "get_human_input")
    if askers == 2:
        child.add_node("get_dolphin_input", get_dolphin_input)
        child.add_edge(g.START, "get_dolphin_input")

    def assign_workers(state: ParentPrompts) -> list[Any]:
        return [g.Send("child_graph", {"prompt": prompt}) for prompt in state.prompts]

    def cleanup(state: ParentPrompts) -> None:
        assert len(state.human_inputs) == len(state.prompts) * askers

    parent = g.StateGraph(ParentPrompts).add_node("child_graph", child.compile())
    parent.add_node("cleanup", cleanup)
    parent.add_conditional_edges(g.START, assign_workers, ["child_graph"])
    return parent.add_edge("child_graph", "cleanup").add_edge("cleanup", g.END)


@pytest.mark.parametrize("askers", [1, 2])
async def test_parallel_interrupts(checkpointer: Checkpointer, askers: int) -> None:
    # LangGraph: test_parallel_interrupts / test_parallel_interrupts_double: answer the first
    # question streamed each time, until no question is left
    async def drive(graph: Any, stream: Any, command: Any) -> list[list[Any]]:
        data: Any = {"prompts": ["a", "b"]}
        rounds: list[list[Any]] = []
        for _ in range(10):
            events = [e async for e in stream(graph, data)]
            rounds.append(sorted(map(repr, plain(events))))
            asked = [i for e in events if "__interrupt__" in e for i in e["__interrupt__"]]
            if not asked:
                return rounds
            data = command(resume={asked[0].id: f"Resume #{len(rounds)}"})
        raise AssertionError("Detected infinite loop")

    ours, theirs = pair(lambda g: prompts_graph(g, askers), checkpointer)
    theirs_rounds = await drive(
        theirs, lambda gr, d: gr.astream(d, cfg(), stream_mode="updates"), THEIRS.Command
    )
    ours_rounds = await drive(
        ours, lambda gr, d: gr.stream(d, thread_id="1", mode="updates"), Command
    )
    assert len(ours_rounds) == len(theirs_rounds) == 2 * askers + 1
    # which question streams first (and so which gets which answer) is the tasks' timing
    final = (await ours.get_state("1")).values
    theirs_final = (await theirs.aget_state(cfg())).values
    assert final["prompts"] == theirs_final["prompts"] == ["a", "b"]
    answers = [f"Resume #{n}" for n in range(1, 2 * askers + 1)]
    assert sorted(final["human_inputs"]) == sorted(theirs_final["human_inputs"]) == answers


class Dialog(TypedDict):
    dialog_state: Annotated[list[str], operator.add]


async def test_parent_command_goto_deeply_nested(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_parent_command_goto_deeply_nested: Command.PARENT from
    # a sub-sub-graph goes to its immediate parent's node. LangGraph's sub-graph gives back
    # its whole state, so its input shows twice ("State duplication occurs due to
    # operator.add merging behavior"); ours gives back what it changed (docs/graph.md,
    # "Sub-graphs")
    def build(g: Any) -> Any:
        def sub_sub_child_node(state: Any) -> Any:
            return g.Command(
                graph=g.Command.PARENT,
                goto="sub_child_3",
                update={"dialog_state": ["sub_sub_child"]},
            )

        sub_sub = g.StateGraph(Dialog).add_node("sub_sub_child", sub_sub_child_node)
        sub_sub = sub_sub.add_edge(g.START, "sub_sub_child").compile(name="sub_sub_graph")
        sub = g.StateGraph(Dialog)
        sub.add_node("sub_child_1", lambda s: {"dialog_state": ["sub_child_1"]})
        sub.add_node("sub_child_2", sub_sub, destinations=("sub_child_3",))
        sub.add_node("sub_child_3", lambda s: {"dialog_state": ["sub_child_3"]})
        sub.add_edge(g.START, "sub_child_1").add_edge("sub_child_1", "sub_child_2")
        graph = g.StateGraph(Dialog).add_node("child_1", lambda s: {"dialog_state": ["child_1"]})
        graph.add_node("child_2", sub.compile(name="sub_graph"))
        return graph.add_edge(g.START, "child_1").add_edge("child_1", "child_2")

    ours, theirs = pair(build, checkpointer, name="main_graph")
    out = await theirs.ainvoke({"dialog_state": ["init"]}, cfg())
    result = await ours.run({"dialog_state": ["init"]}, thread_id="1")
    assert out["dialog_state"] == [
        "init", "child_1", "init", "child_1", "sub_child_1", "sub_sub_child", "sub_child_3"
    ]  # fmt: skip
    assert result.state["dialog_state"] == [
        "init", "child_1", "sub_child_1", "sub_sub_child", "sub_child_3"
    ]  # fmt: skip


# -- a node returning Commands and dicts in one list ---------------------------------------


class FooAdd(TypedDict):
    foo: Annotated[str, operator.add]


async def test_dict_mixed_return(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_dict_mixed_return: a node's list holding a Command and a
    # dict of updates (LangGraph reads each item that is no Command as a node's output); ours
    # took a list of Commands only and failed the node
    def build(g: Any) -> Any:
        def my_node(state: Any) -> Any:
            return [g.Command(update={"foo": "a"}), {"foo": "b"}, None]

        return g.StateGraph(FooAdd).add_node(my_node).add_edge(g.START, "my_node")

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"foo": ""}, cfg())
    result = await ours.run({"foo": ""}, thread_id="1")
    assert result.state == out == {"foo": "ab"}
    theirs_items = [c async for c in theirs.astream({"foo": ""}, cfg("2"))]
    ours_items = [c async for c in ours.stream({"foo": ""}, thread_id="2", mode="updates")]
    assert ours_items == theirs_items


async def test_a_send_in_a_nodes_list_fails() -> None:
    # LangGraph drops a Send in a node's list of Commands silently (it reads the item as a
    # node's output, and a Send writes nothing); ours refuses it as it refuses a node that
    # returns a Send, with an InvalidUpdateError that says how to route
    def build(g: Any) -> Any:
        def my_node(state: Any) -> Any:
            return [g.Command(update={"foo": "a"}), g.Send("my_node", {})]

        return g.StateGraph(FooAdd).add_node(my_node).add_edge(g.START, "my_node")

    ours, theirs = pair(build, None)
    assert await theirs.ainvoke({"foo": ""}) == {"foo": "a"}
    result = await ours.run({"foo": ""})
    assert isinstance(result.error, InvalidUpdateError)
    assert "holding a Send" in str(result.error)
    assert result.state == {"foo": ""}


@pytest.mark.parametrize("case", range(4))
async def test_the_update_of_a_list_of_commands_in_the_stream(case: int) -> None:
    # LangGraph's updates stream (pregel/_io.py, map_output_updates) shows a node's list of
    # Commands as the updates of those that wrote: a list of several, one alone as the
    # node's update, None for none; ours listed every Command's, None for those that did not
    # write ({"n": [{"foo": "a"}, None]})
    def build(g: Any) -> Any:
        returned = [
            [g.Command(update={"foo": "a"}), g.Command(goto="n2")],
            [g.Command(goto="n2"), g.Command(update={"foo": "a"})],
            [g.Command(update={"foo": "a"}), g.Command(update={"foo": "b"}, goto="n2")],
            [g.Command(goto="n2"), g.Command(goto="n2")],
        ][case]
        graph = g.StateGraph(FooAdd).add_node("n", lambda s: returned, destinations=["n2"])
        return graph.add_node("n2", lambda s: {"foo": "n2"}).add_edge(g.START, "n")

    ours, theirs = pair(build, None)
    theirs_items = [c async for c in theirs.astream({"foo": ""})]
    assert [c async for c in ours.stream({"foo": ""}, mode="updates")] == theirs_items


async def test_a_bad_command_in_a_nodes_list_writes_nothing(checkpointer: Checkpointer) -> None:
    # a list whose second Command goes to a node the graph does not have fails the node; the
    # first Command's update was applied all the same in ours (the run's state held it)
    def bad(state: Any) -> Any:
        return [Command(update={"foo": "a"}), Command(goto="nowhere")]

    graph = StateGraph(FooAdd).add_node("bad", bad).add_edge(START, "bad")
    compiled = graph.compile(checkpointer=checkpointer)
    result = await compiled.run({"foo": ""}, thread_id="1")
    assert isinstance(result.error, InvalidRouteError)
    assert result.state == (await compiled.get_state("1")).values == {"foo": ""}


# -- a pydantic state with input and output schemas, a node returning another model --------


class InnerObject(BaseModel):
    yo: int


class QueryModel(BaseModel):
    query: str


class PydQuery(QueryModel):
    inner: InnerObject
    answer: str | None = None
    docs: Annotated[list[str], sorted_add]


class PydQueryUpdate(BaseModel):
    query: str | None = None
    answer: str | None = None
    docs: list[str] | None = None


class PydQueryInput(QueryModel):
    inner: InnerObject


class PydQueryOutput(BaseModel):
    answer: str
    docs: list[str]


def pydantic_fan_out(g: Any) -> Any:
    """LangGraph: test_pregel.py::test_in_one_fan_out_state_graph_waiting_edge_custom_state_
    class_pydantic_input (``analyzer_one`` returns an instance of another model)."""

    def rewrite_query(data: PydQuery) -> dict[str, Any]:
        return {"query": f"query: {data.query}"}

    def analyzer_one(data: PydQuery) -> Any:
        return PydQueryUpdate(query=f"analyzed: {data.query}")

    def retriever_one(data: PydQuery) -> dict[str, Any]:
        return {"docs": ["doc1", "doc2"]}

    async def retriever_two(data: PydQuery) -> dict[str, Any]:
        await asyncio.sleep(0.05)
        return {"docs": ["doc3", "doc4"]}

    def qa(data: PydQuery) -> dict[str, Any]:
        return {"answer": ",".join(data.docs)}

    def decider(data: PydQuery) -> str:
        assert isinstance(data, PydQuery)
        return "retriever_two"

    workflow = g.StateGraph(PydQuery, input_schema=PydQueryInput, output_schema=PydQueryOutput)
    for fn in (rewrite_query, analyzer_one, retriever_one, retriever_two, qa):
        workflow.add_node(fn.__name__, fn)
    workflow.set_entry_point("rewrite_query")
    workflow.add_edge("rewrite_query", "analyzer_one").add_edge("analyzer_one", "retriever_one")
    workflow.add_conditional_edges("rewrite_query", decider, {"retriever_two": "retriever_two"})
    workflow.add_edge(["retriever_one", "retriever_two"], "qa")
    return workflow.set_finish_point("qa")


async def test_in_one_fan_out_state_graph_waiting_edge_custom_state_class_pydantic_input(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel.py::test_in_one_fan_out_state_graph_waiting_edge_custom_state_
    # class_pydantic_input
    data = PydQueryInput(query="what is weather in sf", inner=InnerObject(yo=1))
    ours, theirs = pair(pydantic_fan_out, None)
    out = await theirs.ainvoke(data)
    assert (await ours.run(data)).state == out
    assert out == {"docs": ["doc1", "doc2", "doc3", "doc4"], "answer": "doc1,doc2,doc3,doc4"}
    theirs_items = [c async for c in theirs.astream(data)]
    assert [c async for c in ours.stream(data, mode="updates")] == theirs_items

    ours, theirs = pair(pydantic_fan_out, checkpointer, interrupt_after=["retriever_one"])
    theirs_items = [c async for c in theirs.astream(data, cfg())]
    assert [c async for c in ours.stream(data, thread_id="1", mode="updates")] == theirs_items
    assert theirs_items[-1] == {"__interrupt__": ()}
    theirs_items = [c async for c in theirs.astream(None, cfg())]
    assert [c async for c in ours.stream(None, thread_id="1", mode="updates")] == theirs_items
    await theirs.aupdate_state(cfg(), {"docs": ["doc5"]}, as_node="rewrite_query")
    await ours.update_state("1", {"docs": ["doc5"]}, as_node="rewrite_query")
    mine, their = await ours.get_state("1"), await theirs.aget_state(cfg())
    assert mine.values == their.values and mine.next == their.next


# -- a failing node cancels its running siblings -------------------------------------------


class Hello(TypedDict, total=False):
    hello: str


async def test_node_cancellation_on_other_node_exception(checkpointer: Checkpointer) -> None:
    # LangGraph: test_node_cancellation_on_other_node_exception(_two): a node that fails
    # cancels its sibling still running, and the run fails with that node's error at once:
    # the sibling would never end on its own (LangGraph's sleeps 5 s, and both runs were
    # given 2 s to fail, which a loaded machine could run past), so a run that ends at all
    # ended it; 60 s is a guard against a hang
    cancelled: list[str] = []

    def build(g: Any) -> Any:
        async def awhile(state: Any) -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append("agent")
                raise

        async def iambad(state: Any) -> None:
            raise ValueError("I am bad")

        graph = g.StateGraph(Hello).add_node("agent", awhile).add_node("bad", iambad)
        return graph.set_conditional_entry_point(lambda _: ["agent", "bad"])

    ours, theirs = pair(build, checkpointer)
    with pytest.raises(ValueError, match="I am bad"):
        await asyncio.wait_for(theirs.ainvoke({"hello": "world"}, cfg()), 60)
    assert cancelled == ["agent"]
    result = await asyncio.wait_for(ours.run({"hello": "world"}, thread_id="1"), 60)
    assert isinstance(result.error, ValueError) and str(result.error) == "I am bad"
    assert cancelled == ["agent", "agent"]
    snapshot = await ours.get_state("1")
    assert snapshot.next == ("agent", "bad")  # both run again on run(None)


class ChildSecret(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    secret: str


class LogExtra(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    extra: str


@pytest.mark.parametrize("key", ["private", "output only"])
async def test_a_sub_graph_node_starts_from_the_state_schemas_keys(key: str) -> None:
    # as a function node (test_nodes_and_routers_see_the_state_schemas_keys_only), a
    # sub-graph node without an input schema of its own starts from the parent's state
    # schema keys, as LangGraph's: a private key of another node, or a key only the output
    # schema has, does not reach the sub-graph even when its state has it
    def build(g: Any) -> Any:
        def writer(state: Log) -> dict[str, Any]:
            return {"secret": "s"} if key == "private" else {"extra": "E"}

        def reader(state: Secret) -> dict[str, Any]:
            return {"log": [f"reader {state.get('secret')}"]}

        def child(state: Any) -> dict[str, Any]:
            return {"log": [f"child sees {sorted(k for k in state if k != 'log')}"]}

        child_state = ChildSecret if key == "private" else LogExtra
        sub = g.StateGraph(child_state).add_node("c", child).add_edge(g.START, "c")
        io = {"output_schema": LogExtra} if key == "output only" else {}
        graph = g.StateGraph(Log, **io).add_node("writer", writer).add_node("reader", reader)
        graph.add_node("sub", sub.compile()).add_edge(g.START, "writer")
        return graph.add_edge("writer", "reader").add_edge("reader", "sub")

    ours, theirs = pair(build, None)
    out = await theirs.ainvoke({"log": []})
    result = await ours.run({"log": []})
    assert out["log"][-1] == result.state["log"][-1] == "child sees []"
