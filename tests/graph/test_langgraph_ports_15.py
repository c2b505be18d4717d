"""Ports of LangGraph's API, fifteenth round: a one-value sub-graph (LangGraph's root
channel, ``StateGraph(dict)``) under a state-class parent and a state class under a
one-value parent (``libs/langgraph/langgraph/pregel/_io.py``: a sub-graph's output is its
node's return value, read as any node's), and a ``Command`` as a ``Send``'s argument, kept
in a checkpoint while its task waits (``libs/langgraph/tests/test_pregel_async.py``'s
send-with-checkpointer cases, here with a ``Command`` argument; ``test_send_sequences``'s
checkpointed half is in ``test_langgraph_ports_root.py``), a breakpoint naming a node's error
handler (``test_retry.py::test_graph_error_handler_error_context_survives_checkpoint_
resume``), and ``test_pregel_async.py``'s ``test_graph_error_handler_async_runtime_info`` and
``test_node_error_handler_handles_subgraph_internal_failure_async``. Each program is written
once and run on both libraries (``OURS`` / ``THEIRS``), the outcomes compared; where ours
differs on purpose (a sent ``Command``'s update pairs), the difference is pinned.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, cfg, lg_errors, lg_memory, lg_types

from tinyagents.errors import InvalidUpdateError
from tinyagents.store.checkpoint import MemoryCheckpointer

SIDES = (OURS, THEIRS)


class S(TypedDict, total=False):
    x: int
    log: Annotated[list[str], operator.add]


def saver(g: Any) -> Any:
    return MemoryCheckpointer() if g is OURS else lg_memory.InMemorySaver()


async def invoke(g: Any, graph: Any, data: Any, thread: str = "1") -> Any:
    """The graph's final state on ``data`` in ``thread`` (LangGraph's ``ainvoke``), or the
    ``InvalidUpdateError`` it failed with, as ``("InvalidUpdateError", node-or-None)``."""
    error = InvalidUpdateError if g is OURS else lg_errors.InvalidUpdateError
    try:
        if g is OURS:
            result = await graph.run(data, thread_id=thread)
            if isinstance(result.error, error):
                raise result.error
            return result.raise_for_status().state
        return await graph.ainvoke(data, cfg(thread))
    except error:
        return "InvalidUpdateError"


async def updates(g: Any, graph: Any, data: Any, thread: str = "u") -> list[Any]:
    if g is OURS:
        return [i async for i in graph.stream(data, thread_id=thread, mode="updates")]
    return [i async for i in graph.astream(data, cfg(thread), stream_mode="updates")]


# --- a one-value sub-graph under a state class --------------------------------------------


def dict_child_under_class(g: Any, returns: Any) -> Any:
    """A ``StateGraph(S)`` whose node ``sub`` is a ``StateGraph(dict)`` whose one node
    returns ``returns`` (called with the value), then ``after`` logs the parent's ``x``."""

    def c(value: Any) -> Any:
        return returns(value) if callable(returns) else returns

    sub = g.StateGraph(dict).add_node("c", c).add_edge(g.START, "c").compile()
    return (
        g.StateGraph(S)
        .add_node("sub", sub)
        .add_node("after", lambda s: {"log": [f"after:{s.get('x')}"]})
        .add_edge(g.START, "sub")
        .add_edge("sub", "after")
        .compile(checkpointer=saver(g))
    )


async def test_a_one_value_sub_graphs_dict_is_its_class_parents_update() -> None:
    # the sub-graph's value (a dict) is what its node returns: the parent's update, through
    # the parent's reducers; ours wrote nothing back
    def returns(v: Any) -> Any:
        return {"x": v["x"] + 10, "log": ["c"]}

    outs = [
        await invoke(g, dict_child_under_class(g, returns), {"x": 1, "log": ["a"]}) for g in SIDES
    ]
    assert outs[0] == outs[1] == {"x": 11, "log": ["a", "c", "after:11"]}
    streams = [await updates(g, dict_child_under_class(g, returns), {"x": 1}) for g in SIDES]
    assert streams[0] == streams[1]
    assert streams[0] == [{"sub": {"x": 11, "log": ["c"]}}, {"after": {"log": ["after:11"]}}]


async def test_a_one_value_sub_graph_that_changes_nothing_returns_its_input() -> None:
    # its node returns None: its value is still the parent's state it started from, which
    # the parent takes as its update (a reducer field's items added again), as LangGraph's
    outs = [await invoke(g, dict_child_under_class(g, None), {"x": 1, "log": ["a"]}) for g in SIDES]
    assert outs[0] == outs[1] == {"x": 1, "log": ["a", "a", "after:1"]}


