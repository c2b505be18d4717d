"""LangGraph idioms found by a side-by-side probe: the same program on LangGraph and on
``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.

- a state declared with ``typing_extensions.TypedDict`` (LangGraph's own ``MessagesState`` is
  one), refused as "not a TypedDict" on Python 3.11;
- ``update_state(thread, None, as_node=...)``, LangGraph's way to pass a breakpoint without
  running the node (it raised ``AttributeError``);
- the state a node of a ``TypedDict`` graph receives is a dict, a snapshot of its step: passed
  to ``interrupt()``, written into the state, sent or dumped as JSON it is what the node saw
  (it was a live read-only view: "cannot checkpoint a mappingproxy", a self-referencing
  value, ``json.dumps`` refused);
- ``compile(checkpointer=True)`` (LangGraph's persistent sub-graph switch) is taken, as
  ``False`` is (it was accepted and ignored, or failed with ``AttributeError``; then refused
  by name; now ``test_langgraph_ports_subgraph_checkpointer.py`` runs it);
- a node name with ``:`` or ``|`` (a namespace's separators) is refused, as LangGraph's
  ``add_node`` refuses it (a sub-graph so named could not be found by its namespace);
- reading or changing a thread of a graph without checkpointer is a ``ValueError``, as
  LangGraph's "No checkpointer set" (it was a ``GraphError`` only).
"""

from __future__ import annotations

import copy
import json
import operator
from typing import Annotated, Any, TypedDict

import pytest
import typing_extensions
from langgraph_kit import OURS, THEIRS, Log, abc_graph, cfg, lg_message, pair, values

from tinyagents.errors import GraphValidationError
from tinyagents.graph import Command, StateGraph, StateView
from tinyagents.store.checkpoint import Checkpointer


class ExtLog(typing_extensions.TypedDict, total=False):
    log: Annotated[list[str], operator.add]


async def test_a_typing_extensions_typeddict_state(checkpointer: Checkpointer) -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(ExtLog).add_node("a", lambda s: {"log": ["a"]})
        return graph.add_edge(g.START, "a").add_edge("a", g.END)

    ours, theirs = pair(build, checkpointer)
    assert (await ours.run({"log": []}, thread_id="1")).state == await theirs.ainvoke(
        {"log": []}, cfg()
    )


async def test_langgraphs_messages_state_runs_on_ours() -> None:
    """``MessagesState`` is a typing_extensions TypedDict with LangGraph's ``add_messages``."""

    def build(g: Any) -> Any:
        graph = g.StateGraph(lg_message.MessagesState)
        graph.add_node("a", lambda s: {"messages": [("ai", "hello")]})
        return graph.add_edge(g.START, "a").add_edge("a", g.END)

    ours, theirs = pair(build, None)
    mine = (await ours.run({"messages": [("user", "hi")]})).state["messages"]
    their = (await theirs.ainvoke({"messages": [("user", "hi")]}))["messages"]
    assert [(m.type, m.content) for m in mine] == [(m.type, m.content) for m in their]
    assert [(m.type, m.content) for m in mine] == [("human", "hi"), ("ai", "hello")]


@pytest.mark.parametrize("as_node", ["a", None])
async def test_update_state_with_none_at_a_breakpoint(
    checkpointer: Checkpointer, as_node: str | None
) -> None:
    """``update_state(None, as_node="a")`` marks ``a`` done with no output: the run goes on
    at ``b``; with no ``as_node`` it changes nothing."""
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer, interrupt_before=["a"])
    await ours.run({"log": []}, thread_id="1")
    await theirs.ainvoke({"log": []}, cfg())
    await ours.update_state("1", None, as_node=as_node)
    await theirs.aupdate_state(cfg(), None, as_node=as_node)
    mine, their = await ours.get_state("1"), await theirs.aget_state(cfg())
    assert (mine.next, mine.values) == (their.next, their.values)
    assert mine.next == (("b",) if as_node else ("a",))
    result = await ours.run(None, thread_id="1")
    assert result.state == await theirs.ainvoke(None, cfg())


class Snap(TypedDict, total=False):
    x: int
    snap: Any
    log: Annotated[list[str], operator.add]


