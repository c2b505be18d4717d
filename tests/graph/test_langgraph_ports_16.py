"""Ports of LangGraph's tests, sixteenth round: ``test_pregel.py::test_debug_nested_subgraphs``
(each namespace's ``debug`` checkpoints are its history), ``test_interruption.py::
test_interruption_without_state_updates_async``, ``test_time_travel.py::
test_update_state_with_none_values`` and ``::test_get_state_with_subgraphs_returns_subgraph_
state``, ``test_type_checking.py::test_invoke_with_all_valid_types`` (an input, ``None``, an
empty ``Command``), and the places where a sub-graph meets the rest: its ``RemainingSteps``,
a ``defer=True`` node inside it, a ``Command(graph=PARENT)`` two levels down, the ``tasks`` /
``updates`` / ``values`` streams of its question and answer with ``subgraphs=True``, its
history's ``filter`` / ``limit`` / ``before``, the run's ``context`` in it and in a ``Send``
after it, an ``Overwrite`` in its ``Command(graph=PARENT)``, ``Send`` tasks to it that ask;
the ``custom`` items of its node and of that node's task; parallel questions answered one id
at a time; an ``update_state`` as a node whose router sends. Each program is written once
and run on both libraries (``OURS`` / ``THEIRS``), the outcomes compared; where ours differs
on purpose (a sub-graph hands back what it changed, ``durability="exit"`` keeps every step's
checkpoint, a ``tasks`` start has no ``triggers``), the difference is pinned.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import (
    OURS,
    THEIRS,
    Log,
    cfg,
    lg_errors,
    lg_func,
    lg_managed,
    lg_memory,
    lg_types,
    shape,
    values,
)

import tinyagents.graph as ours_graph
from tinyagents.errors import GraphError
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer

lg_runtime = pytest.importorskip("langgraph.runtime")
lg_config = pytest.importorskip("langgraph.config")


def saver(g: Any) -> Any:
    return MemoryCheckpointer() if g is OURS else lg_memory.InMemorySaver()


# -- an input, None, an empty Command (test_type_checking.py) ----------------------------------


class A(TypedDict, total=False):
    a: int


def one_node(g: Any, cp: Any) -> Any:
    def a(state: A) -> dict[str, Any]:
        return {"a": state.get("a", 0) + 1}

    return g.StateGraph(A).add_node("a", a).set_entry_point("a").compile(checkpointer=cp)


async def test_an_empty_command_on_a_thread_with_nothing_to_go_on_from_is_no_input() -> None:
    # LangGraph: test_type_checking.py::test_invoke_with_all_valid_types (types only there).
    # LangGraph's None on a new thread is EmptyInputError, and so is meant to be an empty
    # Command ("Received empty Command input"; its loop fails first on an unbound local):
    # ours takes it as None, a GraphError, where it used to end "completed" having run
    # nothing and saved nothing.
    theirs = one_node(THEIRS, lg_memory.InMemorySaver())
    assert await theirs.ainvoke({"a": 1}, cfg("in")) == {"a": 2}
    with pytest.raises(lg_errors.EmptyInputError):
        await theirs.ainvoke(None, cfg("none"))
    ours = one_node(OURS, MemoryCheckpointer())
    assert (await ours.run({"a": 1}, thread_id="in")).state == {"a": 2}
    for thread, given in (("none", None), ("empty", OURS.Command())):
        with pytest.raises(GraphError, match="no checkpoint to continue from"):
            await ours.run(given, thread_id=thread)
        with pytest.raises(GraphError, match="no checkpoint to continue from"):
            [i async for i in ours.stream(given, thread_id=thread)]
        assert await ours.history(thread) == []
    unsaved = one_node(OURS, None)
    for given in (None, OURS.Command()):
        with pytest.raises(GraphError, match="needs an input for every run"):
            await unsaved.run(given)
    # an update, even of nothing, is a new thread's input, as LangGraph's Command(update=...)
    assert (await ours.run(OURS.Command(update={"a": 5}), thread_id="upd")).state == {"a": 6}
    assert (await theirs.ainvoke(THEIRS.Command(update={"a": 5}), cfg("upd"))) == {"a": 6}
    assert (await ours.run(OURS.Command(update={}), thread_id="upd0")).state == {"a": 1}


# -- debug checkpoints of nested sub-graphs (test_pregel.py::test_debug_nested_subgraphs) -----


class Msgs(TypedDict):
    messages: Annotated[list[str], operator.add]


def three_levels(g: Any, cp: Any) -> Any:
    """grand parent (gp_one → gp_two) over parent (p_one → p_two) over child (c_one → c_two),
    each node noting it entered."""

    def node(name: str) -> Any:
        return lambda state: {"messages": [f"entered {name} node"]}

    def chain(first: str, second: str, second_action: Any) -> Any:
        return (
            g.StateGraph(Msgs)
            .add_node(first, node(first))
            .add_node(second, second_action)
            .add_edge(g.START, first)
            .add_edge(first, second)
            .add_edge(second, g.END)
        )

    child = chain("c_one", "c_two", node("c_two")).compile()
    parent = chain("p_one", "p_two", child).compile()
    return chain("gp_one", "gp_two", parent).compile(checkpointer=cp)


async def debug_checkpoints(g: Any, durability: str) -> tuple[Any, dict[tuple[str, ...], Any]]:
    """The grand parent graph and its ``debug`` stream's checkpoint payloads by namespace."""
    graph = three_levels(g, saver(g))
    if g is OURS:
        items = graph.stream(
            {"messages": []}, thread_id="1", mode="debug", subgraphs=True, durability=durability
        )
    else:
        items = graph.astream(
            {"messages": []}, cfg(), stream_mode="debug", subgraphs=True, durability=durability
        )
    by_ns: dict[tuple[str, ...], list[Any]] = defaultdict(list)
    async for ns, item in items:
        if item["type"] == "checkpoint":
            by_ns[ns].append(item["payload"])
    return graph, by_ns