async def test_a_one_value_sub_graphs_value_that_is_no_update_fails_the_parent() -> None:
    outs = [await invoke(g, dict_child_under_class(g, 5), {"x": 1}) for g in SIDES]
    assert outs[0] == outs[1] == "InvalidUpdateError"


# --- a state class under a one-value parent ------------------------------------------------


def class_child_under_dict(g: Any) -> Any:
    """A ``StateGraph(dict)`` whose node ``sub`` is a ``StateGraph(S)`` adding 1 to ``x``."""

    def c(s: Any) -> Any:
        return {"x": s.get("x", 0) + 1, "log": [f"c:{sorted(s)}"]}

    sub = g.StateGraph(S).add_node("c", c).add_edge(g.START, "c").compile()
    return (
        g.StateGraph(dict)
        .add_node("sub", sub)
        .add_edge(g.START, "sub")
        .compile(checkpointer=saver(g))
    )


async def test_a_class_sub_graph_under_a_one_value_parent_reads_and_replaces_its_value() -> None:
    # the child reads its keys of the parent's value (``y`` is no key of it) and its output
    # values are the parent's new value; ours gave the child nothing and kept the value
    outs = [await invoke(g, class_child_under_dict(g), {"x": 1, "y": 2}) for g in SIDES]
    assert outs[0] == outs[1] == {"x": 2, "log": ["c:['log', 'x']"]}


# --- a Command as a Send's argument --------------------------------------------------------


def command_sent(g: Any, command: Any) -> Any:
    """START sends ``n`` the ``command``; ``n`` asks a question first, so the pending task
    (and its argument) is kept in the checkpoint until the answer comes, then logs what it
    was sent and the answer."""

    def n(arg: Any) -> Any:
        answer = g.interrupt("q")
        return {"log": [f"{answer}:{arg!r}"]}

    return (
        g.StateGraph(S)
        .add_node("n", n)
        .add_node("m", lambda s: None)
        .add_conditional_edges(g.START, lambda s: [g.Send("n", command(g))])
        .add_edge("n", g.END)
        .compile(checkpointer=saver(g))
    )


async def asked_then_answered(g: Any, command: Any) -> Any:
    graph = command_sent(g, command)
    if g is OURS:
        first = await graph.run({"log": []}, thread_id="1")
        assert first.status == "interrupted"
        result = await graph.run(g.Command(resume="yes"), thread_id="1")
        return result.raise_for_status().state
    first = await graph.ainvoke({"log": []}, cfg("1"))
    assert "__interrupt__" in first
    return await graph.ainvoke(g.Command(resume="yes"), cfg("1"))


async def test_a_command_sent_as_a_sends_argument_is_checkpointed() -> None:
    # the node gets the Command back after the resume; ours could not save it
    # ("a _Unset is not JSON-able") and failed the run
    def plain(g: Any) -> Any:
        return g.Command(update={"log": ["u"]}, goto="m")

    outs = [await asked_then_answered(g, plain) for g in SIDES]
    assert outs[0] == outs[1] == {"log": ["yes:Command(update={'log': ['u']}, goto='m')"]}


async def test_a_sent_commands_every_field_comes_back() -> None:
    def full(g: Any) -> Any:
        return g.Command(
            update=[("x", 1)],
            goto=["m", g.Send("m", {"x": 2})],
            resume={"a": 1},
            graph=g.Command.PARENT,
        )

    ours, theirs = [await asked_then_answered(g, full) for g in SIDES]
    assert ours["log"] == [
        "yes:Command(graph='__parent__', update=[('x', 1)], resume={'a': 1}, "
        "goto=['m', Send(node='m', arg={'x': 2})])"
    ]
    # a difference on purpose: LangGraph's msgpack gives the update's (key, value) pairs
    # back as lists, which its Command then no longer reads as pairs; ours keeps them pairs
    assert theirs["log"] == [ours["log"][0].replace("[('x', 1)]", "[['x', 1]]")]


# --- a breakpoint naming a node's error handler --------------------------------------------


def failing_with_handler(g: Any, NodeError: Any, **compile_kw: Any) -> Any:
    """``always_failing`` raises; its ``error_handler`` notes the error it got."""

    def always_failing(state: Any) -> Any:
        raise RuntimeError("failed before handler")

    def handler(state: Any, error: NodeError) -> Any:  # type: ignore[valid-type]
        return {"log": [f"handled {error.node}: {type(error.error).__name__}"]}

    return (
        g.StateGraph(S)
        .add_node("always_failing", always_failing, error_handler=handler)
        .add_edge(g.START, "always_failing")
        .compile(checkpointer=saver(g), **compile_kw)
    )


