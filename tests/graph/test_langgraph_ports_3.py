"""Ports of LangGraph's tests, third round (``libs/langgraph/tests/test_pregel.py`` and
``test_pregel_async.py``, and the replay code of ``langgraph/pregel/_loop.py``): the same
program on LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.
Each test's comment names the LangGraph test or code it follows.

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture). A difference docs/graph.md documents is asserted as ours, with a
comment naming the section.
"""

from __future__ import annotations

import asyncio
import contextlib
import operator
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AnyMessage
from langgraph_kit import OURS, THEIRS, Log, cfg, lg_message, lg_types, pair, shape, values
from pydantic import BaseModel

from tinyagents.graph import RetryPolicy
from tinyagents.store.checkpoint import Checkpointer


def asks(g: Any) -> Any:
    """START → ask → END, ``ask`` logging the answer to its one question."""

    def ask(state: Any) -> dict[str, Any]:
        return {"log": [g.interrupt("?")]}

    return g.StateGraph(Log).add_node("ask", ask).add_edge(g.START, "ask").add_edge("ask", g.END)


async def steps(ours: Any, theirs: Any) -> tuple[list[Any], list[Any]]:
    """Each library's history as (source, step, next), newest first (ours, LangGraph's);
    our ``rewind`` is LangGraph's ``fork``."""
    theirs_h = [
        (s.metadata["source"], s.metadata["step"], s.next)
        async for s in theirs.aget_state_history(cfg())
    ]
    ours_h = [
        ("fork" if h.source == "rewind" else h.source, h.step, h.next)
        for h in await ours.history("1")
    ]
    return ours_h, theirs_h


# -- replaying the head ----------------------------------------------------------------------