def ids(config: dict[str, Any] | None) -> tuple[str, str] | None:
    if config is None:
        return None
    return config["configurable"]["checkpoint_ns"], config["configurable"]["checkpoint_id"]


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_each_namespaces_debug_checkpoints_are_its_history(durability: str) -> None:
    # LangGraph: test_pregel.py::test_debug_nested_subgraphs
    theirs, theirs_ns = await debug_checkpoints(THEIRS, durability)
    ours, ours_ns = await debug_checkpoints(OURS, durability)
    assert [shape(ns) for ns in ours_ns] == [shape(ns) for ns in theirs_ns]
    assert [shape(ns) for ns in ours_ns] == [(), ("gp_two",), ("gp_two", "p_two")]
    entered = [f"entered {n} node" for n in ("gp_one", "p_one", "c_one", "c_two")]
    for ours_items, theirs_items in zip(ours_ns.values(), theirs_ns.values(), strict=True):
        shown = [(p["next"], p["metadata"]["step"]) for p in ours_items]
        assert shown == [(p["next"], p["metadata"]["step"]) for p in theirs_items]
        assert [p["values"] for p in ours_items[:-1]] == [p["values"] for p in theirs_items[:-1]]
        # docs/graph.md, "Sub-graphs": a sub-graph hands back what it changed, LangGraph's
        # its whole output, so a parent's last values differ (the innermost's do not)
        assert ours_items[-1]["values"] == {"messages": entered}
    for ns, payloads in ours_ns.items():
        history = list(reversed(await ours.history("1", ns="|".join(ns))))
        # docs/graph.md, "Durability": an "exit" run saves every step's checkpoint when it
        # ends, where LangGraph keeps one per run, and none of a sub-graph's
        assert len(history) == len(payloads) == 4
        for item, saved in zip(payloads, history, strict=True):
            assert ids(item["config"]) == ("|".join(ns), saved.checkpoint_id)
            parent = ids(item["parent_config"])
            assert parent == (None if saved.parent_id is None else ("|".join(ns), saved.parent_id))
            snap = await ours.get_state("1", saved.checkpoint_id) if not ns else None
            assert snap is None or snap.values == item["values"]
            assert tuple(item["next"]) == saved.next
    for ns, payloads in theirs_ns.items():
        config = {"configurable": {"thread_id": "1", "checkpoint_ns": "|".join(ns)}}
        history = [s async for s in theirs.aget_state_history(config)][::-1]
        if durability != "exit":
            assert [ids(s.config) for s in history] == [ids(p["config"]) for p in payloads]
        else:
            assert len(history) == (1 if not ns else 0)


# -- interrupt_after="*" on nodes that write nothing (test_interruption.py) --------------------


class In(TypedDict):
    input: str