def node_error(g: Any) -> Any:
    from tinyagents.graph import NodeError

    return NodeError if g is OURS else lg_errors.NodeError


async def test_interrupt_before_naming_a_nodes_error_handler() -> None:
    # LangGraph: test_retry.py::test_graph_error_handler_error_context_survives_checkpoint_
    # resume: interrupt_before=["__error_handler__always_failing"], run, then run on. Ours
    # refused the name at compile ("unknown node(s)"); LangGraph 1.2 takes it and does not
    # stop there (the handler runs in the failed node's step), nor does ours
    for where in ("interrupt_before", "interrupt_after"):
        outs = []
        for g in SIDES:
            graph = failing_with_handler(
                g, node_error(g), **{where: ["__error_handler__always_failing"]}
            )
            first = await invoke(g, graph, {"log": []})
            again = await invoke(g, graph, None)
            outs.append((first, again))
        assert outs[0] == outs[1]
        assert outs[0][0] == outs[0][1] == {"log": ["handled always_failing: RuntimeError"]}


async def test_interrupt_before_naming_the_default_error_handler_is_refused() -> None:
    # set_node_defaults(error_handler=...) is LangGraph's "__default_error_handler__" node,
    # but its compile() refuses that name as a breakpoint ("Interrupt node ... not found"),
    # and so does ours (GraphValidationError is a ValueError), as the name of the handler of
    # a node that has none
    for g in SIDES:
        NodeError = node_error(g)

        def handler(state: Any, error: NodeError) -> Any:  # type: ignore[valid-type]
            return None

        builder = (
            g.StateGraph(S)
            .set_node_defaults(error_handler=handler)
            .add_node("a", lambda s: None)
            .add_edge(g.START, "a")
        )
        for name in ("__default_error_handler__", "__error_handler__b"):
            with pytest.raises(ValueError, match=name):
                builder.compile(checkpointer=saver(g), interrupt_before=[name])


@pytest.mark.parametrize("persistent", [False, True])
async def test_a_one_value_sub_graph_that_asks_hands_back_its_value_on_resume(
    persistent: bool,
) -> None:
    # the sub-graph's node asks a question; on the answer its value is the parent's update,
    # twice in a thread (a compile(checkpointer=True) sub-graph keeps its value between)
    def build(g: Any) -> Any:
        def c(value: Any) -> Any:
            answer = g.interrupt("q")
            return {"x": value["x"] + 1, "log": [answer]}

        options = {"checkpointer": True} if persistent else {}
        sub = g.StateGraph(dict).add_node("c", c).add_edge(g.START, "c").compile(**options)
        graph = g.StateGraph(S).add_node("sub", sub).add_edge(g.START, "sub")
        return graph.compile(checkpointer=saver(g))

    outs = []
    for g in SIDES:
        graph, states = build(g), []
        for i in range(2):
            for data in ({"x": 1, "log": ["a"]}, g.Command(resume=f"yes{i}")):
                state = await invoke(g, graph, data)
                states.append({k: v for k, v in state.items() if k != "__interrupt__"})
        outs.append(states)
    assert outs[0] == outs[1]
    assert outs[0][-1] == {"x": 2, "log": ["a", "yes0", "a", "yes1"]}


# --- async error handlers (test_pregel_async.py) --------------------------------------------


def retry_policy(g: Any, **kwargs: Any) -> Any:
    from tinyagents.graph import RetryPolicy

    return RetryPolicy(**kwargs) if g is OURS else lg_types.RetryPolicy(**kwargs)


async def run_to_state(g: Any, graph: Any, data: Any) -> Any:
    if g is THEIRS:
        return await graph.ainvoke(data)
    return (await graph.run(data)).raise_for_status().state


async def retried_then_handled(g: Any) -> Any:
    """An async node that always fails, retried twice, then its async handler: the final
    state, the attempts, and the failed node and error the handler got."""
    attempts: list[int] = []
    captured: dict[str, Any] = {}
    NodeError = node_error(g)

    async def always_failing(state: Any) -> Any:
        attempts.append(1)
        raise ValueError("Always fails async")

    async def handler(state: Any, error: NodeError) -> Any:  # type: ignore[valid-type]
        captured["node"], captured["error"] = error.node, error.error
        return {"log": ["handled_async"]}

    policy = retry_policy(
        g, max_attempts=2, initial_interval=0.01, jitter=False, retry_on=ValueError
    )
    graph = (
        g.StateGraph(S)
        .add_node("always_failing", always_failing, retry_policy=policy, error_handler=handler)
        .add_edge(g.START, "always_failing")
        .compile()
    )
    result = await run_to_state(g, graph, {"log": []})
    return (result, len(attempts), captured["node"], repr(captured["error"]))