def pass_the_state_on(g: Any, how: str) -> Any:
    """a writes x=1; then b passes the state it got on: to interrupt(), into the state, as a
    Send's argument, or as JSON text."""

    def b(state: Any) -> Any:
        if how == "interrupt":
            return {"log": [f"answer={g.interrupt(state)}"]}
        if how == "write":
            return {"snap": state}
        return {"log": [json.dumps(state, sort_keys=True)]}

    graph = g.StateGraph(Snap).add_node("a", lambda s: {"x": 1})
    if how == "send":
        graph.add_node("w", lambda arg: {"log": [f"{type(arg).__name__} {sorted(arg.items())}"]})
        graph.add_edge(g.START, "a").add_conditional_edges("a", lambda s: [g.Send("w", s)])
        return graph.add_edge("w", g.END)
    graph.add_node("b", b)
    return graph.add_edge(g.START, "a").add_edge("a", "b").add_edge("b", g.END)


@pytest.mark.parametrize("how", ["write", "send", "json"])
@pytest.mark.parametrize("saved", [True, False], ids=["checkpointer", "in-memory"])
async def test_the_state_a_node_gets_is_a_snapshot_it_may_pass_on(
    checkpointer: Checkpointer, how: str, saved: bool
) -> None:
    ours, theirs = pair(lambda g: pass_the_state_on(g, how), checkpointer if saved else None)
    mine = (await ours.run({"x": 0}, thread_id="1" if saved else None)).state
    assert mine == await theirs.ainvoke({"x": 0}, cfg() if saved else None)
    if how == "write":
        assert mine["snap"] == {"x": 1, "log": []}  # what b saw, not a view of what came after