def three_noops(g: Any) -> Any:
    async def noop(_state: Any) -> None:
        return None

    graph = g.StateGraph(In)
    for name in ("step_1", "step_2", "step_3"):
        graph.add_node(name, noop)
    graph.add_edge(g.START, "step_1").add_edge("step_1", "step_2").add_edge("step_2", "step_3")
    return graph.add_edge("step_3", g.END).compile(checkpointer=saver(g), interrupt_after="*")


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_a_stop_after_each_node_that_wrote_nothing(durability: str) -> None:
    # LangGraph: test_interruption.py::test_interruption_without_state_updates_async: a stop
    # needs no key written by the step before it
    theirs, ours = three_noops(THEIRS), three_noops(OURS)
    seen: dict[str, list[Any]] = {"ours": [], "theirs": []}
    for given in ({"input": "hello world"}, None, None):
        await theirs.ainvoke(given, cfg(), durability=durability)
        count = len([s async for s in theirs.aget_state_history(cfg())])
        seen["theirs"].append(((await theirs.aget_state(cfg())).next, count))
        result = await ours.run(given, thread_id="1", durability=durability)
        assert result.status == ("interrupted" if len(seen["ours"]) < 2 else "completed")
        seen["ours"].append(((await ours.get_state("1")).next, len(await ours.history("1"))))
    nexts = [("step_2",), ("step_3",), ()]
    assert [n for n, _ in seen["ours"]] == [n for n, _ in seen["theirs"]] == nexts
    assert [c for _, c in seen["ours"]] == [3, 4, 5]
    # docs/graph.md, "Durability": "exit" keeps each step's checkpoint, LangGraph's one a run
    assert [c for _, c in seen["theirs"]] == ([1, 2, 3] if durability == "exit" else [3, 4, 5])


# -- update_state(None) at a past checkpoint (test_time_travel.py) -----------------------------


class Value(TypedDict):
    value: Annotated[list[str], operator.add]


def ask_between(g: Any, cp: Any) -> Any:
    def ask_human(state: Any) -> dict[str, Any]:
        return {"value": [f"human:{g.interrupt('What is your input?')}"]}

    return (
        g.StateGraph(Value)
        .add_node("node_a", lambda s: {"value": ["a"]})
        .add_node("ask_human", ask_human)
        .add_node("node_b", lambda s: {"value": ["b"]})
        .add_edge(g.START, "node_a")
        .add_edge("node_a", "ask_human")
        .add_edge("ask_human", "node_b")
        .compile(checkpointer=cp)
    )