async def test_graph_error_handler_async_runtime_info() -> None:
    # LangGraph: test_pregel_async.py::test_graph_error_handler_async_runtime_info
    outs = [await retried_then_handled(g) for g in SIDES]
    assert outs[0] == outs[1]
    assert outs[0] == (
        {"log": ["handled_async"]},
        2,
        "always_failing",
        "ValueError('Always fails async')",
    )


async def sub_graph_failure_handled(g: Any, one_value: bool) -> Any:
    """A sub-graph whose node fails, under a parent node with an async error handler: the
    final state, and the failed node and error the handler got."""
    captured: dict[str, Any] = {}
    NodeError = node_error(g)

    async def sub_fail(state: Any) -> Any:
        raise ValueError("async subgraph boom")

    async def handler(state: Any, error: NodeError) -> Any:  # type: ignore[valid-type]
        captured["node"], captured["error"] = error.node, error.error
        return {"log": ["handled_async_subgraph"]}

    sub = (
        g.StateGraph(dict if one_value else S)
        .add_node("sub_fail", sub_fail)
        .add_edge(g.START, "sub_fail")
        .compile()
    )
    graph = (
        g.StateGraph(S)
        .add_node("subgraph_node", sub, error_handler=handler)
        .add_edge(g.START, "subgraph_node")
        .compile()
    )
    result = await run_to_state(g, graph, {"log": []})
    return (result, captured["node"], repr(captured["error"]))


@pytest.mark.parametrize("one_value", [False, True])
async def test_node_error_handler_handles_subgraph_internal_failure_async(
    one_value: bool,
) -> None:
    # LangGraph: test_pregel_async.py::test_node_error_handler_handles_subgraph_internal_
    # failure_async: the parent node's handler gets the error under the parent node's name.
    # Also with a one-value (StateGraph(dict)) sub-graph.
    outs = [await sub_graph_failure_handled(g, one_value) for g in SIDES]
    assert outs[0] == outs[1]
    assert outs[0] == (
        {"log": ["handled_async_subgraph"]},
        "subgraph_node",
        "ValueError('async subgraph boom')",
    )


async def test_a_one_value_sub_graphs_streams_with_subgraphs() -> None:
    # the sub-graph's own items and its node's update in the parent's, as LangGraph's
    def build(g: Any) -> Any:
        sub = (
            g.StateGraph(dict)
            .add_node("c", lambda v: {"x": v["x"] + 1, "log": ["c"]})
            .add_edge(g.START, "c")
            .compile()
        )
        graph = g.StateGraph(S).add_node("sub", sub).add_edge(g.START, "sub")
        return graph.compile(checkpointer=saver(g))

    outs = []
    for g in SIDES:
        graph, data, mode = build(g), {"x": 1, "log": []}, ["updates", "values"]
        if g is OURS:
            items = [i async for i in graph.stream(data, thread_id="1", mode=mode, subgraphs=True)]
        else:
            stream = graph.astream(data, cfg("1"), stream_mode=mode, subgraphs=True)
            items = [i async for i in stream]
        # a namespace's task id differs between the libraries: its node names only
        outs.append([(tuple(n.split(":")[0] for n in ns), *rest) for ns, *rest in items])
    assert outs[0] == outs[1]
    assert outs[0][-2:] == [
        ((), "updates", {"sub": {"x": 2, "log": ["c"]}}),
        ((), "values", {"x": 2, "log": ["c"]}),
    ]


class In(TypedDict, total=False):
    x: int


class Out(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


async def test_a_class_sub_graphs_own_schemas_under_a_one_value_parent() -> None:
    # the child's input_schema picks what it reads of the parent's value, its output_schema
    # what the parent's new value holds
    def build(g: Any) -> Any:
        def d(s: Any) -> Any:
            return {"x": s.get("x", 0) * 10, "log": [f"d{sorted(s)}"]}

        sub = g.StateGraph(S, input_schema=In, output_schema=Out).add_node("d", d)
        sub = sub.add_edge(g.START, "d").compile()
        return g.StateGraph(dict).add_node("sub", sub).add_edge(g.START, "sub").compile()

    outs = [await run_to_state(g, build(g), {"x": 1, "y": 2, "z": 3}) for g in SIDES]
    assert outs[0] == outs[1] == {"log": ["d['log', 'x']"]}