async def test_the_state_a_node_gets_may_be_asked_with_interrupt(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(lambda g: pass_the_state_on(g, "interrupt"), checkpointer)
    paused = await ours.run({"x": 0}, thread_id="1")
    their_pause = await theirs.ainvoke({"x": 0}, cfg())
    assert [i.value for i in paused.interrupts] == [i.value for i in their_pause["__interrupt__"]]
    assert paused.interrupts[0].value == {"x": 1, "log": []}
    done = await ours.run(Command(resume="ok"), thread_id="1")
    assert done.state == values(await theirs.ainvoke(THEIRS.Command(resume="ok"), cfg()))


async def test_a_node_cannot_change_its_state_but_may_copy_it() -> None:
    seen: list[Any] = []

    def node(state: Any) -> dict[str, Any]:
        assert isinstance(state, dict) and type(state) is StateView
        for change in (
            lambda: state.__setitem__("log", []),
            lambda: state.update(log=[]),
            lambda: state.pop("log"),
            lambda: state.setdefault("x", 1),
            lambda: state.clear(),
        ):
            with pytest.raises(TypeError, match="state is read-only"):
                change()
        for mine in (dict(state), {**state}, copy.copy(state), copy.deepcopy(state)):
            assert type(mine) is dict and mine == {"log": ["start"]}
            mine["log"] = ["changed"]  # a copy: the state stays as it was
        seen.append(state | {"x": 1})
        return {"log": ["node"]}

    graph = StateGraph(Log).add_node("node", node)
    compiled = graph.add_edge(OURS.START, "node").add_edge("node", OURS.END).compile()
    assert (await compiled.run({"log": ["start"]})).state == {"log": ["start", "node"]}
    # ``|`` makes a plain dict (its lists are the state's own: without a checkpointer an
    # append reducer extends them in place, docs/graph.md "State")
    assert [sorted(d) for d in seen] == [["log", "x"]] and type(seen[0]) is dict


@pytest.mark.parametrize("flag", [True, False])
def test_langgraphs_checkpointer_switch_is_taken(flag: bool) -> None:
    graph = StateGraph(Log).add_node("a", lambda s: {"log": ["a"]})
    graph.add_edge(OURS.START, "a").add_edge("a", OURS.END)
    compiled = graph.compile(checkpointer=flag)
    assert compiled.sub_checkpointer is flag and compiled.checkpointer is None
    with pytest.raises(GraphValidationError, match="takes a tinyagents Checkpointer"):
        graph.compile(checkpointer=THEIRS.StateGraph)  # type: ignore[arg-type]


class Foo(TypedDict):
    foo: str


def two_nodes(g: Any) -> Any:
    graph = g.StateGraph(Foo)
    graph.add_node("node1", lambda s: {"foo": s["foo"] + "|node-1"})
    graph.add_node("node2", lambda s: {"foo": s["foo"] + "|node-2"})
    return graph.add_edge(g.START, "node1").add_edge("node1", "node2").add_edge("node2", g.END)


async def test_command_with_static_breakpoints(checkpointer: Checkpointer) -> None:
    """LangGraph's test: a ``Command(update=...)`` sent to a thread stopped before ``node1``
    applies the update and runs on past the breakpoint (it stopped there again)."""
    ours, theirs = pair(two_nodes, checkpointer, interrupt_before=["node1"])
    first = await ours.run({"foo": "abc"}, thread_id="1")
    await theirs.ainvoke({"foo": "abc"}, cfg())
    assert first.status == "interrupted" and (await ours.get_state("1")).next == ("node1",)
    result = await ours.run(Command(update={"foo": "def"}), thread_id="1")
    expected = await theirs.ainvoke(THEIRS.Command(update={"foo": "def"}), cfg())
    assert (result.status, result.state) == ("completed", expected)
    assert expected == {"foo": "def|node-1|node-2"}
    assert (await ours.get_state("1")).next == (await theirs.aget_state(cfg())).next == ()


class Counted(TypedDict, total=False):
    x: int
    log: Annotated[list[str], operator.add]


def counted_chain(g: Any) -> Any:
    graph = g.StateGraph(Counted).add_node("a", lambda s: {"log": ["a"]})
    graph.add_node("b", lambda s: {"log": [f"b{s.get('x')}"]})
    return graph.add_edge(g.START, "a").add_edge("a", "b").add_edge("b", g.END)


async def test_a_command_update_starts_a_new_thread_from_start(checkpointer: Checkpointer) -> None:
    """A ``Command(update=...)`` as the first input of a thread ran nothing here (the run
    completed with the update alone, and ``run(None)`` after it ran nothing either), while
    ``update_state`` on a new thread makes START's nodes next; LangGraph's runs the graph
    from START with the update written first."""
    ours, theirs = pair(counted_chain, checkpointer)
    expected = await theirs.ainvoke(THEIRS.Command(update={"x": 3}), cfg())
    result = await ours.run(Command(update={"x": 3}), thread_id="1")
    assert (result.status, result.state) == ("completed", expected)
    assert expected == {"x": 3, "log": ["a", "b3"]}
    theirs_history = [h async for h in theirs.aget_state_history(cfg())]
    ours_history = await ours.history("1")
    assert [(h.source, h.step, h.next) for h in ours_history] == [
        (h.metadata["source"], h.metadata["step"], h.next) for h in theirs_history
    ]
    alone = await counted_chain(OURS).compile().run(Command(update={"x": 4}))  # no checkpointer
    assert alone.state == {"x": 4, "log": ["a", "b4"]}


class Joined(TypedDict):
    foo: Annotated[str, operator.add]


def multiple_updates(g: Any) -> Any:
    graph = g.StateGraph(Joined)
    graph.add_node(
        "node_a", lambda s: [g.Command(update={"foo": "a1"}), g.Command(update={"foo": "a2"})]
    )
    graph.add_node("node_b", lambda s: {"foo": "b"})
    return graph.add_edge(g.START, "node_a").add_edge("node_a", "node_b").add_edge("node_b", g.END)


@pytest.mark.parametrize("saved", [True, False], ids=["checkpointer", "in-memory"])
async def test_multiple_updates_in_the_streams(checkpointer: Checkpointer, saved: bool) -> None:
    """LangGraph's test_multiple_updates: a node returning a list of Commands streams one
    update per Command, and its ``tasks`` result holds every value of a key written twice
    (only the last one was shown)."""
    ours, theirs = pair(multiple_updates, checkpointer if saved else None)
    mine = [
        u async for u in ours.stream({"foo": ""}, thread_id="1" if saved else None, mode="updates")
    ]
    their = [u async for u in theirs.astream({"foo": ""}, cfg("1") if saved else None)]
    assert mine == their == [{"node_a": [{"foo": "a1"}, {"foo": "a2"}]}, {"node_b": {"foo": "b"}}]
    mine_tasks = [
        t["result"]
        async for t in ours.stream({"foo": ""}, thread_id="2" if saved else None, mode="tasks")
        if "result" in t
    ]
    their_tasks = [
        t["result"]
        async for t in theirs.astream({"foo": ""}, cfg("2") if saved else None, stream_mode="tasks")
        if "result" in t
    ]
    assert mine_tasks == their_tasks == [{"foo": {"$writes": ["a1", "a2"]}}, {"foo": "b"}]


async def test_snapshot_metadata_has_source_and_step_and_interrupts_is_a_tuple(
    checkpointer: Checkpointer,
) -> None:
    """LangGraph keeps a checkpoint's source and step in its metadata (``metadata["step"]``
    raised KeyError), and a snapshot's interrupts are a tuple (``== ()`` was False)."""
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer)
    await ours.run({"log": []}, thread_id="1")
    await theirs.ainvoke({"log": []}, cfg())
    mine, their = await ours.get_state("1"), await theirs.aget_state(cfg())
    assert (mine.metadata["source"], mine.metadata["step"]) == (
        their.metadata["source"],
        their.metadata["step"],
    )
    assert mine.interrupts == their.interrupts == ()
    mine_history = [(c.metadata["source"], c.metadata["step"]) for c in await ours.history("1")]
    their_history = [
        (s.metadata["source"], s.metadata["step"]) async for s in theirs.aget_state_history(cfg())
    ]
    assert mine_history == their_history