async def test_a_replay_of_a_paused_update_head_saves_no_checkpoint(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: PregelLoop._first saves a "fork" when it time-travels, "Skip for
    # update_state forks (source=update/fork) since they already have their own fork
    # checkpoint". Ours saved a "rewind" there when the update's step was paused on a
    # question, so the steps after it were numbered one higher than LangGraph's.
    ours, theirs = pair(asks, checkpointer)
    c = await theirs.aupdate_state(cfg(), {"log": ["u"]})
    await ours.update_state("1", {"log": ["u"]})
    head = (await ours.history("1"))[0].checkpoint_id
    asked: list[Any] = []
    for _ in range(2):  # the first replay pauses on the question; the second replays that
        out = await theirs.ainvoke(None, c)
        result = await ours.run(None, thread_id="1", checkpoint_id=head)
        assert result.status == "interrupted"
        assert result.state == values(out) == {"log": ["u"]}
        asked.append(([i.id for i in result.interrupts], [i.id for i in out["__interrupt__"]]))
        ours_h, theirs_h = await steps(ours, theirs)
        assert ours_h == theirs_h == [("update", 0, ("ask",))]
    # the question asked again has the same id, in either library
    assert asked[0] == asked[1]
    out = await theirs.ainvoke(THEIRS.Command(resume="r"), cfg())
    result = await ours.run(OURS.Command(resume="r"), thread_id="1")
    assert result.state == out == {"log": ["u", "r"]}
    ours_h, theirs_h = await steps(ours, theirs)
    assert ours_h == theirs_h == [("loop", 1, ()), ("update", 0, ("ask",))]


async def test_a_replay_of_a_paused_replay_saves_no_second_checkpoint(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: PregelLoop._first (as above), for a head that is itself a replay's "fork"
    ours, theirs = pair(asks, checkpointer)
    await theirs.ainvoke({"log": ["in"]}, cfg())
    await ours.run({"log": ["in"]}, thread_id="1")
    # the head, paused in "ask": its replay saves a fork, then pauses in that step again
    before = await theirs.aget_state(cfg())
    ours_before = (await ours.history("1"))[0].checkpoint_id
    await theirs.ainvoke(None, before.config)
    await ours.run(None, thread_id="1", checkpoint_id=ours_before)
    fork = await theirs.aget_state(cfg())
    assert fork.metadata["source"] == "fork"
    head = (await ours.history("1"))[0]
    assert head.source == "rewind"
    head = head.checkpoint_id
    out = await theirs.ainvoke(None, fork.config)
    result = await ours.run(None, thread_id="1", checkpoint_id=head)
    assert result.state == values(out) == {"log": ["in"]}
    ours_h, theirs_h = await steps(ours, theirs)
    assert ours_h == theirs_h
    out = await theirs.ainvoke(THEIRS.Command(resume="r"), cfg())
    result = await ours.run(OURS.Command(resume="r"), thread_id="1")
    assert result.state == out == {"log": ["in", "r"]}
    ours_h, theirs_h = await steps(ours, theirs)
    assert ours_h == theirs_h


# -- Command: plans of gotos, a goto to END, pydantic updates --------------------------------


class Plan(TypedDict, total=False):
    plan: list[str | list[str]]
    messages: Annotated[list[AnyMessage], lg_message.add_messages]


def multistep_plan(g: Any) -> Any:
    def planner(state: Any) -> Any:
        if state.get("plan") is None:
            first_step, *plan = ["step1", ["step2", "step3"], "step4"]
            return g.Command(goto=first_step, update={"plan": plan})
        if state["plan"]:
            next_step, *next_plan = state["plan"]
            return g.Command(goto=next_step, update={"plan": next_plan})
        return None

    def step(name: str) -> Any:
        return lambda state: g.Command(goto="planner", update={"messages": [("human", name)]})

    # destinations=: ours refuses a node only a goto reaches, undeclared (docs/graph.md, "What
    # it does not do"), where LangGraph compiles it; LangGraph takes the declaration too
    names = ("step1", "step2", "step3", "step4")
    graph = g.StateGraph(Plan).add_node("planner", planner, destinations=names)
    for name in names:
        graph.add_node(name, step(name))
    return graph.add_edge(g.START, "planner")


async def test_a_plan_of_gotos_one_of_them_a_list(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_multistep_plan (a Command's goto of several nodes)
    ours, theirs = pair(multistep_plan, checkpointer)
    out = await theirs.ainvoke({"messages": [("human", "start")]}, cfg())
    result = await ours.run({"messages": [("human", "start")]}, thread_id="1")
    assert result.status == "completed"
    assert result.state["plan"] == out["plan"] == []
    assert [(type(m), m.content) for m in result.state["messages"]] == [
        (type(m), m.content) for m in out["messages"]
    ]
    assert [m.content for m in out["messages"]] == ["start", "step1", "step2", "step3", "step4"]
    ours_h, theirs_h = await steps(ours, theirs)
    assert ours_h == theirs_h


class FooBar(TypedDict):
    foo: str
    bar: str


def goto_end(g: Any) -> Any:
    graph = g.StateGraph(FooBar)
    # destinations=, as in multistep_plan: "b" is reached by a goto alone
    graph.add_node("a", lambda s: g.Command(goto="b", update={"foo": "bar"}), destinations=("b",))
    graph.add_node("b", lambda s: g.Command(goto=g.END, update={"bar": "baz"}))
    return graph.add_edge(g.START, "a")


async def test_nodes_that_route_by_command_alone_need_no_edges() -> None:
    # LangGraph: test_pregel.py::test_graph_validation_with_command (a graph whose nodes are
    # reached only by gotos compiles, ours once they are declared; a goto to END ends the run)
    ours, theirs = pair(goto_end, None)
    out = await theirs.ainvoke({"foo": ""})
    result = await ours.run({"foo": ""})
    assert result.state == out == {"foo": "bar", "bar": "baz"}


class MaybeFoo(BaseModel):
    foo: str | None


class FooAndBar(BaseModel):
    foo: str | None = None
    bar: str | None = None


def pydantic_command_none(g: Any) -> Any:
    graph = g.StateGraph(MaybeFoo)
    graph.add_node("node_a", lambda s: g.Command(update=MaybeFoo(foo=None)))
    return graph.add_edge(g.START, "node_a")


def pydantic_command_chain(g: Any) -> Any:
    graph = g.StateGraph(FooAndBar)
    graph.add_node("node_a", lambda s: FooAndBar(foo="foo"))
    graph.add_node("node_b", lambda s: g.Command(update=FooAndBar(bar="bar")))
    graph.add_edge(g.START, "node_a").add_edge("node_a", "node_b")
    return graph.add_edge("node_b", g.END)


async def test_a_command_whose_update_is_a_pydantic_state(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel.py::test_pydantic_state_update_command (a field set to None is
    # written; fields left unset are not)
    ours, theirs = pair(pydantic_command_none, checkpointer)
    out = await theirs.ainvoke({"foo": ""}, cfg())
    result = await ours.run({"foo": ""}, thread_id="1")
    assert result.state == out == {"foo": None}
    ours, theirs = pair(pydantic_command_chain, checkpointer)
    out = await theirs.ainvoke(FooAndBar(), cfg())
    result = await ours.run(FooAndBar(), thread_id="1")
    assert result.state == out == {"foo": "foo", "bar": "bar"}


# -- a sub-graph's Command.PARENT to its node's destinations ---------------------------------


class Foo(TypedDict):
    foo: Annotated[str, operator.add]


def destinations(g: Any, *, call: bool, as_dict: bool) -> Any:
    def node_a(state: Any) -> Any:
        goto = "node_b" if state["foo"] == "a" else "node_c"
        return g.Command(update={"foo": state["foo"]}, goto=goto, graph=g.Command.PARENT)

    subgraph = g.StateGraph(Foo).add_node("node_a", node_a).add_edge(g.START, "node_a").compile()

    async def call_subgraph(state: Any) -> Any:
        if g is THEIRS:
            return await subgraph.ainvoke(state)
        return (await subgraph.run(state)).state

    named: Any = {"node_b": "foo", "node_c": "bar"} if as_dict else ("node_b", "node_c")
    graph = g.StateGraph(Foo).add_edge(g.START, "child")
    graph.add_node("child", call_subgraph if call else subgraph, destinations=named)
    graph.add_node("node_b", lambda s: {"foo": "b"})
    return graph.add_node("node_c", lambda s: {"foo": "c"})


@pytest.mark.parametrize("call", [False, True], ids=["node", "called"])
@pytest.mark.parametrize("as_dict", [False, True], ids=["tuple", "dict"])
async def test_a_subgraph_goes_to_its_nodes_destinations(
    checkpointer: Checkpointer, call: bool, as_dict: bool
) -> None:
    # LangGraph: test_pregel.py::test_node_destinations (the sub-graph as a node, and called
    # from a node function; destinations as a tuple and as a dict). Its drawn edges are
    # checked in test_graph_builder.py; here the run.
    ours, theirs = pair(lambda g: destinations(g, call=call, as_dict=as_dict), checkpointer)
    out = await theirs.ainvoke({"foo": ""}, cfg())
    result = await ours.run({"foo": ""}, thread_id="1")
    assert result.state == out == {"foo": "c"}
    ours_h, theirs_h = await steps(ours, theirs)
    assert [n for _, _, n in ours_h] == [n for _, _, n in theirs_h]


# -- reducers: input through the reducer before the first node --------------------------------


class Hello(TypedDict):
    hello: str
    messages: Annotated[list[str], lg_message.add_messages]


class HelloSeq(TypedDict):
    hello: str
    messages: Annotated[Sequence[str], lg_message.add_messages]


@pytest.mark.parametrize("schema", [Hello, HelloSeq], ids=["list", "sequence"])
async def test_input_goes_through_the_reducer_before_the_first_node(schema: Any) -> None:
    # LangGraph: test_pregel.py::test_reducer_before_first_node (a message given as a string
    # is a HumanMessage with an id by the time the first node reads it)
    seen: dict[int, Any] = {}

    def build(g: Any) -> Any:
        def node_a(state: Any) -> None:
            seen[id(g)] = state

        graph = g.StateGraph(schema).add_node("a", node_a)
        graph.set_entry_point("a")
        graph.set_finish_point("a")
        return graph

    ours, theirs = pair(build, None)
    out = await theirs.ainvoke({"hello": "there", "messages": "hello"})
    result = await ours.run({"hello": "there", "messages": "hello"})

    def shown(state: Any) -> Any:
        return state["hello"], [(type(m).__name__, m.content) for m in state["messages"]]

    assert shown(result.state) == shown(out) == ("there", [("HumanMessage", "hello")])
    assert shown(seen[id(OURS)]) == shown(seen[id(THEIRS)]) == shown(out)
    assert all(m.id for m in result.state["messages"])


# -- sub-graphs: an interrupt inside one, a nested graph's streams ---------------------------


class Baz(TypedDict):
    baz: str


def interrupting_subgraph(g: Any) -> Any:
    def bar(state: Any) -> dict[str, Any]:
        return {"baz": g.interrupt("Please provide baz value:")}

    child = g.StateGraph(Baz).add_node("bar", bar).add_edge(g.START, "bar")
    graph = g.StateGraph(Baz).add_node("foo", lambda s: {"baz": "foo"})
    graph.add_node("bar", child.compile())
    return graph.add_edge(g.START, "foo").add_edge("foo", "bar")


async def test_an_interrupt_in_a_subgraph_node(checkpointer: Checkpointer) -> None:
    # LangGraph: test_pregel_async.py::test_interrupt_subgraph (LangGraph's asserts only that
    # each call returns something; here the values, the question, the paused sub-graph's
    # namespace and the history are compared)
    ours, theirs = pair(interrupting_subgraph, checkpointer)
    out = await theirs.ainvoke({"baz": ""}, cfg())
    result = await ours.run({"baz": ""}, thread_id="1")
    assert result.status == "interrupted"
    assert result.state == values(out) == {"baz": "foo"}
    [theirs_question] = out["__interrupt__"]
    [question] = result.interrupts
    assert question.value == theirs_question.value == "Please provide baz value:"
    theirs_state = await theirs.aget_state(cfg(), subgraphs=True)
    state = await ours.get_state("1", subgraphs=True)
    assert state.next == theirs_state.next == ("bar",)
    [theirs_task], [task] = theirs_state.tasks, state.tasks
    assert shape(task.state.ns) == shape(theirs_task.state.config["configurable"]["checkpoint_ns"])
    assert task.state.values == theirs_task.state.values == {"baz": "foo"}
    out = await theirs.ainvoke(THEIRS.Command(resume="bar"), cfg())
    result = await ours.run(OURS.Command(resume="bar"), thread_id="1")
    assert result.state == out == {"baz": "bar"}
    ours_h, theirs_h = await steps(ours, theirs)
    assert ours_h == theirs_h


class Inner(TypedDict):
    my_key: str
    my_other_key: str


class Outer(TypedDict):
    my_key: str
    never_called: Any


def never_called(state: Any) -> None:
    raise AssertionError("This function should never be called")


def nested(g: Any) -> Any:
    def up(state: Any) -> dict[str, Any]:
        return {"my_key": state["my_key"] + " there", "my_other_key": state["my_key"]}

    inner = g.StateGraph(Inner).add_node("up", up)
    inner.set_entry_point("up")
    inner.set_finish_point("up")

    async def side(state: Any) -> dict[str, Any]:
        return {"my_key": state["my_key"] + " and back again"}

    graph = g.StateGraph(Outer).add_node("inner", inner.compile()).add_node("side", side)
    graph.set_entry_point("inner")
    graph.add_edge("inner", "side")
    graph.set_finish_point("side")
    return graph


async def test_a_nested_graph_and_its_streams() -> None:
    # LangGraph: test_pregel_async.py::test_nested_graph (a value in the state the sub-graph
    # does not have, here a function, passes through untouched; the updates and values
    # streams; its astream_events part is LangChain's callbacks, which ours has not)
    ours, theirs = pair(nested, None)
    given = {"my_key": "my value", "never_called": never_called}
    out = await theirs.ainvoke(given)
    result = await ours.run(given)
    assert (
        result.state
        == out
        == {
            "my_key": "my value there and back again",
            "never_called": never_called,
        }
    )
    theirs_updates = [c async for c in theirs.astream(given)]
    ours_updates = [c async for c in ours.stream(given, mode="updates")]
    assert (
        ours_updates
        == theirs_updates
        == [
            {"inner": {"my_key": "my value there"}},
            {"side": {"my_key": "my value there and back again"}},
        ]
    )
    theirs_values = [c async for c in theirs.astream(given, stream_mode="values")]
    ours_values = [c async for c in ours.stream(given, mode="values")]
    assert ours_values == theirs_values
    assert [v["my_key"] for v in ours_values] == [
        "my value",
        "my value there",
        "my value there and back again",
    ]


# -- leaving a stream early ------------------------------------------------------------------


class Value(TypedDict):
    value: Annotated[int, operator.add]


def cancellable(g: Any, seen: dict[str, Any]) -> Any:
    started = asyncio.Event()
    seen.update(started=set(), cancelled=set())

    async def awhile(state: Any, name: str) -> None:
        seen["started"].add(name)
        started.set()
        try:
            await asyncio.Event().wait()  # never set: it runs until it is cancelled
        except asyncio.CancelledError:
            seen["cancelled"].add(name)
            raise

    async def alittlewhile(state: Any) -> dict[str, Any]:
        await started.wait()  # the parallel node is running by now
        return {"value": 2}

    async def later(state: Any) -> None:
        await awhile(state, "awhile")

    async def parallel(state: Any) -> None:
        await awhile(state, "aparallelwhile")

    graph = g.StateGraph(Value).add_node("awhile", later).add_node("aparallelwhile", parallel)
    graph.add_node("alittlewhile", alittlewhile).add_edge(g.START, "alittlewhile")
    graph.add_edge(g.START, "aparallelwhile")
    return graph.add_edge("alittlewhile", "awhile")


async def test_leaving_a_stream_early_cancels_the_running_nodes(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel_async.py::test_cancel_graph_astream (its nodes sleep; here they
    # wait on events). The node still running is cancelled, the next step never starts, and
    # the finished node's write is kept: the state shows it, the cancelled node is next.
    seen: dict[int, dict[str, Any]] = {id(OURS): {}, id(THEIRS): {}}
    ours, theirs = pair(lambda g: cancellable(g, seen[id(g)]), checkpointer)

    async def first(stream: Any, live: bool) -> Any:
        async with contextlib.aclosing(stream) as items:
            async for item in items:
                if not live:
                    return item
                if item[0] == "updates":
                    return item[1]

    theirs_first = await asyncio.wait_for(first(theirs.astream({"value": 1}, cfg()), False), 60)
    # ours reads "updates" between steps, a step's items when it ends (docs/graph.md,
    # "Streaming"); with a live mode beside it each comes as its node returns, as LangGraph's
    ours_first = await asyncio.wait_for(
        first(ours.stream({"value": 1}, thread_id="1", mode=["updates", "tasks"]), True), 60
    )
    assert ours_first == theirs_first == {"alittlewhile": {"value": 2}}
    for lib in (OURS, THEIRS):
        assert seen[id(lib)] == {"started": {"aparallelwhile"}, "cancelled": {"aparallelwhile"}}
    theirs_state = await theirs.aget_state(cfg())
    state = await ours.get_state("1")
    assert state.values == theirs_state.values == {"value": 3}
    assert state.next == theirs_state.next == ("aparallelwhile",)
    assert state.metadata["step"] == theirs_state.metadata["step"] == 0
    assert state.metadata["source"] == theirs_state.metadata["source"] == "loop"


# -- a join inside a loop --------------------------------------------------------------------


def sorted_add(x: list[str], y: list[str] | list[tuple[str, str]]) -> list[str]:
    if isinstance(y[0], tuple):
        for rem, _ in y:
            x.remove(rem)
        y = [t[1] for t in y]
    return sorted(operator.add(x, y))


class Docs(TypedDict, total=False):
    query: str
    answer: str
    docs: Annotated[list[str], sorted_add]


def join_in_a_loop(g: Any, rewrites: list[int]) -> Any:
    analyzed = asyncio.Event()

    def rewrite_query(data: Any) -> dict[str, Any]:
        rewrites.append(1)
        return {"query": f"query: {data['query']}"}

    async def analyzer_one(data: Any) -> dict[str, Any]:
        analyzed.set()
        return {"query": f"analyzed: {data['query']}"}

    def retriever_one(data: Any) -> dict[str, Any]:
        return {"docs": ["doc1", "doc2"]}

    async def retriever_two(data: Any) -> dict[str, Any]:
        await analyzed.wait()  # LangGraph's sleeps 0.1 s: analyzer_one finishes first
        analyzed.clear()
        return {"docs": ["doc3", "doc4"]}

    def decider_cond(data: Any) -> str:
        return "qa" if data["query"].count("analyzed") > 1 else "rewrite_query"

    workflow = g.StateGraph(Docs)
    for fn in (rewrite_query, analyzer_one, retriever_one, retriever_two):
        workflow.add_node(fn.__name__, fn)
    workflow.add_node("decider", lambda data: None)
    workflow.add_node("qa", lambda data: {"answer": ",".join(data["docs"])})
    workflow.set_entry_point("rewrite_query")
    workflow.add_edge("rewrite_query", "analyzer_one").add_edge("analyzer_one", "retriever_one")
    workflow.add_edge("rewrite_query", "retriever_two")
    workflow.add_edge(["retriever_one", "retriever_two"], "decider")
    workflow.add_conditional_edges("decider", decider_cond)
    return workflow.set_finish_point("qa")


async def test_a_join_inside_a_loop_waits_for_both_branches_each_round() -> None:
    # LangGraph: test_pregel.py::test_in_one_fan_out_state_graph_waiting_edge_multiple (without
    # its cache, which ours has not): the join fires once per round of the loop
    rewrites: dict[int, list[int]] = {id(OURS): [], id(THEIRS): []}
    ours, theirs = pair(lambda g: join_in_a_loop(g, rewrites[id(g)]), None)
    given = {"query": "what is weather in sf"}
    out = await asyncio.wait_for(theirs.ainvoke(given), 60)
    result = await asyncio.wait_for(ours.run(given), 60)
    assert (
        result.state
        == out
        == {
            "query": "analyzed: query: analyzed: query: what is weather in sf",
            "answer": "doc1,doc1,doc2,doc2,doc3,doc3,doc4,doc4",
            "docs": ["doc1", "doc1", "doc2", "doc2", "doc3", "doc3", "doc4", "doc4"],
        }
    )
    assert len(rewrites[id(OURS)]) == len(rewrites[id(THEIRS)]) == 2
    theirs_items = [c async for c in theirs.astream(given)]
    ours_items = [c async for c in ours.stream(given, mode="updates")]
    assert ours_items == theirs_items
    assert [next(iter(c)) for c in ours_items] == [
        "rewrite_query",
        "analyzer_one",
        "retriever_two",
        "retriever_one",
        "decider",
        "rewrite_query",
        "analyzer_one",
        "retriever_two",
        "retriever_one",
        "decider",
        "qa",
    ]


# -- forking the past with an empty update ---------------------------------------------------


class Messages(TypedDict):
    messages: Annotated[list[str], operator.add]


def entered(g: Any) -> Any:
    def node(name: str) -> Any:
        async def _node(state: Any) -> dict[str, Any]:
            return {"messages": [f"entered {name} node"]}

        return _node

    graph = g.StateGraph(Messages).add_node("one", node("one")).add_node("two", node("two"))
    return graph.add_edge(g.START, "one").add_edge("one", "two").add_edge("two", g.END)


async def test_an_empty_update_at_a_past_checkpoint_reruns_the_steps_after_it(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel_async.py::test_debug_retry (update_state(values=None) at the
    # checkpoint step 1 ran from, then a run from the update: the steps run again; its debug
    # stream, which ours has not, is left out: the history is compared instead, LangGraph's
    # listing its fork's checkpoints first, as ours keeps one line)
    ours, theirs = pair(entered, checkpointer)
    await theirs.ainvoke({"messages": []}, cfg())
    await ours.run({"messages": []}, thread_id="1")
    target = [s async for s in theirs.aget_state_history(cfg()) if s.metadata["step"] == 1]
    target_config = target[0].parent_config
    ours_target = next(h for h in await ours.history("1") if h.step == 1).parent_id
    assert ours_target is not None
    update_config = await theirs.aupdate_state(target_config, values=None)
    await ours.update_state("1", None, checkpoint_id=ours_target)
    out = await theirs.ainvoke(None, update_config)
    result = await ours.run(None, thread_id="1")
    assert result.state == out == {"messages": ["entered one node", "entered two node"]}
    ours_h, theirs_h = await steps(ours, theirs)
    assert ours_h == theirs_h
    assert ours_h[:3] == [("loop", 3, ()), ("loop", 2, ("two",)), ("update", 1, ("one",))]


# -- a retried node's writes on a thread, and a failed step's ---------------------------------


class Totals(TypedDict, total=False):
    input: int
    total: Annotated[int, operator.add]
    output: int


def retried_total(g: Any, errored: list[int]) -> Any:
    def one(state: Any) -> dict[str, Any]:
        value = state.get("total", 0) + state["input"]
        if value > 4 and not errored:
            errored.append(value)
            raise ConnectionError("I will be retried")
        if value > 10:
            raise ValueError("Input is too large")
        return {"output": value, "total": value}

    policy = (lg_types.RetryPolicy if g is THEIRS else RetryPolicy)(
        initial_interval=0, jitter=False
    )
    graph = g.StateGraph(Totals).add_node("one", one, retry_policy=policy)
    return graph.add_edge(g.START, "one").add_edge("one", g.END)


async def test_a_retried_node_on_a_thread_and_a_step_that_fails(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel_async.py::test_invoke_checkpoint (written there on Pregel's
    # channels; here on a StateGraph: "total" adds up, the node retried once on a
    # ConnectionError, and a ValueError, not retried, leaves the thread's state as it was)
    errored: dict[int, list[int]] = {id(OURS): [], id(THEIRS): []}
    ours, theirs = pair(lambda g: retried_total(g, errored[id(g)]), checkpointer)
    for given, output, total in ((2, 2, 2), (3, 5, 7)):
        out = await theirs.ainvoke({"input": given}, cfg())
        result = await ours.run({"input": given}, thread_id="1")
        assert result.state == out
        assert result.state["output"] == output and result.state["total"] == total
    assert errored[id(OURS)] == errored[id(THEIRS)] == [5]
    with pytest.raises(ValueError, match="Input is too large"):
        await theirs.ainvoke({"input": 4}, cfg())
    result = await ours.run({"input": 4}, thread_id="1")
    assert result.status == "failed"
    assert isinstance(result.error, ValueError)
    assert "Input is too large" in str(result.error)
    theirs_state = await theirs.aget_state(cfg())
    state = await ours.get_state("1")
    # the input is applied (its own checkpoint), the failed step writes nothing
    assert state.values == theirs_state.values == {"input": 4, "total": 7, "output": 5}
    assert state.next == theirs_state.next == ("one",)
    # a new thread starts from nothing
    out = await theirs.ainvoke({"input": 5}, cfg("2"))
    result = await ours.run({"input": 5}, thread_id="2")
    assert result.state == out == {"input": 5, "total": 5, "output": 5}
    assert (await ours.get_state("1")).values["total"] == 7


# -- Send: a node's own and its router's -----------------------------------------------------


class Fan(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    n: int


def sends_both_ways(g: Any, ask: bool) -> Any:
    def start(state: Any) -> Any:
        return g.Command(goto=[g.Send("w", {"n": 9})], update={"log": ["start"]})

    def fan(state: Any) -> list[Any]:
        return [g.Send("w", {"n": i}) for i in range(2)]

    def w(state: Any) -> dict[str, Any]:
        answer = g.interrupt(f"q{state['n']}") if ask else "auto"
        return {"log": [f"w{state['n']}:{answer}"]}

    graph = g.StateGraph(Fan).add_node("start", start, destinations=("w",)).add_node("w", w)
    graph.add_node("after", lambda s: {"log": ["after"]})
    graph.add_edge(g.START, "start").add_conditional_edges("start", fan, ["w"])
    return graph.add_edge("w", "after")


async def test_a_nodes_command_sends_come_before_its_routers(checkpointer: Checkpointer) -> None:
    # LangGraph: langgraph/graph/state.py, a node's writers (its Command's gotos,
    # _control_branch) come before the branches attach_branch adds to it, so a node's own
    # Sends are made, and run, before its router's. Ours planned the router's first: the w
    # tasks' writes went through the reducer in another order, and get_state().tasks and
    # the interrupts listed them so.
    ours, theirs = pair(lambda g: sends_both_ways(g, ask=False), checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.state == out
    assert out["log"] == ["start", "w9:auto", "w0:auto", "w1:auto", "after"]

    ours, theirs = pair(lambda g: sends_both_ways(g, ask=True), checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg("2"))
    result = await ours.run({"log": []}, thread_id="2")
    assert [i.value for i in result.interrupts] == [i.value for i in out["__interrupt__"]]
    theirs_state = await theirs.aget_state(cfg("2"))
    state = await ours.get_state("2")
    assert [[i.value for i in t.interrupts] for t in state.tasks] == [
        [i.value for i in t.interrupts] for t in theirs_state.tasks
    ]
    assert [t.interrupts[0].value for t in state.tasks] == ["q9", "q0", "q1"]
    theirs_answers = {i.id: f"a-{i.value}" for i in out["__interrupt__"]}
    answers = {i.id: f"a-{i.value}" for i in result.interrupts}
    out = await theirs.ainvoke(THEIRS.Command(resume=theirs_answers), cfg("2"))
    result = await ours.run(OURS.Command(resume=answers), thread_id="2")
    assert result.state == out
    assert out["log"] == ["start", "w9:a-q9", "w0:a-q0", "w1:a-q1", "after"]