async def test_an_update_of_nothing_at_a_past_checkpoint_asks_again(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_time_travel.py::test_update_state_with_none_values: not "__copy__", an
    # update through the usual path (source "update"), routed from the node that ran last
    theirs = ask_between(THEIRS, lg_memory.InMemorySaver())
    ours = ask_between(OURS, checkpointer)
    await theirs.ainvoke({"value": []}, cfg())
    await theirs.ainvoke(THEIRS.Command(resume="hello"), cfg())
    await ours.run({"value": []}, thread_id="1")
    await ours.run(OURS.Command(resume="hello"), thread_id="1")
    before = [s async for s in theirs.aget_state_history(cfg()) if s.next == ("ask_human",)][-1]
    ours_before = [h for h in await ours.history("1") if h.next == ("ask_human",)][-1]
    fork = await theirs.aupdate_state(before.config, None)
    out = await theirs.ainvoke(None, fork)
    fork_id = await ours.update_state("1", None, checkpoint_id=ours_before.checkpoint_id)
    result = await ours.run(None, thread_id="1")
    assert [i.value for i in out["__interrupt__"]] == ["What is your input?"]
    assert [i.value for i in result.interrupts] == ["What is your input?"]
    assert result.state == values(out) == {"value": ["a"]}
    theirs_fork, ours_fork = await theirs.aget_state(fork), await ours.get_state("1", fork_id)
    assert ours_fork.metadata["source"] == theirs_fork.metadata["source"] == "update"
    assert ours_fork.metadata["step"] == theirs_fork.metadata["step"] == 2
    assert ours_fork.next == theirs_fork.next == ("ask_human",)
    theirs_h = [
        (s.metadata["source"], s.metadata["step"], s.next)
        async for s in theirs.aget_state_history(cfg())
    ]
    assert [(h.source, h.step, h.next) for h in await ours.history("1")] == theirs_h


# -- a paused unsaved sub-graph's state (test_time_travel.py) ---------------------------------


class Data(TypedDict):
    data: str


def paused_sub(g: Any) -> Any:
    def process(state: Data) -> dict[str, Any]:
        g.interrupt("Continue?")
        return {"data": "processed"}

    sub = g.StateGraph(Data).add_node("process", process).add_edge(g.START, "process").compile()
    return (
        g.StateGraph(Data)
        .add_node("sub", sub)
        .add_edge(g.START, "sub")
        .compile(checkpointer=saver(g))
    )


async def test_get_state_with_subgraphs_shows_a_paused_sub_graphs_state() -> None:
    # LangGraph: test_time_travel.py::test_get_state_with_subgraphs_returns_subgraph_state
    theirs, ours = paused_sub(THEIRS), paused_sub(OURS)
    await theirs.ainvoke({"data": "input"}, cfg())
    await ours.run({"data": "input"}, thread_id="1")
    theirs_sub = (await theirs.aget_state(cfg(), subgraphs=True)).tasks[0].state
    ours_sub = (await ours.get_state("1", subgraphs=True)).tasks[0].state
    assert ours_sub.values == theirs_sub.values == {"data": "input"}
    assert ours_sub.next == theirs_sub.next == ("process",)
    # LangGraph names it by a config ({"thread_id", "checkpoint_ns", ...}), ours by its ns
    namespace = theirs_sub.config["configurable"]["checkpoint_ns"]
    assert shape(ours_sub.ns) == shape(namespace) == ("sub",)
    assert [i.value for i in ours_sub.interrupts] == ["Continue?"]
    assert [i.value for i in theirs_sub.tasks[0].interrupts] == ["Continue?"]


# -- RemainingSteps inside a sub-graph ----------------------------------------------------------


class OursSteps(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    remaining_steps: ours_graph.RemainingSteps


class TheirsSteps(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    remaining_steps: lg_managed.RemainingSteps


def counting_steps(g: Any) -> Any:
    R = OursSteps if g is OURS else TheirsSteps

    def note(name: str) -> Any:
        return lambda s: {"log": [f"{name}:{s['remaining_steps']}"]}

    sub = (
        g.StateGraph(R)
        .add_node("s1", note("s1"))
        .add_node("s2", note("s2"))
        .add_edge(g.START, "s1")
        .add_edge("s1", "s2")
        .compile()
    )
    return (
        g.StateGraph(R)
        .add_node("a", note("a"))
        .add_node("sub", sub)
        .add_edge(g.START, "a")
        .add_edge("a", "sub")
        .compile(checkpointer=saver(g))
    )


async def test_remaining_steps_inside_a_sub_graph() -> None:
    # the sub-graph counts its own steps against the run's recursion limit, as LangGraph's
    theirs = await counting_steps(THEIRS).ainvoke({"log": []}, {**cfg(), "recursion_limit": 10})
    result = await counting_steps(OURS).run({"log": []}, thread_id="1", recursion_limit=10)
    assert result.state == {"log": ["a:9", "s1:9", "s2:8"]}
    # docs/graph.md, "Sub-graphs": ours hands back what the sub-graph changed, LangGraph's
    # its whole output (the parent's "a:9" appended again)
    assert theirs == {"log": ["a:9", "a:9", "s1:9", "s2:8"]}


# -- a deferred node inside a sub-graph -------------------------------------------------------


def deferred_in_sub(g: Any) -> Any:
    def note(name: str) -> Any:
        return lambda s: {"log": [name]}

    sub = (
        g.StateGraph(Log)
        .add_node("x", note("x"))
        .add_node("y", note("y"))
        .add_node("y2", note("y2"))
        .add_node("d", note("d"), defer=True)
        .add_edge(g.START, "x")
        .add_edge(g.START, "y")
        .add_edge("y", "y2")
        .add_edge("x", "d")
        .add_edge("y2", "d")
        .compile()
    )
    return (
        g.StateGraph(Log)
        .add_node("sub", sub)
        .add_node("p", note("p"))
        .add_node("p2", note("p2"))
        .add_edge(g.START, "sub")
        .add_edge(g.START, "p")
        .add_edge("p", "p2")
        .compile(checkpointer=saver(g))
    )


async def test_a_deferred_node_in_a_sub_graph_waits_for_the_sub_graph_only() -> None:
    # d waits for the sub-graph's longer branch (y → y2), not for the parent's p → p2: the
    # sub-graph is one task of the parent's first step
    theirs = await deferred_in_sub(THEIRS).ainvoke({"log": []}, cfg())
    result = await deferred_in_sub(OURS).run({"log": []}, thread_id="1")
    assert result.state == theirs == {"log": ["p", "x", "y", "y2", "d", "p2"]}


# -- Command(graph=PARENT) two levels down ------------------------------------------------------


def parent_from_grandchild(g: Any) -> Any:
    def gc(state: Any) -> Any:
        return g.Command(graph=g.Command.PARENT, goto="m_other", update={"log": ["gc"]})

    child = g.StateGraph(Log).add_node("gc", gc).add_edge(g.START, "gc").compile()
    middle = (
        g.StateGraph(Log)
        .add_node("child", child, destinations=("m_other",))
        .add_node("m_other", lambda s: {"log": ["m_other"]})
        .add_edge(g.START, "child")
        .compile()
    )
    return (
        g.StateGraph(Log)
        .add_node("middle", middle)
        .add_node("r_next", lambda s: {"log": ["r_next"]})
        .add_edge(g.START, "middle")
        .add_edge("middle", "r_next")
        .compile(checkpointer=saver(g))
    )


async def test_a_parent_command_from_a_grandchild_goes_to_its_own_parent() -> None:
    # PARENT is the graph one level up (the middle one), whose m_other runs; the root sees
    # the middle graph's output and goes on by its own edge
    theirs = await parent_from_grandchild(THEIRS).ainvoke({"log": []}, cfg())
    result = await parent_from_grandchild(OURS).run({"log": []}, thread_id="1")
    assert result.state == theirs == {"log": ["gc", "m_other", "r_next"]}


# -- parallel questions answered one id at a time ---------------------------------------------


def three_questions(g: Any) -> Any:
    def fan(state: Any) -> list[Any]:
        return [g.Send("ask", {"log": [str(i)]}) for i in range(3)]

    def ask(state: Any) -> dict[str, Any]:
        tag = state["log"][0]
        return {"log": [f"ans:{tag}:{g.interrupt('q' + tag)}"]}

    return (
        g.StateGraph(Log)
        .add_node("start", lambda s: {})
        .add_node("ask", ask)
        .add_node("done", lambda s: {"log": ["end"]})
        .add_edge(g.START, "start")
        .add_conditional_edges("start", fan, ["ask"])
        .add_edge("ask", "done")
        .compile(checkpointer=saver(g))
    )


async def test_parallel_questions_answered_one_id_then_the_rest() -> None:
    theirs, ours = three_questions(THEIRS), three_questions(OURS)
    asked = (await theirs.ainvoke({"log": []}, cfg()))["__interrupt__"]
    theirs_mid = await theirs.ainvoke(THEIRS.Command(resume={asked[1].id: "B"}), cfg())
    result = await ours.run({"log": []}, thread_id="1")
    ours_mid = await ours.run(OURS.Command(resume={result.interrupts[1].id: "B"}), thread_id="1")
    assert ours_mid.status == "interrupted"
    assert sorted(i.value for i in ours_mid.interrupts) == ["q0", "q2"]
    assert sorted(i.value for i in theirs_mid["__interrupt__"]) == ["q0", "q2"]
    # the answered task's write is kept while the others wait
    assert ours_mid.state == values(theirs_mid) == {"log": ["ans:1:B"]}
    rest = {i.id: i.value.upper() for i in theirs_mid["__interrupt__"]}
    theirs_end = await theirs.ainvoke(THEIRS.Command(resume=rest), cfg())
    ours_rest = {i.id: i.value.upper() for i in ours_mid.interrupts}
    ours_end = await ours.run(OURS.Command(resume=ours_rest), thread_id="1")
    assert ours_end.state == theirs_end == {"log": ["ans:0:Q0", "ans:1:B", "ans:2:Q2", "end"]}


# -- a sub-graph's question and answer, streamed with subgraphs=True --------------------------


def asking_sub(g: Any) -> Any:
    def ask(state: Any) -> dict[str, Any]:
        return {"log": [f"ans:{g.interrupt('q')}"]}

    sub = (
        g.StateGraph(Log)
        .add_node("s1", lambda s: {"log": ["s1"]})
        .add_node("ask", ask)
        .add_node("s2", lambda s: {"log": ["s2"]})
        .add_edge(g.START, "s1")
        .add_edge("s1", "ask")
        .add_edge("ask", "s2")
        .compile()
    )
    return (
        g.StateGraph(Log)
        .add_node("a", lambda s: {"log": ["a"]})
        .add_node("sub", sub)
        .add_edge(g.START, "a")
        .add_edge("a", "sub")
        .compile(checkpointer=saver(g))
    )


def plain(payload: Any) -> Any:
    """An item without what each library spells its own way: task ids, and (docs/graph.md,
    "Streaming") LangGraph's ``triggers`` and an interrupt dict's ``response_schema``, which
    ours have not; an ``Interrupt`` as its value."""
    if isinstance(payload, dict):
        drop = ("id", "triggers", "response_schema")
        return {k: plain(v) for k, v in payload.items() if k not in drop}
    if isinstance(payload, (list, tuple)):
        return [plain(v) for v in payload]
    if isinstance(payload, (OURS_INTERRUPT, THEIRS_INTERRUPT)):
        return ("interrupt", payload.value)
    return payload


OURS_INTERRUPT = ours_graph.Interrupt
THEIRS_INTERRUPT = lg_types.Interrupt


async def streamed(g: Any, mode: str) -> list[Any]:
    graph, items = asking_sub(g), []
    for given in ({"log": []}, g.Command(resume="yes")):
        if g is OURS:
            stream = graph.stream(given, thread_id="1", mode=mode, subgraphs=True)
        else:
            stream = graph.astream(given, cfg(), stream_mode=mode, subgraphs=True)
        items += [(shape(ns), plain(payload)) async for ns, payload in stream]
    return items


@pytest.mark.parametrize("mode", ["tasks", "updates", "values"])
async def test_a_sub_graphs_question_and_answer_streamed_with_subgraphs(mode: str) -> None:
    ours, theirs = await streamed(OURS, mode), await streamed(THEIRS, mode)
    # docs/graph.md, "Sub-graphs": the sub-graph's task hands back what it changed; the
    # parent's last item is the only one that differs
    sub_out = {"log": ["s1", "ans:yes", "s2"]}
    whole = {"log": ["a", "s1", "ans:yes", "s2"]}
    if mode == "tasks":
        assert theirs[-1] == ((), {"name": "sub", "result": whole, "error": None, "interrupts": []})
        assert ours[-1] == ((), {"name": "sub", "result": sub_out, "error": None, "interrupts": []})
    elif mode == "updates":
        assert (theirs[-1], ours[-1]) == (((), {"sub": whole}), ((), {"sub": sub_out}))
    else:
        assert theirs[-1] == ((), {"log": ["a", *whole["log"]]})
        assert ours[-1] == ((), whole)
    assert ours[:-1] == theirs[:-1]
    # the question is shown in the sub-graph's namespace, then in the parent's (its task's
    # end, in the tasks mode), and not again on the answer
    asked = [ns for ns, p in ours if "'q')" in repr(p) or "'value': 'q'" in repr(p)]
    assert asked == [("sub",), ()]


# -- a paused sub-graph's history: filter, limit, before ----------------------------------------


async def test_a_sub_graphs_history_filtered_limited_and_before() -> None:
    theirs, ours = asking_sub(THEIRS), asking_sub(OURS)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    sub = (await theirs.aget_state(cfg(), subgraphs=True)).tasks[0].state.config
    config = {
        "configurable": {"thread_id": "1", "checkpoint_ns": sub["configurable"]["checkpoint_ns"]}
    }
    ns = (await ours.get_state("1", subgraphs=True)).tasks[0].state.ns

    def brief(snaps: list[Any]) -> list[Any]:
        return [(s.metadata["source"], s.metadata["step"], s.next) for s in snaps]

    full = [s async for s in theirs.aget_state_history(config)]
    ours_full = await ours.history("1", ns=ns)
    assert (
        brief(ours_full)
        == brief(full)
        == [
            ("loop", 1, ("ask",)),
            ("loop", 0, ("s1",)),
            ("input", -1, ("__start__",)),
        ]
    )
    loops = [s async for s in theirs.aget_state_history(config, filter={"source": "loop"}, limit=1)]
    ours_loops = await ours.history("1", ns=ns, filter={"source": "loop"}, limit=1)
    assert brief(ours_loops) == brief(loops) == [("loop", 1, ("ask",))]
    older = [s async for s in theirs.aget_state_history(config, before=full[0].config)]
    ours_older = await ours.history("1", ns=ns, before=ours_full[0].checkpoint_id)
    assert brief(ours_older) == brief(older) == brief(full[1:])


# -- update_state as a node whose router sends --------------------------------------------------


class Fan(TypedDict, total=False):
    items: list[int]
    out: Annotated[list[int], operator.add]


def fan_out(g: Any) -> Any:
    def fan(state: Any) -> list[Any]:
        return [g.Send("work", {"items": [i]}) for i in state["items"]]

    return (
        g.StateGraph(Fan)
        .add_node("start", lambda s: {})
        .add_node("work", lambda s: {"out": [s["items"][0] * 10]})
        .add_edge(g.START, "start")
        .add_conditional_edges("start", fan, ["work"])
        .compile(checkpointer=saver(g))
    )


async def test_an_update_as_a_node_whose_router_sends_makes_the_sends_next() -> None:
    theirs, ours = fan_out(THEIRS), fan_out(OURS)
    await theirs.aupdate_state(cfg(), {"items": [1, 2, 3]}, as_node="start")
    await ours.update_state("1", {"items": [1, 2, 3]}, as_node="start")
    theirs_next = (await theirs.aget_state(cfg())).next
    assert (await ours.get_state("1")).next == theirs_next == ("work", "work", "work")
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == out == {"items": [1, 2, 3], "out": [10, 20, 30]}


# -- the run's context in a sub-graph and in a Send after it ----------------------------------


@dataclass
class Ctx:
    user: str


def with_context(g: Any) -> Any:
    get_runtime = ours_graph.get_runtime if g is OURS else lg_runtime.get_runtime

    def note(name: str) -> Any:
        return lambda s: {"log": [f"{name}:{get_runtime().context.user}"]}

    def fan(state: Any) -> list[Any]:
        return [g.Send("w", {"log": []})]

    sub = g.StateGraph(Log, context_schema=Ctx).add_node("s", note("s")).add_edge(g.START, "s")
    return (
        g.StateGraph(Log, context_schema=Ctx)
        .add_node("a", note("a"))
        .add_node("sub", sub.compile())
        .add_node("w", note("w"))
        .add_edge(g.START, "a")
        .add_edge("a", "sub")
        .add_conditional_edges("sub", fan, ["w"])
        .compile()
    )


async def test_the_runs_context_reaches_a_sub_graph_and_a_send_after_it() -> None:
    theirs = await with_context(THEIRS).ainvoke({"log": []}, context=Ctx("ann"))
    result = await with_context(OURS).run({"log": []}, context=Ctx("ann"))
    assert result.state == {"log": ["a:ann", "s:ann", "w:ann"]}
    # docs/graph.md, "Sub-graphs": LangGraph's sub-graph hands back "a:ann" again
    assert theirs == {"log": ["a:ann", "a:ann", "s:ann", "w:ann"]}


# -- an Overwrite sent up by a sub-graph's Command(graph=PARENT) ----------------------------------


def overwrite_from_child(g: Any) -> Any:
    overwrite = ours_graph.Overwrite if g is OURS else lg_types.Overwrite

    def c(state: Any) -> Any:
        return g.Command(graph=g.Command.PARENT, goto="after", update={"log": overwrite(["reset"])})

    child = g.StateGraph(Log).add_node("c", c).add_edge(g.START, "c").compile()
    return (
        g.StateGraph(Log)
        .add_node("a", lambda s: {"log": ["a"]})
        .add_node("child", child, destinations=("after",))
        .add_node("after", lambda s: {"log": ["after"]})
        .add_edge(g.START, "a")
        .add_edge("a", "child")
        .compile(checkpointer=saver(g))
    )


async def test_an_overwrite_in_a_parent_command_replaces_the_parents_list() -> None:
    # the parent's reducer is bypassed for the child's write, as for the parent's own node
    theirs = await overwrite_from_child(THEIRS).ainvoke({"log": []}, cfg())
    result = await overwrite_from_child(OURS).run({"log": []}, thread_id="1")
    assert result.state == theirs == {"log": ["reset", "after"]}


# -- Sends to a sub-graph that asks: one answered by id, the other by a plain resume ------------


def sends_to_asking_sub(g: Any) -> Any:
    def ask(state: Any) -> dict[str, Any]:
        tag = state["log"][0]
        return {"log": [f"{tag}:{g.interrupt('q' + tag)}"]}

    def fan(state: Any) -> list[Any]:
        return [g.Send("sub", {"log": [str(i)]}) for i in range(2)]

    sub = g.StateGraph(Log).add_node("ask", ask).add_edge(g.START, "ask").compile()
    return (
        g.StateGraph(Log)
        .add_node("start", lambda s: {})
        .add_node("sub", sub)
        .add_edge(g.START, "start")
        .add_conditional_edges("start", fan, ["sub"])
        .compile(checkpointer=saver(g))
    )


async def test_sends_to_an_asking_sub_graph_answered_one_by_one() -> None:
    theirs, ours = sends_to_asking_sub(THEIRS), sends_to_asking_sub(OURS)
    asked = (await theirs.ainvoke({"log": []}, cfg()))["__interrupt__"]
    result = await ours.run({"log": []}, thread_id="1")
    assert sorted(i.value for i in result.interrupts) == sorted(i.value for i in asked)
    theirs_tasks = (await theirs.aget_state(cfg(), subgraphs=True)).tasks
    ours_tasks = (await ours.get_state("1", subgraphs=True)).tasks
    # each Send's sub-graph has its own namespace and state
    assert [(t.name, t.state.values) for t in ours_tasks] == [
        (t.name, t.state.values) for t in theirs_tasks
    ]
    assert [(t.name, t.state.values) for t in ours_tasks] == [
        ("sub", {"log": ["0"]}),
        ("sub", {"log": ["1"]}),
    ]
    assert len({t.state.ns for t in ours_tasks}) == 2
    first = next(i for i in asked if i.value == "q0")
    ours_first = next(i for i in result.interrupts if i.value == "q0")
    theirs_mid = await theirs.ainvoke(THEIRS.Command(resume={first.id: "X"}), cfg())
    ours_mid = await ours.run(OURS.Command(resume={ours_first.id: "X"}), thread_id="1")
    assert (
        [i.value for i in ours_mid.interrupts]
        == [i.value for i in theirs_mid["__interrupt__"]]
        == ["q1"]
    )
    # one question left: a plain resume answers it
    theirs_end = await theirs.ainvoke(THEIRS.Command(resume="Y"), cfg())
    ours_end = await ours.run(OURS.Command(resume="Y"), thread_id="1")
    assert ours_end.status == "completed"
    # docs/graph.md, "Sub-graphs": ours hands back what each sub-graph changed, LangGraph's
    # its whole output (the Send's argument again)
    assert ours_mid.state == {"log": ["0:X"]} and values(theirs_mid) == {"log": ["0", "0:X"]}
    assert ours_end.state == {"log": ["0:X", "1:Y"]}
    assert theirs_end == {"log": ["0", "0:X", "1", "1:Y"]}


# -- custom items of a sub-graph's node and of its task, with subgraphs=True ------------------


def writing_sub(g: Any) -> Any:
    func = ours_graph if g is OURS else lg_func
    get_writer = ours_graph.get_stream_writer if g is OURS else lg_config.get_stream_writer

    @func.task
    def plus_one(x: int) -> int:
        get_writer()(f"task:{x}")
        return x + 1

    async def s1(state: Any) -> dict[str, Any]:
        get_writer()("s1-custom")
        return {"log": [f"s1:{await plus_one(1)}"]}

    def a(state: Any) -> dict[str, Any]:
        get_writer()("a-custom")
        return {"log": ["a"]}

    sub = g.StateGraph(Log).add_node("s1", s1).add_edge(g.START, "s1").compile()
    return (
        g.StateGraph(Log)
        .add_node("a", a)
        .add_node("sub", sub)
        .add_edge(g.START, "a")
        .add_edge("a", "sub")
        .compile(checkpointer=saver(g))
    )


async def test_custom_items_of_a_sub_graphs_node_and_task_in_their_namespaces() -> None:
    modes = ["custom", "updates"]
    theirs_stream = writing_sub(THEIRS).astream(
        {"log": []}, cfg(), stream_mode=modes, subgraphs=True
    )
    ours_stream = writing_sub(OURS).stream({"log": []}, thread_id="1", mode=modes, subgraphs=True)
    theirs = [(shape(ns), mode, item) async for ns, mode, item in theirs_stream]
    ours = [(shape(ns), mode, item) async for ns, mode, item in ours_stream]
    assert (
        ours[:-1]
        == theirs[:-1]
        == [
            ((), "custom", "a-custom"),
            ((), "updates", {"a": {"log": ["a"]}}),
            (("sub",), "custom", "s1-custom"),
            (("sub", "s1"), "custom", "task:1"),  # a task's items: in its node's namespace
            (("sub",), "updates", {"plus_one": 2}),
            (("sub",), "updates", {"s1": {"log": ["s1:2"]}}),
        ]
    )
    # docs/graph.md, "Sub-graphs": what it changed, where LangGraph's is its whole output
    assert ours[-1] == ((), "updates", {"sub": {"log": ["s1:2"]}})
    assert theirs[-1] == ((), "updates", {"sub": {"log": ["a", "s1:2"]}})