async def test_interrupt_in_a_router_says_where_to_ask_instead(checkpointer: Checkpointer) -> None:
    """LangGraph lets a router ask (its routers run inside the node's task); ours run after
    the step: the run fails with an error that says so (documented in docs/graph.md)."""

    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", lambda s: {"log": ["a"]})
        graph.add_node("x", lambda s: {"log": ["x"]})
        graph.add_node("y", lambda s: {"log": ["y"]})
        graph.add_edge(g.START, "a").add_edge("x", g.END).add_edge("y", g.END)
        return graph.add_conditional_edges("a", lambda s: g.interrupt("which?"), ["x", "y"])

    graph = build(OURS).compile(checkpointer=checkpointer)
    result = await graph.run({"log": []}, thread_id="1")
    assert result.status == "failed"
    assert "not in a router of add_conditional_edges" in str(result.error)


@pytest.mark.parametrize("name", ["review:legal", "a|b"])
def test_a_node_name_with_a_namespace_separator_is_refused(name: str) -> None:
    """LangGraph's ``add_node`` refuses ``:`` and ``|`` in a node name: they separate a
    namespace's segments (``node:task_id``, ``|``-joined). Ours took them, and then could not
    find such a sub-graph by its namespace (``update_state(ns=...)`` said it had none)."""
    with pytest.raises(ValueError, match="reserved character") as theirs:
        THEIRS.StateGraph(Log).add_node(name, lambda s: {})
    with pytest.raises(GraphValidationError) as ours:
        OURS.StateGraph(Log).add_node(name, lambda s: {})
    assert str(ours.value) == str(theirs.value)
    assert isinstance(ours.value, ValueError)


@pytest.mark.parametrize("args", [("a", 5), ("a", "text"), (5,)], ids=["int", "str", "alone"])
def test_a_node_that_is_not_callable_is_a_type_error(args: tuple[Any, ...]) -> None:
    """LangGraph's ``add_node`` raises ``TypeError`` ("Expected a Runnable, callable or
    dict") for a node that is no function; ours raised a ``GraphValidationError`` (a
    ``ValueError``), which a ported ``except TypeError`` did not catch."""
    with pytest.raises(TypeError, match="Expected a Runnable, callable or dict"):
        THEIRS.StateGraph(Log).add_node(*args)
    with pytest.raises(TypeError, match=r"must be a function, a compiled graph or an Agent, got"):
        OURS.StateGraph(Log).add_node(*args)


@pytest.mark.parametrize("name", [OURS.START, OURS.END])
def test_start_and_end_are_reserved_node_names_as_langgraphs(name: str) -> None:
    # LangGraph 1.2 reserves only these two (``__interrupt__`` and its other internal names
    # are taken as node names by both)
    with pytest.raises(ValueError, match="reserved"):
        THEIRS.StateGraph(Log).add_node(name, lambda s: {})
    with pytest.raises(GraphValidationError, match="reserved") as ours:
        OURS.StateGraph(Log).add_node(name, lambda s: {})
    assert isinstance(ours.value, ValueError)


