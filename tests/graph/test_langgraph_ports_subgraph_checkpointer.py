"""Ports of LangGraph's sub-graph checkpointer switches: ``compile(checkpointer=True)``, a
sub-graph that keeps its own state between calls, and ``compile(checkpointer=False)``, one
that is never checkpointed (``test_pregel_async.py::test_subgraph_checkpoint_true``,
``test_subgraph_checkpoint_true_interrupt``, ``test_multiple_subgraphs_checkpointer``,
``test_subgraph_persistence_async.py``, the stateful cases of ``test_time_travel.py``). The
same program on LangGraph and on ``tinyagents.graph``, compared, as in
``test_langgraph_ports.py``; ours on every checkpointer backend.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, cfg, lg_memory, pair, values

from tinyagents.errors import GraphError, GraphValidationError
from tinyagents.graph import Command, StateGraph
from tinyagents.store.checkpoint import Checkpointer


class Inner(TypedDict, total=False):
    my_key: Annotated[str, operator.add]
    my_other_key: str


class Outer(TypedDict, total=False):
    my_key: str


def looping(g: Any) -> Any:
    """``test_subgraph_checkpoint_true``: the parent runs its ``checkpointer=True``
    sub-graph node ``inner`` until its key holds "there" twice; the second run of the node
    goes on from the state the first left (its ``my_key`` reducer adds the new input)."""
    inner = g.StateGraph(Inner)
    inner.add_node("inner_1", lambda s: {"my_key": " got here", "my_other_key": s["my_key"]})
    inner.add_node("inner_2", lambda s: {"my_key": " and there"})
    inner.add_edge(g.START, "inner_1").add_edge("inner_1", "inner_2")
    graph = g.StateGraph(Outer).add_node("inner", inner.compile(checkpointer=True))
    graph.add_edge(g.START, "inner")
    graph.add_conditional_edges(
        "inner", lambda s: "inner" if s["my_key"].count("there") < 2 else g.END, ["inner", g.END]
    )
    return graph


async def test_a_persistent_sub_graph_node_goes_on_from_its_own_state(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(looping, checkpointer)
    expected = [
        (("inner",), {"inner_1": {"my_key": " got here", "my_other_key": ""}}),
        (("inner",), {"inner_2": {"my_key": " and there"}}),
        ((), {"inner": {"my_key": " got here and there"}}),
        (
            ("inner",),
            {
                "inner_1": {
                    "my_key": " got here",
                    "my_other_key": " got here and there got here and there",
                }
            },
        ),
        (("inner",), {"inner_2": {"my_key": " and there"}}),
        ((), {"inner": {"my_key": " got here and there got here and there got here and there"}}),
    ]
    theirs_items = [c async for c in theirs.astream({"my_key": ""}, cfg("2"), subgraphs=True)]
    ours_items = [
        c async for c in ours.stream({"my_key": ""}, thread_id="2", mode="updates", subgraphs=True)
    ]
    assert theirs_items == expected
    assert ours_items == expected
    # its checkpoints are in one namespace, the node's name, as LangGraph's "inner"
    info = await ours.history("2", ns="inner", limit=1)
    saver = theirs.checkpointer
    latest = saver.get_tuple(cfg("2", checkpoint_ns="inner"))
    assert info[0].next == () and latest.checkpoint["channel_values"]["my_key"].count("there") == 3
    assert (await ours.get_state("2")).values == (await theirs.aget_state(cfg("2"))).values


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


class Result(TypedDict, total=False):
    result: str
    seen: Annotated[list[list[str]], operator.add]


def caller(g: Any, *, asks: bool = False, **sub_compile: Any) -> Any:
    """``test_subgraph_persistence_async.py``: a node calls a sub-graph (compiled with
    ``sub_compile``) with one new topic per parent run and
    keeps what the call returned (``seen``); with ``asks`` the sub-graph's ``process`` node
    asks "continue?" first and a ``respond`` node says "Done"."""
    topics = iter(["apples", "bananas", "cherries"])

    def process(state: Any) -> dict[str, Any]:
        if asks:
            g.interrupt("continue?")
        return {"log": [f"Processing: {state['log'][-1]}"]}

    inner = g.StateGraph(Log).add_node("process", process).add_edge(g.START, "process")
    if asks:
        inner.add_node("respond", lambda s: {"log": ["Done"]}).add_edge("process", "respond")
    # (LangGraph's test wraps it in a graph of one sub-graph node; its operator.add state
    # would add the node's whole output again there, where ours adds what it appended)
    wrapped = inner.compile(**sub_compile)
    topic: list[str] = []

    async def call_inner(state: Any) -> dict[str, Any]:
        if not topic:  # one topic per parent run (a resumed node runs again from its top)
            topic.append(next(topics))
        if g is OURS:
            out = (await wrapped.run({"log": [f"tell me about {topic[0]}"]})).state
        else:
            out = await wrapped.ainvoke({"log": [f"tell me about {topic[0]}"]})
        topic.clear()
        return {"result": out["log"][-1], "seen": [out["log"]]}

    graph = g.StateGraph(Result).add_node("call_inner", call_inner)
    return graph.add_edge(g.START, "call_inner").add_edge("call_inner", g.END)


async def both(ours: Any, theirs: Any, input: Any, thread_id: str = "1") -> dict[str, Any]:
    """One run on each library, the same result (LangGraph's without ``__interrupt__``)."""
    out = await theirs.ainvoke(
        input if not isinstance(input, Command) else THEIRS.Command(resume=input.resume),
        cfg(thread_id),
    )
    result = await ours.run(input, thread_id=thread_id)
    assert result.state == values(out)
    assert result.status == ("interrupted" if "__interrupt__" in out else "completed")
    return result.state


async def test_a_persistent_sub_graph_keeps_its_state_across_parent_runs(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(lambda g: caller(g, checkpointer=True), checkpointer)
    await both(ours, theirs, {"result": ""})
    state = await both(ours, theirs, {"result": ""})
    assert state["result"] == "Processing: tell me about bananas"
    assert state["seen"] == [
        ["tell me about apples", "Processing: tell me about apples"],
        [
            "tell me about apples",
            "Processing: tell me about apples",
            "tell me about bananas",
            "Processing: tell me about bananas",
        ],
    ]
    # another thread starts from nothing: the state is the thread's
    other = await both(ours, theirs, {"result": ""}, thread_id="2")
    assert other["seen"] == [["tell me about cherries", "Processing: tell me about cherries"]]


@pytest.mark.parametrize("sub_checkpointer", [None, False])
async def test_a_default_or_unsaved_sub_graph_starts_afresh_every_call(
    checkpointer: Checkpointer, sub_checkpointer: bool | None
) -> None:
    ours, theirs = pair(lambda g: caller(g, checkpointer=sub_checkpointer), checkpointer)
    await both(ours, theirs, {"result": ""})
    state = await both(ours, theirs, {"result": ""})
    assert state["seen"] == [
        ["tell me about apples", "Processing: tell me about apples"],
        ["tell me about bananas", "Processing: tell me about bananas"],
    ]


async def test_a_persistent_sub_graph_pauses_and_keeps_its_state_across_resumes(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(lambda g: caller(g, asks=True, checkpointer=True), checkpointer)
    for _ in range(2):
        paused = await both(ours, theirs, {"result": ""})
        [question] = (await ours.get_state("1")).interrupts
        assert question.value == "continue?" and question.ns == "call_inner"
        state = await both(ours, theirs, Command(resume=True))
        assert state["result"] == "Done"
    assert paused == {"result": "", "seen": [state["seen"][0]]}
    assert state["seen"] == [
        ["tell me about apples", "Processing: tell me about apples", "Done"],
        [
            "tell me about apples",
            "Processing: tell me about apples",
            "Done",
            "tell me about bananas",
            "Processing: tell me about bananas",
            "Done",
        ],
    ]


class Sub(TypedDict, total=False):
    bar: str
    baz: str


class Parent(TypedDict, total=False):
    foo: str


def asks_in_call(g: Any) -> Any:
    """``test_subgraph_checkpoint_true_interrupt``: node_2 calls a ``checkpointer=True``
    sub-graph whose first node asks for ``baz``."""
    sub = g.StateGraph(Sub)
    sub.add_node("subgraph_node_1", lambda s: {"baz": g.interrupt("Provide baz value")})
    sub.add_node("subgraph_node_2", lambda s: {"bar": s["bar"] + s["baz"]})
    sub.add_edge(g.START, "subgraph_node_1").add_edge("subgraph_node_1", "subgraph_node_2")
    subgraph = sub.compile(checkpointer=True)

    async def node_2(state: Any) -> dict[str, Any]:
        if g is OURS:
            return {"foo": (await subgraph.run({"bar": state["foo"]})).state["bar"]}
        return {"foo": (await subgraph.ainvoke({"bar": state["foo"]}))["bar"]}

    graph = g.StateGraph(Parent).add_node("node_1", lambda s: {"foo": "hi! " + s["foo"]})
    graph.add_node("node_2", node_2)
    return graph.add_edge(g.START, "node_1").add_edge("node_1", "node_2")


async def test_an_interrupt_in_a_persistent_sub_graph_call_resumes(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(asks_in_call, checkpointer)
    assert await both(ours, theirs, {"foo": "foo"}) == {"foo": "hi! foo"}
    theirs_state = await theirs.aget_state(cfg(), subgraphs=True)
    ours_state = await ours.get_state("1", subgraphs=True)
    assert ours_state.tasks[0].state.values == theirs_state.tasks[0].state.values
    assert ours_state.tasks[0].state.values == {"bar": "hi! foo"}
    assert ours_state.tasks[0].state.ns == "node_2"  # no task id: the same for every call
    assert await both(ours, theirs, Command(resume="baz")) == {"foo": "hi! foobaz"}
    # a later run of node_2 is a new call: its input goes on from the saved state, and
    # the sub-graph asks again
    assert await both(ours, theirs, {"foo": "again"}) == {"foo": "hi! again"}
    ours_state = await ours.get_state("1", subgraphs=True)
    assert ours_state.tasks[0].state.values == {"bar": "hi! again", "baz": "baz"}
    assert await both(ours, theirs, Command(resume="!")) == {"foo": "hi! again!"}


class Counter(TypedDict, total=False):
    sub_counter: Annotated[int, operator.add]


class OtherCounter(TypedDict, total=False):
    other_sub_counter: Annotated[int, operator.add]


class ParentCounter(TypedDict, total=False):
    parent_counter: int


def two_calls(g: Any) -> Any:
    """``test_multiple_subgraphs_checkpointer``: one node calls a ``checkpointer=True``
    sub-graph, then a default one."""
    sub_1 = g.StateGraph(Counter).add_node("subgraph_node", lambda s: {"sub_counter": 2})
    sub_1 = sub_1.add_edge(g.START, "subgraph_node").compile(checkpointer=True)
    sub_2 = g.StateGraph(OtherCounter)
    sub_2.add_node("other_subgraph_node", lambda s: {"other_sub_counter": 3})
    sub_2 = sub_2.add_edge(g.START, "other_subgraph_node").compile()

    async def parent_node(state: Any) -> dict[str, Any]:
        if g is OURS:
            first = (await sub_1.run({"sub_counter": state["parent_counter"]})).state
            other = (await sub_2.run({"other_sub_counter": first["sub_counter"]})).state
        else:
            first = await sub_1.ainvoke({"sub_counter": state["parent_counter"]})
            other = await sub_2.ainvoke({"other_sub_counter": first["sub_counter"]})
        return {"parent_counter": other["other_sub_counter"]}

    graph = g.StateGraph(ParentCounter).add_node("parent_node", parent_node)
    return graph.add_edge(g.START, "parent_node")


async def test_a_persistent_and_a_default_sub_graph_called_by_one_node(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(two_calls, checkpointer)
    assert await both(ours, theirs, {"parent_counter": 0}) == {"parent_counter": 5}
    assert await both(ours, theirs, {"parent_counter": 0}) == {"parent_counter": 7}
    theirs_items = [
        c
        async for c in theirs.astream(
            {"parent_counter": 0}, cfg("2"), subgraphs=True, stream_mode="updates"
        )
    ]
    ours_items = [
        c
        async for c in ours.stream(
            {"parent_counter": 0}, thread_id="2", subgraphs=True, mode="updates"
        )
    ]
    for items in (theirs_items, ours_items):
        # the persistent call's namespace has no task id; the default call's has one, and
        # its number: the task's second call
        [(ns_1, item_1), (ns_2, item_2), (ns_3, item_3)] = items
        assert (ns_1, item_1) == (("parent_node",), {"subgraph_node": {"sub_counter": 2}})
        assert ns_2[0].startswith("parent_node:") and ns_2[1:] == ("1",)
        assert item_2 == {"other_subgraph_node": {"other_sub_counter": 3}}
        assert (ns_3, item_3) == ((), {"parent_node": {"parent_counter": 5}})


def fruit_and_veggie(g: Any) -> Any:
    """``test_stateful_namespace_isolation``: two persistent graphs called by one node, each
    keeping its own state (the second call's namespace is ``call_both|1``)."""

    def echo(prefix: str) -> Any:
        inner = g.StateGraph(Log).add_node("echo", lambda s: {"log": [f"{prefix}: {s['log'][-1]}"]})
        return inner.add_edge(g.START, "echo").compile(checkpointer=True)

    fruit, veggie = echo("Fruit"), echo("Veggie")
    rounds = iter(["round 1", "round 2"])

    async def call_both(state: Any) -> dict[str, Any]:
        suffix = next(rounds)
        if g is OURS:
            f = (await fruit.run({"log": [f"cherries {suffix}"]})).state
            v = (await veggie.run({"log": [f"broccoli {suffix}"]})).state
        else:
            f = await fruit.ainvoke({"log": [f"cherries {suffix}"]})
            v = await veggie.ainvoke({"log": [f"broccoli {suffix}"]})
        return {"result": f["log"][-1], "seen": [f["log"], v["log"]]}

    graph = g.StateGraph(Result).add_node("call_both", call_both)
    return graph.add_edge(g.START, "call_both")


async def test_two_persistent_sub_graphs_of_one_node_keep_separate_states(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(fruit_and_veggie, checkpointer)
    await both(ours, theirs, {"result": ""})
    state = await both(ours, theirs, {"result": ""})
    assert state["seen"][2:] == [
        [
            "cherries round 1",
            "Fruit: cherries round 1",
            "cherries round 2",
            "Fruit: cherries round 2",
        ],
        [
            "broccoli round 1",
            "Veggie: broccoli round 1",
            "broccoli round 2",
            "Veggie: broccoli round 2",
        ],
    ]
    assert [i.next for i in await ours.history("1", ns="call_both|1", limit=1)] == [()]


def unsaved(g: Any, *, asks: bool) -> Any:
    """A ``checkpointer=False`` sub-graph node ``sub``: ``one`` logs, ``ask`` asks twice when
    ``asks``."""

    def ask(state: Any) -> dict[str, Any]:
        return {"log": [g.interrupt("q"), g.interrupt("q2")] if asks else ["ask"]}

    sub = g.StateGraph(Log).add_node("one", lambda s: {"log": ["one"]}).add_node("ask", ask)
    sub = sub.add_edge(g.START, "one").add_edge("one", "ask").compile(checkpointer=False)
    return g.StateGraph(Log).add_node("sub", sub).add_edge(g.START, "sub")


async def test_an_unsaved_sub_graph_saves_no_checkpoint_under_a_checkpointed_parent(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(lambda g: unsaved(g, asks=False), checkpointer)
    assert await both(ours, theirs, {"log": []}) == {"log": ["one", "ask"]}
    saver = theirs.checkpointer
    assert {c.config["configurable"]["checkpoint_ns"] for c in saver.list(None)} == {""}
    items = [c async for c in ours.stream({"log": []}, thread_id="2", subgraphs=True)]
    [ns] = {item[0] for item in items if item[0]}  # it still streams under its namespace
    assert await checkpointer.list("2", "|".join(ns)) == []
    assert await ours.history("2", ns="|".join(ns)) == []
    state = await ours.get_state("2", subgraphs=True)
    assert state.values == {"log": ["one", "ask"]} and state.tasks == ()


async def test_an_interrupt_in_an_unsaved_sub_graph_is_an_error(checkpointer: Checkpointer) -> None:
    # LangGraph's pauses, then on every resume runs the sub-graph again from its start (it
    # saved nothing), so its second interrupt() asks for ever; ours refuses the first
    ours, theirs = pair(lambda g: unsaved(g, asks=True), checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    assert [i.value for i in out["__interrupt__"]] == ["q"]
    for _ in range(2):
        out = await theirs.ainvoke(THEIRS.Command(resume="A"), cfg())
        assert [i.value for i in out["__interrupt__"]] == ["q2"]
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "failed" and isinstance(result.error, GraphError)
    assert "checkpointer=False" in str(result.error) and "node 'sub'" in str(result.error)
    assert result.state == {"log": []}


async def test_a_persistent_graph_runs_only_as_a_sub_graph() -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", lambda s: {"log": ["a"]})
        return graph.add_edge(g.START, "a")

    theirs = build(THEIRS).compile(checkpointer=True)
    with pytest.raises(RuntimeError, match="root graphs"):
        await theirs.ainvoke({"log": []}, cfg())
    ours = build(OURS).compile(checkpointer=True)
    for call in (
        lambda: ours.run({"log": []}),
        lambda: ours.run({"log": []}, thread_id="1"),
        lambda: ours.get_state("1"),
        lambda: ours.history("1"),
        lambda: ours.update_state("1", {"log": ["x"]}),
    ):
        with pytest.raises(GraphError, match="checkpointer=True"):
            await call()
    # a checkpointer=False graph at the top runs, and keeps nothing (as LangGraph's)
    unsaved_ours = build(OURS).compile(checkpointer=False)
    unsaved_theirs = build(THEIRS).compile(checkpointer=False)
    assert (await unsaved_ours.run({"log": []})).state == await unsaved_theirs.ainvoke({"log": []})
    with pytest.raises(GraphValidationError, match="needs a checkpointer"):
        await unsaved_ours.get_state("1")


async def test_a_persistent_sub_graph_under_a_parent_without_checkpointer_starts_afresh() -> None:
    ours, theirs = pair(lambda g: caller(g, checkpointer=True), None)
    for _ in range(2):
        out = await theirs.ainvoke({"result": ""})
        result = await ours.run({"result": ""})
        assert result.state == out
        assert len(out["seen"][0]) == 2  # one call's two messages: nothing kept


def test_compile_takes_a_checkpointer_none_or_a_bool() -> None:
    graph = StateGraph(Log).add_node("a", lambda s: {"log": ["a"]}).add_edge("__start__", "a")
    for bad in ("yes", 1, lg_memory.InMemorySaver()):
        with pytest.raises(GraphValidationError, match="True/False for a sub-graph"):
            graph.compile(checkpointer=bad)  # type: ignore[arg-type]
    assert graph.compile(checkpointer=True).sub_checkpointer is True
    assert graph.compile(checkpointer=False).checkpointer is None
    assert graph.compile().sub_checkpointer is None


class Values(TypedDict, total=False):
    value: Annotated[list[str], operator.add]


class Results(TypedDict, total=False):
    results: Annotated[list[str], operator.add]


def asks_twice(g: Any, seen: list[tuple[str, dict[str, Any]]]) -> Any:
    """``test_time_travel.py``'s stateful cases: parent_node, then the ``checkpointer=True``
    sub-graph node ``sub_node`` whose step_a and step_b each ask (``seen``: the state each
    started from)."""

    def step(name: str) -> Any:
        def run(state: Any) -> dict[str, Any]:
            seen.append((name, dict(state)))
            return {"value": [f"{name[-1]}:{g.interrupt(f'question_{name[-1]}')}"]}

        return run

    sub = g.StateGraph(Values).add_node("step_a", step("step_a")).add_node("step_b", step("step_b"))
    sub = sub.add_edge(g.START, "step_a").add_edge("step_a", "step_b").compile(checkpointer=True)
    graph = g.StateGraph(Results).add_node("parent_node", lambda s: {"results": ["p"]})
    graph.add_node("sub_node", sub)
    return graph.add_edge(g.START, "parent_node").add_edge("parent_node", "sub_node")


async def two_rounds(checkpointer: Checkpointer) -> tuple[Any, Any, list[Any], list[Any]]:
    """``asks_twice`` on both libraries, run twice to its end (answers a1, b1, then a2,
    b2): (ours, theirs, what ours' steps saw, what LangGraph's saw)."""
    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = asks_twice(OURS, ours_seen).compile(checkpointer=checkpointer)
    theirs = asks_twice(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())
    for round in ("1", "2"):
        await both(ours, theirs, {"results": []})
        await both(ours, theirs, Command(resume=f"a{round}"))
        await both(ours, theirs, Command(resume=f"b{round}"))
    assert ours_seen == theirs_seen
    # the second round's steps started from the first round's state (each step twice: it
    # runs again from its top when answered)
    assert ours_seen[-4:] == [
        ("step_a", {"value": ["a:a1", "b:b1"]}),
        ("step_a", {"value": ["a:a1", "b:b1"]}),
        ("step_b", {"value": ["a:a1", "b:b1", "a:a2"]}),
        ("step_b", {"value": ["a:a1", "b:b1", "a:a2"]}),
    ]
    ours_seen.clear()
    theirs_seen.clear()
    return ours, theirs, ours_seen, theirs_seen


async def test_a_replay_of_the_parent_takes_the_persistent_sub_graph_back_too(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs, ours_seen, theirs_seen = await two_rounds(checkpointer)
    # replay from before sub_node in the second round: the sub-graph goes on from its state
    # as it was then (the first round's end), not from the second round's
    theirs_before = [s async for s in theirs.aget_state_history(cfg()) if s.next == ("sub_node",)]
    ours_before = [h for h in await ours.history("1") if h.next == ("sub_node",)]
    out = await theirs.ainvoke(None, theirs_before[0].config)
    result = await ours.run(None, thread_id="1", checkpoint_id=ours_before[0].checkpoint_id)
    assert result.status == "interrupted" and "__interrupt__" in out
    assert ours_seen == theirs_seen == [("step_a", {"value": ["a:a1", "b:b1"]})]
    # answered, it goes on from there
    await both(ours, theirs, Command(resume="a3"))
    assert ours_seen[-1] == theirs_seen[-1] == ("step_b", {"value": ["a:a1", "b:b1", "a:a3"]})
    assert await both(ours, theirs, Command(resume="b3")) == {"results": ["p", "p"]}
    [state] = await ours.history("1", ns="sub_node", limit=1)
    assert state.next == ()


async def test_a_fork_of_the_parent_takes_the_persistent_sub_graph_back_too(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs, ours_seen, theirs_seen = await two_rounds(checkpointer)
    theirs_before = [s async for s in theirs.aget_state_history(cfg()) if s.next == ("sub_node",)]
    ours_before = [h for h in await ours.history("1") if h.next == ("sub_node",)]
    fork = await theirs.aupdate_state(theirs_before[0].config, {"results": ["forked"]})
    await ours.update_state(
        "1", {"results": ["forked"]}, checkpoint_id=ours_before[0].checkpoint_id
    )
    out = await theirs.ainvoke(None, fork)
    result = await ours.run(None, thread_id="1")
    assert result.state == values(out) and result.status == "interrupted"
    assert ours_seen == theirs_seen == [("step_a", {"value": ["a:a1", "b:b1"]})]
    # from before the first round's sub_node: the sub-graph had no state then
    ours_seen.clear()
    first = [h for h in await ours.history("1") if h.next == ("sub_node",)][-1]
    result = await ours.run(None, thread_id="1", checkpoint_id=first.checkpoint_id)
    assert result.status == "interrupted" and ours_seen == [("step_a", {"value": []})]


def ticks(g: Any, seen: list[Any]) -> Any:
    """``test_stateful_subgraph_loads_state_across_ticks``: node_a → node_b → sub_node, a
    ``checkpointer=True`` sub-graph of one step."""

    def sub_step(state: Any) -> dict[str, Any]:
        seen.append(dict(state))
        return {"value": ["s"]}

    sub = g.StateGraph(Values).add_node("sub_step", sub_step).add_edge(g.START, "sub_step")
    graph = g.StateGraph(Results).add_node("node_a", lambda s: {"results": ["a"]})
    graph.add_node("node_b", lambda s: {"results": ["b"]})
    graph.add_node("sub_node", sub.compile(checkpointer=True))
    graph.add_edge(g.START, "node_a").add_edge("node_a", "node_b")
    return graph.add_edge("node_b", "sub_node")


async def test_a_replay_from_steps_before_a_persistent_sub_graph_takes_it_back(
    checkpointer: Checkpointer,
) -> None:
    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = ticks(OURS, ours_seen).compile(checkpointer=checkpointer)
    theirs = ticks(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())
    await both(ours, theirs, {"results": []})
    await both(ours, theirs, {"results": []})
    assert ours_seen == theirs_seen == [{"value": []}, {"value": ["s"]}]
    theirs_before = [s async for s in theirs.aget_state_history(cfg()) if s.next == ("node_a",)]
    ours_before = [h for h in await ours.history("1") if h.next == ("node_a",)]
    out = await theirs.ainvoke(None, theirs_before[0].config)
    result = await ours.run(None, thread_id="1", checkpoint_id=ours_before[0].checkpoint_id)
    assert result.state == out
    # sub_node runs two steps into the replay, from its state at the first round's end
    assert ours_seen[-1] == theirs_seen[-1] == {"value": ["s"]}
    # a run that is no replay goes on from its latest state
    await both(ours, theirs, {"results": []})
    assert ours_seen[-1] == theirs_seen[-1] == {"value": ["s", "s"]}


async def test_a_paused_persistent_sub_graph_is_read_and_updated_by_its_namespace(
    checkpointer: Checkpointer,
) -> None:
    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = asks_twice(OURS, ours_seen).compile(checkpointer=checkpointer)
    theirs = asks_twice(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())
    for answer in (None, "a1", "b1", None):  # round 2 pauses in step_a
        await both(ours, theirs, {"results": []} if answer is None else Command(resume=answer))
    ours_state = (await ours.get_state("1", subgraphs=True)).tasks[0].state
    theirs_state = (await theirs.aget_state(cfg(), subgraphs=True)).tasks[0].state
    assert ours_state.values == theirs_state.values == {"value": ["a:a1", "b:b1"]}
    assert ours_state.next == theirs_state.next == ("step_a",)
    assert ours_state.ns == theirs_state.config["configurable"]["checkpoint_ns"] == "sub_node"
    # its history: both rounds, in its one namespace
    ours_history = await ours.history("1", ns="sub_node")
    theirs_history = [s async for s in theirs.aget_state_history(cfg(checkpoint_ns="sub_node"))]
    assert [h.next for h in ours_history] == [s.next for s in theirs_history]
    # an update there goes through its reducers; the paused step still asks, and answered
    # goes on from the edited state
    await theirs.aupdate_state(theirs_state.config, {"value": ["edited"]})
    await ours.update_state("1", {"value": ["edited"]}, ns="sub_node")
    await both(ours, theirs, Command(resume="a2"))
    assert (
        ours_seen[-1]
        == theirs_seen[-1]
        == ("step_b", {"value": ["a:a1", "b:b1", "edited", "a:a2"]})
    )
    assert await both(ours, theirs, Command(resume="b2")) == {"results": ["p", "p"]}
    # a task that has not called it (the parent paused elsewhere) shows no state of it
    with pytest.raises(Exception, match="no sub-graph"):
        await ours.update_state("1", {"value": ["x"]}, ns="sub_node:t-1")


async def test_a_new_call_while_a_persistent_sub_graph_is_paused_drops_its_paused_step(
    checkpointer: Checkpointer,
) -> None:
    ours_seen: list[Any] = []
    theirs_seen: list[Any] = []
    ours = asks_twice(OURS, ours_seen).compile(checkpointer=checkpointer)
    theirs = asks_twice(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())
    await both(ours, theirs, {"results": []})
    await both(ours, theirs, Command(resume="a1"))  # paused in step_b
    # new input to the parent: sub_node runs again, a new call, from START on the state
    # its paused call left (step_a's answer kept, step_b's question dropped)
    await both(ours, theirs, {"results": []})
    assert ours_seen[-1] == theirs_seen[-1] == ("step_a", {"value": ["a:a1"]})
    await both(ours, theirs, Command(resume="a2"))
    assert await both(ours, theirs, Command(resume="b2")) == {"results": ["p", "p"]}
    assert ours_seen[-1] == theirs_seen[-1] == ("step_b", {"value": ["a:a1", "a:a2"]})


async def test_two_sends_to_a_persistent_sub_graph_in_one_step_are_refused(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph's runs both calls in the one namespace, each mixing the other's state into
    # its own ({"log": ["x", "w", "y", "w"]}); ours refuses the second by name
    def build(g: Any) -> Any:
        sub = g.StateGraph(Log).add_node("w", lambda s: {"log": ["w"]}).add_edge(g.START, "w")
        graph = g.StateGraph(Log).add_node("sub", sub.compile(checkpointer=True))
        sends = [g.Send("sub", {"log": ["x"]}), g.Send("sub", {"log": ["y"]})]
        return graph.add_conditional_edges(g.START, lambda s: sends, ["sub"])

    ours, theirs = pair(build, checkpointer)
    assert await theirs.ainvoke({"log": []}, cfg()) == {"log": ["x", "w", "y", "w"]}
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "failed" and isinstance(result.error, GraphError)
    assert "both run the checkpointer=True sub-graph kept in namespace 'sub'" in str(result.error)
    # one Send a step is a call at a time: its state goes on
    graph = StateGraph(Log).add_node("w", lambda s: {"log": ["w"]}).add_edge("__start__", "w")
    parent = StateGraph(Log).add_node("sub", graph.compile(checkpointer=True))
    parent.add_conditional_edges("__start__", lambda s: [OURS.Send("sub", {"log": ["x"]})], ["sub"])
    compiled = parent.compile(checkpointer=checkpointer)
    await compiled.run({"log": []}, thread_id="2")
    await compiled.run({"log": []}, thread_id="2")
    [last] = await compiled.history("2", ns="sub", limit=1)
    state = await compiled.get_state("2")
    assert state.values == {"log": ["w", "w"]} and last.next == ()


class Plain(TypedDict, total=False):
    value: list[str]  # no reducer: a sub-graph's output replaces it, in both libraries


def nested(g: Any) -> Any:
    """A default sub-graph node ``outer`` whose node ``inner`` is a ``checkpointer=True``
    sub-graph that asks, then logs its answer: its namespace has no task id at all
    (``outer|inner``), as LangGraph's, so it keeps its state across ``outer``'s calls."""

    def ask(state: Any) -> dict[str, Any]:
        return {"value": [f"{len(state['value'])}:{g.interrupt('go?')}"]}

    inner = g.StateGraph(Values).add_node("ask", ask).add_edge(g.START, "ask")
    outer = g.StateGraph(Plain).add_node("inner", inner.compile(checkpointer=True))
    outer = outer.add_edge(g.START, "inner").compile()
    return g.StateGraph(Plain).add_node("outer", outer).add_edge(g.START, "outer")


async def test_a_persistent_sub_graph_inside_a_default_one_keeps_its_state(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(nested, checkpointer)
    for answer in ("a", "b"):
        await both(ours, theirs, {"value": []})
        ours_state = (await ours.get_state("1", subgraphs=True)).tasks[0].state.tasks[0].state
        theirs_state = (await theirs.aget_state(cfg(), subgraphs=True)).tasks[0].state
        theirs_state = theirs_state.tasks[0].state
        assert ours_state.ns == theirs_state.config["configurable"]["checkpoint_ns"]
        assert ours_state.ns == "outer|inner" and ours_state.values == theirs_state.values
        await both(ours, theirs, Command(resume=answer))
    # the second call of inner paused on the first one's state (a fresh one: no value)
    assert ours_state.values == {"value": ["0:a"]}
    assert (await ours.get_state("1")).values == {"value": ["0:a", "1:b"]}
    [last] = await ours.history("1", ns="outer|inner", limit=1)
    assert last.next == ()
    await ours.update_state("1", {"value": ["edited"]}, ns="outer|inner")
    assert (await ours.history("1", ns="outer|inner", limit=1))[0].source == "update"


async def test_a_fork_into_a_new_thread_carries_the_persistent_sub_graphs_state_of_then(
    checkpointer: Checkpointer,
) -> None:
    """``fork(thread_id, checkpoint_id)`` copies the thread as it was at that checkpoint into a
    new one, and the persistent sub-graph's state of then with it: the fork's run goes on as
    LangGraph's replay of that checkpoint in the thread itself (``ReplayState``; LangGraph has
    no copy into another thread: its savers do not implement ``copy_thread``). It started
    from nothing there, as on a new thread."""
    ours, theirs, ours_seen, theirs_seen = await two_rounds(checkpointer)
    # the second round's input: replayed, sub_node goes on from the first round's end
    theirs_input = [
        s async for s in theirs.aget_state_history(cfg()) if s.metadata["source"] == "input"
    ]
    ours_input = [h for h in await ours.history("1") if h.source == "input"]
    out = await theirs.ainvoke(None, theirs_input[0].config)
    new = await ours.fork("1", ours_input[0].checkpoint_id, new_thread_id="2")
    result = await ours.run(None, thread_id=new)
    assert result.state == values(out) and result.status == "interrupted"
    assert ours_seen == theirs_seen == [("step_a", {"value": ["a:a1", "b:b1"]})]
    for answer in ("a3", "b3"):
        out = await theirs.ainvoke(THEIRS.Command(resume=answer), cfg())
        result = await ours.run(Command(resume=answer), thread_id=new)
    assert result.state == values(out) and result.status == "completed"
    assert ours_seen == theirs_seen
    assert ours_seen[-1] == ("step_b", {"value": ["a:a1", "b:b1", "a:a3"]})
    # each thread goes on from its own: the fork from its answers, the thread forked from
    # the second round's
    ours_seen.clear()
    await ours.run({"results": []}, thread_id=new)
    assert ours_seen == [("step_a", {"value": ["a:a1", "b:b1", "a:a3", "b:b3"]})]
    ours_seen.clear()
    await ours.run({"results": []}, thread_id="1")
    assert ours_seen == [("step_a", {"value": ["a:a1", "b:b1", "a:a2", "b:b2"]})]


async def test_a_fork_of_a_fork_carries_the_persistent_state_of_the_first_thread(
    checkpointer: Checkpointer,
) -> None:
    """A fork made before its sub-graph ran there reads the state from the thread it was
    forked from, and so on back; a fork of a checkpoint before the sub-graph's first call
    starts it from nothing."""
    seen: list[Any] = []
    ours = ticks(OURS, seen).compile(checkpointer=checkpointer)
    await ours.run({"results": []}, thread_id="1")
    await ours.run({"results": []}, thread_id="1")
    head = (await ours.get_state("1")).checkpoint_id
    assert head is not None and seen == [{"value": []}, {"value": ["s"]}]
    second = await ours.fork("1", head, new_thread_id="2")
    third = await ours.fork(second, (await ours.get_state(second)).checkpoint_id)
    await ours.run({"results": []}, thread_id=third)
    assert seen[-1] == {"value": ["s", "s"]}
    await ours.run({"results": []}, thread_id=third)
    assert seen[-1] == {"value": ["s", "s", "s"]}
    await ours.run({"results": []}, thread_id=second)
    assert seen[-1] == {"value": ["s", "s"]}
    await ours.run({"results": []}, thread_id="1")
    assert seen[-1] == {"value": ["s", "s"]}
    first = [h for h in await ours.history("1") if h.next == ("node_a",)][-1]
    early = await ours.fork("1", first.checkpoint_id)
    await ours.run(None, thread_id=early)
    assert seen[-1] == {"value": []}


class Kept(TypedDict, total=False):
    log: list[str]  # no reducer in the parent: the sub-graph's output replaces it


def counting(g: Any, parent: Any) -> Any:
    """A ``checkpointer=True`` sub-graph node ``sub`` whose ``p`` logs how long the log it
    sees is, its ``log`` an ``operator.add`` list; the parent's ``log`` of state ``parent``."""
    inner = g.StateGraph(Log).add_node("p", lambda s: {"log": [f"p{len(s['log'])}"]})
    sub = inner.add_edge(g.START, "p").compile(checkpointer=True)
    return g.StateGraph(parent).add_node("sub", sub).add_edge(g.START, "sub")


async def test_a_persistent_sub_graphs_kept_state_and_input_combine_as_langgraphs(
    checkpointer: Checkpointer,
) -> None:
    """Each call applies the parent's log to the state the last one left, through the
    sub-graph's ``operator.add``, as LangGraph's (``p1``, ``p3``, ``p5``); with no reducer in
    the parent both give its whole log back."""
    ours, theirs = pair(lambda g: counting(g, Kept), checkpointer)
    for round in range(3):
        await both(ours, theirs, {"log": [f"in{round}"]})
    [last] = await ours.history("1", ns="sub", limit=1)
    assert (await ours.get_state("1")).values == {"log": ["in0", "p1", "in1", "p3", "in2", "p5"]}
    assert last.next == ()


async def test_a_persistent_sub_graphs_output_through_an_operator_add_parent(
    checkpointer: Checkpointer,
) -> None:
    """``operator.add`` at both levels: the one difference from LangGraph is the one every
    sub-graph has (docs/graph.md, Sub-graphs): ours gives the parent what the call appended,
    LangGraph's its whole output, so its parent adds the sub-graph's input again, and for a
    persistent one all the state it kept, call after call. The state the sub-graph keeps
    and sees is its kept state plus the parent's log, in both."""
    ours, theirs = pair(lambda g: counting(g, Log), checkpointer)
    ours_logs, theirs_logs = [], []
    for round in range(3):
        ours_logs.append((await ours.run({"log": [f"in{round}"]}, thread_id="1")).state["log"])
        theirs_logs.append((await theirs.ainvoke({"log": [f"in{round}"]}, cfg()))["log"])
    assert ours_logs == [
        ["in0", "p1"],
        ["in0", "p1", "in1", "p5"],  # kept [in0, p1] + the parent's 3
        ["in0", "p1", "in1", "p5", "in2", "p11"],  # kept 6 + the parent's 5
    ]
    # LangGraph's first call: the parent's [in0] plus the sub-graph's whole [in0, p1]
    assert theirs_logs[0] == ["in0", "in0", "p1"]
    # its second: the parent's 4 plus the kept [in0, p1] plus the parent's 4 again, p6
    sent = [*theirs_logs[0], "in1"]
    assert theirs_logs[1] == [*sent, "in0", "p1", *sent, "p6"]
    kept = theirs.checkpointer.get_tuple(cfg(checkpoint_ns="sub")).checkpoint
    assert kept["channel_values"]["log"][-1] == "p19" and theirs_logs[2][-1] == "p19"