async def test_an_empty_node_name_is_refused_where_langgraph_runs_it() -> None:
    """A difference on purpose (docs/graph.md, "What it does not do"): LangGraph 1.2 takes
    ``add_node("", f)`` and runs it (edges, routers, ``Send``, ``update_state(as_node="")``
    and breakpoints all name it). Ours refuses it when it is added, as a ``ValueError`` that
    says why: a node of a graph run is addressed by its name in steering commands (a
    ``graph_node`` target, events, the operator API), where an empty one names nothing."""

    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("", lambda s: {"log": ["empty"]})
        graph.add_node("b", lambda s: {"log": ["b"]})
        return graph.add_edge(g.START, "").add_edge("", "b").add_edge("b", g.END)

    theirs = build(THEIRS).compile()
    assert await theirs.ainvoke({"log": []}) == {"log": ["empty", "b"]}
    with pytest.raises(GraphValidationError, match="a node name cannot be empty") as ours:
        build(OURS)
    assert isinstance(ours.value, ValueError)


async def test_thread_apis_without_a_checkpointer_are_a_value_error() -> None:
    # LangGraph's get_state, get_state_history and update_state raise ValueError("No
    # checkpointer set") on a graph compiled without one (pregel/main.py,
    # _state_checkpointer); ours raised a GraphError, which is no ValueError
    ours, theirs = pair(abc_graph, None)
    with pytest.raises(ValueError, match="No checkpointer set"):
        await theirs.aget_state(cfg())
    with pytest.raises(ValueError, match="No checkpointer set"):
        await theirs.aupdate_state(cfg(), {"log": ["x"]})
    with pytest.raises(ValueError, match="No checkpointer set"):
        [s async for s in theirs.aget_state_history(cfg())]
    for call in (
        lambda: ours.get_state("1"),
        lambda: ours.update_state("1", {"log": ["x"]}),
        lambda: ours.history("1"),
        lambda: ours.fork("1", "c-1"),
        lambda: ours.run(None, thread_id="1", checkpoint_id="c-1"),
    ):
        with pytest.raises(GraphValidationError, match="needs a checkpointer") as raised:
            await call()
        assert isinstance(raised.value, ValueError)


async def test_checkpoint_metadata_names_the_parents_as_langgraphs(
    checkpointer: Checkpointer,
) -> None:
    """LangGraph's checkpoint metadata has ``parents``: ``{}`` for the root graph's, and for
    a sub-graph's the checkpoint of each graph above it that the sub-graph ran from
    (``{"": <root checkpoint id>}``); ours had no such key (``metadata["parents"]`` raised
    KeyError, ``filter={"parents": {}}`` matched nothing)."""

    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("x", lambda s: {"log": ["x"]})
        graph.add_node("p", abc_graph(g).compile())
        return graph.add_edge(g.START, "x").add_edge("x", "p").add_edge("p", g.END)

    ours, theirs = pair(build, checkpointer)
    await ours.run({"log": []}, thread_id="1")
    await theirs.ainvoke({"log": []}, cfg())
    their_root = [s async for s in theirs.aget_state_history(cfg())]
    mine_root = await ours.history("1")
    assert [s.metadata["parents"] for s in their_root] == [{}] * 4
    assert [c.metadata["parents"] for c in mine_root] == [{}] * 4
    assert len(await ours.history("1", filter={"parents": {}})) == 4
    # the sub-graph ran from the root's step-1 checkpoint (x done, p next)
    their_ran_from = next(s for s in their_root if s.metadata["step"] == 1)
    mine_ran_from = next(c for c in mine_root if c.step == 1)
    sub = (await ours.get_state("1", mine_ran_from.checkpoint_id, subgraphs=True)).tasks[0].state
    assert sub is not None
    mine_sub = await ours.history("1", ns=sub.ns)
    their_ns = next(ns for ns in theirs.checkpointer.storage["1"] if ns)
    their_sub = [
        s
        async for s in theirs.aget_state_history(
            {"configurable": {"thread_id": "1", "checkpoint_ns": their_ns}}
        )
    ]
    assert len(mine_sub) == len(their_sub) == 5
    assert all(
        s.metadata["parents"] == {"": their_ran_from.config["configurable"]["checkpoint_id"]}
        for s in their_sub
    )
    assert all(c.metadata["parents"] == {"": mine_ran_from.checkpoint_id} for c in mine_sub)
    assert (await ours.get_state("1", subgraphs=True)).metadata["parents"] == {}
