"""Ports of LangGraph's API, twelfth round: node error handlers (LangGraph 1.2's
``add_node(..., error_handler=...)``, ``set_node_defaults(error_handler=...)`` and
``langgraph.errors.NodeError``), from ``libs/langgraph/tests/test_retry.py``. Each program is
written once and run on both libraries (``OURS`` / ``THEIRS``), the results compared; then
the differences we keep, pinned, and what is ours alone (the errors).
"""

import operator
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph_kit import OURS, THEIRS, cfg, lg_errors, lg_memory, lg_types

from tinyagents.errors import GraphError, GraphValidationError
from tinyagents.graph import START, Command, NodeError, RetryPolicy, Send, StateGraph
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer, SqliteCheckpointer


class Foo(TypedDict):
    foo: str


class Routed(TypedDict):
    route: str
    foo: Annotated[list[str], operator.add]


def retry_of(g: Any, **kw: Any) -> Any:
    return (RetryPolicy if g is OURS else lg_types.RetryPolicy)(**kw)


def error_type(g: Any) -> Any:
    """Each library's ``NodeError``: what a handler's parameter is annotated with."""
    return NodeError if g is OURS else lg_errors.NodeError


async def run(g: Any, graph: Any, inp: Any, thread: str | None = None) -> Any:
    """The run's values on either library; its error, raised, as LangGraph's ``ainvoke``."""
    if g is THEIRS:
        return await graph.ainvoke(inp, cfg(thread) if thread else None)
    result = await graph.run(inp, thread_id=thread)
    if result.status == "failed":
        raise result.error
    return result.state


def saver(g: Any) -> Any:
    return MemoryCheckpointer() if g is OURS else lg_memory.InMemorySaver()


async def test_error_handler_runs_after_retry_exhaustion() -> None:
    # LangGraph: test_retry.py::test_graph_error_handler_runs_after_retry_exhaustion (the
    # handler's -> Command[Literal[...]] declares its goto: see test_goto_must_be_declared)
    async def program(g: Any) -> tuple[Any, ...]:
        attempts = 0
        captured: dict[str, Any] = {}

        def always_failing(state: Foo) -> Foo:
            nonlocal attempts
            attempts += 1
            raise ValueError("Always fails")

        def handler(state: Foo, error: error_type(g)) -> Command[Literal["after_handler"]]:  # type: ignore[valid-type]
            captured["node"], captured["error"] = error.node, error.error
            return g.Command(update={"foo": "handled"}, goto="after_handler")

        graph = (
            g.StateGraph(Foo)
            .add_node(
                "always_failing",
                always_failing,
                retry_policy=retry_of(
                    g, max_attempts=2, initial_interval=0.001, jitter=False, retry_on=ValueError
                ),
                error_handler=handler,
            )
            .add_node("after_handler", lambda s: {"foo": f"{s['foo']}_after"})
            .add_edge(g.START, "always_failing")
            .compile()
        )
        out = await run(g, graph, {"foo": ""})
        return attempts, out, captured["node"], repr(captured["error"])

    ours, theirs = await program(OURS), await program(THEIRS)
    assert (
        ours
        == theirs
        == (2, {"foo": "handled_after"}, "always_failing", "ValueError('Always fails')")
    )


async def test_error_handler_can_route_with_command() -> None:
    # LangGraph: test_retry.py::test_graph_error_handler_can_route_with_command
    async def program(g: Any) -> Any:
        def handler(state: Foo) -> Command[Literal["next_node"]]:
            return g.Command(update={"foo": "handled"}, goto="next_node")

        def fail(state: Foo) -> Foo:
            raise ValueError("Always fails")

        graph = (
            g.StateGraph(Foo)
            .add_node(
                "always_failing",
                fail,
                retry_policy=retry_of(g, max_attempts=1, retry_on=ValueError),
                error_handler=handler,
            )
            .add_node("next_node", lambda s: {"foo": f"{s['foo']}_next"})
            .add_edge(g.START, "always_failing")
            .compile()
        )
        return await run(g, graph, {"foo": ""})

    assert await program(OURS) == await program(THEIRS) == {"foo": "handled_next"}


@pytest.mark.parametrize("g", [OURS, THEIRS], ids=["ours", "theirs"])
async def test_error_handler_failure_fails_run(g: Any) -> None:
    # LangGraph: test_retry.py::test_graph_error_handler_failure_fails_run
    def fail(state: Foo) -> Foo:
        raise ValueError("Always fails")

    def handler(state: Foo) -> Foo:
        raise RuntimeError("handler failed")

    graph = (
        g.StateGraph(Foo)
        .add_node("always_failing", fail, error_handler=handler)
        .add_edge(g.START, "always_failing")
        .compile()
    )
    with pytest.raises(RuntimeError, match="handler failed"):
        await run(g, graph, {"foo": ""})


async def test_error_handler_handles_subgraph_internal_failure() -> None:
    # LangGraph: test_retry.py::test_graph_error_handler_handles_subgraph_internal_failure
    async def program(g: Any) -> tuple[Any, ...]:
        captured: dict[str, Any] = {}

        def sub_fail(state: Foo) -> Foo:
            raise ValueError("subgraph boom")

        def parent_handler(state: Foo, error: error_type(g)) -> Foo:  # type: ignore[valid-type]
            captured["node"], captured["error"] = error.node, error.error
            return {"foo": "handled_by_parent"}

        sub = g.StateGraph(Foo).add_node("sub_fail_node", sub_fail)
        sub = sub.add_edge(g.START, "sub_fail_node").compile()
        graph = (
            g.StateGraph(Foo)
            .add_node("subgraph_node", sub, error_handler=parent_handler)
            .add_edge(g.START, "subgraph_node")
            .compile()
        )
        out = await run(g, graph, {"foo": ""})
        return out, captured["node"], isinstance(captured["error"], ValueError)

    assert await program(OURS) == await program(THEIRS)
    assert await program(OURS) == ({"foo": "handled_by_parent"}, "subgraph_node", True)


async def test_error_handler_does_not_swallow_interrupt_concurrent() -> None:
    # LangGraph: test_retry.py::test_graph_error_handler_does_not_swallow_interrupt_concurrent
    async def program(g: Any) -> Any:
        def node_a(state: Foo) -> Foo:
            return {"foo": f"a_{g.interrupt('need human input')}"}

        graph = (
            g.StateGraph(Foo)
            .add_node("node_a", node_a, error_handler=lambda s: {"foo": "handled"})
            .add_node("node_b", lambda s: {})
            .add_edge(g.START, "node_a")
            .add_edge(g.START, "node_b")
            .compile(checkpointer=saver(g))
        )
        await run(g, graph, {"foo": ""}, "t")
        if g is THEIRS:
            state = await graph.aget_state(cfg("t"))
            asked = [i.value for t in state.tasks for i in t.interrupts]
        else:
            state = await graph.get_state("t")
            asked = [i.value for i in state.interrupts]
        again = await run(g, graph, g.Command(resume="yes"), "t")
        return state.values, asked, again

    assert await program(OURS) == await program(THEIRS)
    assert await program(OURS) == ({"foo": ""}, ["need human input"], {"foo": "a_yes"})


async def test_node_error_handlers_route_to_matching_handler() -> None:
    # LangGraph: test_retry.py::test_node_error_handlers_route_to_matching_handler
    async def program(g: Any) -> list[Any]:
        def fail_a(state: Routed) -> Routed:
            raise ValueError("a failed")

        def fail_b(state: Routed) -> Routed:
            raise RuntimeError("b failed")

        def handler_a(state: Routed, error: error_type(g)) -> Any:  # type: ignore[valid-type]
            assert error.node == "fail_a"
            return {"foo": ["handled_a"]}

        def handler_b(state: Routed, error: error_type(g)) -> Any:  # type: ignore[valid-type]
            assert error.node == "fail_b"
            return {"foo": ["handled_b"]}

        graph = (
            g.StateGraph(Routed)
            .add_node("route_node", lambda s: {"foo": []})
            .add_node("fail_a", fail_a, error_handler=handler_a)
            .add_node("fail_b", fail_b, error_handler=handler_b)
            .add_edge(g.START, "route_node")
            .add_conditional_edges(
                "route_node", lambda s: s["route"], path_map=["fail_a", "fail_b"]
            )
            .compile()
        )
        return [await run(g, graph, {"route": r, "foo": []}) for r in ("fail_a", "fail_b")]

    ours = await program(OURS)
    assert ours == await program(THEIRS)
    assert [o["foo"] for o in ours] == [["handled_a"], ["handled_b"]]


@pytest.mark.parametrize("g", [OURS, THEIRS], ids=["ours", "theirs"])
async def test_node_without_error_handler_still_fails_run(g: Any) -> None:
    # LangGraph: test_retry.py::test_node_without_error_handler_still_fails_run
    def fail(state: Foo) -> Foo:
        raise ValueError("no handler")

    graph = g.StateGraph(Foo).add_node("fail", fail).add_edge(g.START, "fail").compile()
    with pytest.raises(ValueError, match="no handler"):
        await run(g, graph, {"foo": ""})


async def test_handled_node_takes_none_of_its_edges() -> None:
    # LangGraph's runner: the handler's output goes where its goto says only; the failed
    # node's static edge and router do not run (probed on LangGraph 1.2.24)
    async def program(g: Any) -> list[Any]:
        def fail(state: Routed) -> Routed:
            raise ValueError("boom")

        def handler(state: Routed, error: error_type(g)) -> Any:  # type: ignore[valid-type]
            return {"foo": [f"handled:{error.node}"]}

        outs = []
        for edge in ("static", "router"):
            graph = (
                g.StateGraph(Routed)
                .add_node("a", fail, error_handler=handler)
                .add_node("b", lambda s: {"foo": ["b"]})
                .add_edge(g.START, "a")
            )
            if edge == "static":
                graph.add_edge("a", "b")
            else:
                graph.add_conditional_edges("a", lambda s: "b", ["b"])
            outs.append(await run(g, graph.compile(), {"route": "", "foo": []}))
        return outs

    ours = await program(OURS)
    assert ours == await program(THEIRS)
    assert [o["foo"] for o in ours] == [["handled:a"], ["handled:a"]]


async def test_handled_node_goes_on_after_a_resume_in_a_parallel_step() -> None:
    # the handled task's result is kept with the step while a sibling waits for its answer:
    # the step ends, on resume, without the failed node's edge (the same on LangGraph)
    async def program(g: Any) -> Any:
        def fail(state: Routed) -> Routed:
            raise ValueError("boom")

        def asks(state: Routed) -> Any:
            return {"foo": [f"asked:{g.interrupt('q')}"]}

        graph = (
            g.StateGraph(Routed)
            .add_node("a", fail, error_handler=lambda s: {"foo": ["handled"]})
            .add_node("asks", asks)
            .add_node("b", lambda s: {"foo": ["b"]})
            .add_edge(g.START, "a")
            .add_edge(g.START, "asks")
            .add_edge("a", "b")
            .compile(checkpointer=saver(g))
        )
        await run(g, graph, {"route": "", "foo": []}, "t")
        return await run(g, graph, g.Command(resume="yes"), "t")

    ours = await program(OURS)
    assert ours == await program(THEIRS)
    assert ours["foo"] == ["handled", "asked:yes"]


# -- set_node_defaults(error_handler=...) ------------------------------------------------


def route_graph(g: Any, **fails: Any) -> Any:
    """START -> route_node -> Command(goto=state["route"]) -> fail_a | fail_b, each failing."""

    def fail(name: str) -> Any:
        def node(state: Routed) -> Routed:
            raise RuntimeError(f"{name} failed")

        return node

    def route_node(state: Routed) -> Command[Literal["fail_a", "fail_b"]]:
        return g.Command(goto=state["route"])

    graph = g.StateGraph(Routed)
    if "defaults" in fails:
        graph = graph.set_node_defaults(error_handler=fails.pop("defaults"))
    graph.add_node("route_node", route_node)
    for name in ("fail_a", "fail_b"):
        graph.add_node(name, fail(name[-1]), **fails.get(name, {}))
    return graph.add_edge(g.START, "route_node").compile()


async def test_set_node_defaults_error_handler_catches_all_nodes() -> None:
    # LangGraph: test_retry.py::test_set_node_defaults_error_handler_catches_all_nodes
    async def program(g: Any) -> Any:
        seen: list[str] = []

        def default_handler(state: Routed, error: error_type(g)) -> Any:  # type: ignore[valid-type]
            seen.append(error.node)
            return {"foo": [f"handled_{error.node}"]}

        graph = route_graph(g, defaults=default_handler)
        outs = [await run(g, graph, {"route": r, "foo": []}) for r in ("fail_a", "fail_b")]
        return outs, seen

    ours = await program(OURS)
    assert ours == await program(THEIRS)
    assert [o["foo"] for o in ours[0]] == [["handled_fail_a"], ["handled_fail_b"]]


async def test_set_node_defaults_error_handler_overridden_by_node_handler() -> None:
    # LangGraph: test_retry.py::test_set_node_defaults_error_handler_overridden_by_node_handler
    async def program(g: Any) -> Any:
        seen: list[str] = []

        def node_handler(state: Routed, error: error_type(g)) -> Any:  # type: ignore[valid-type]
            seen.append(f"node:{error.node}")
            return {"foo": [f"node_handled_{error.node}"]}

        def default_handler(state: Routed, error: error_type(g)) -> Any:  # type: ignore[valid-type]
            seen.append(f"default:{error.node}")
            return {"foo": [f"default_handled_{error.node}"]}

        graph = route_graph(g, defaults=default_handler, fail_a={"error_handler": node_handler})
        outs = [await run(g, graph, {"route": r, "foo": []}) for r in ("fail_a", "fail_b")]
        return outs, seen

    ours = await program(OURS)
    assert ours == await program(THEIRS)
    assert ours[1] == ["node:fail_a", "default:fail_b"]


@pytest.mark.parametrize("g", [OURS, THEIRS], ids=["ours", "theirs"])
async def test_set_node_defaults_error_handler_skips_per_node_handler_nodes(g: Any) -> None:
    # LangGraph: test_retry.py::test_set_node_defaults_error_handler_skips_per_node_handler_nodes
    # and ::test_set_node_defaults_error_handler_failure_fails_run: a handler that raises fails
    # the run; no other handler catches it
    def boom(state: Foo) -> Foo:
        raise RuntimeError("node boom")

    def broken(state: Foo) -> Foo:
        raise RuntimeError("handler boom")

    graph = (
        g.StateGraph(Foo)
        .set_node_defaults(error_handler=lambda s: {"foo": "default recovered"})
        .add_node("always_failing", boom, error_handler=broken)
        .add_edge(g.START, "always_failing")
        .compile()
    )
    with pytest.raises(RuntimeError, match="handler boom"):
        await run(g, graph, {"foo": ""})
    graph = (
        g.StateGraph(Foo)
        .set_node_defaults(error_handler=broken)
        .add_node("always_failing", boom)
        .add_edge(g.START, "always_failing")
        .compile()
    )
    with pytest.raises(RuntimeError, match="handler boom"):
        await run(g, graph, {"foo": ""})


async def test_set_node_defaults_error_handler_receives_runnable_config() -> None:
    # LangGraph: test_retry.py::test_set_node_defaults_error_handler_receives_runnable_config
    async def program(g: Any) -> Any:
        captured: dict[str, Any] = {}

        def fail(state: Foo) -> Foo:
            raise RuntimeError("boom")

        def default_handler(
            state: Foo,
            error: error_type(g),  # type: ignore[valid-type]
            config: RunnableConfig,
        ) -> Foo:
            captured["thread_id"] = config["configurable"].get("thread_id")
            captured["node"] = error.node
            return {"foo": "handled"}

        graph = (
            g.StateGraph(Foo)
            .set_node_defaults(error_handler=default_handler)
            .add_node("always_failing", fail)
            .add_edge(g.START, "always_failing")
            .compile(checkpointer=saver(g))
        )
        return await run(g, graph, {"foo": ""}, "thread-7"), captured

    assert await program(OURS) == await program(THEIRS)
    assert (await program(OURS))[1] == {"thread_id": "thread-7", "node": "always_failing"}


async def test_set_node_defaults_combined_retry_and_error_handler() -> None:
    # LangGraph: test_retry.py::test_set_node_defaults_combined_retry_and_error_handler
    async def program(g: Any) -> Any:
        attempts = 0
        captured: dict[str, Any] = {}

        def fail(state: Foo) -> Foo:
            nonlocal attempts
            attempts += 1
            raise ValueError("Always fails")

        def handler(state: Foo, error: error_type(g)) -> Foo:  # type: ignore[valid-type]
            captured["error"] = str(error.error)
            return {"foo": "handled"}

        graph = (
            g.StateGraph(Foo)
            .set_node_defaults(
                retry_policy=retry_of(
                    g, max_attempts=2, initial_interval=0.001, jitter=False, retry_on=ValueError
                ),
                error_handler=handler,
            )
            .add_node("fail", fail)
            .add_edge(g.START, "fail")
            .compile()
        )
        return await run(g, graph, {"foo": ""}), attempts, captured

    assert await program(OURS) == await program(THEIRS)
    assert await program(OURS) == ({"foo": "handled"}, 2, {"error": "Always fails"})


async def test_error_handler_resumes_after_crash() -> None:
    # LangGraph: test_retry.py::test_error_handler_resumes_after_crash: the run that goes on
    # runs the handler again, not the failed node; the error it is given then is a saved
    # copy (LangGraph's serializer's, ours a GraphError holding the original's repr)
    async def program(g: Any) -> Any:
        calls = {"node": 0, "handler": 0}
        errors: list[Any] = []
        crash = [True]

        def failing(state: Foo) -> Foo:
            calls["node"] += 1
            raise RuntimeError("boom")

        def handler(state: Foo, error: error_type(g)) -> Foo:  # type: ignore[valid-type]
            calls["handler"] += 1
            errors.append(error)
            if crash[0]:
                raise RuntimeError("handler crash")
            return {"foo": "recovered"}

        graph = (
            g.StateGraph(Foo)
            .set_node_defaults(error_handler=handler)
            .add_node("fail", failing)
            .add_edge(g.START, "fail")
            .compile(checkpointer=saver(g))
        )
        with pytest.raises(RuntimeError, match="handler crash"):
            await run(g, graph, {"foo": ""}, "t1")
        first = dict(calls)
        crash[0] = False
        out = await run(g, graph, None, "t1")
        assert repr(errors[0].error) == "RuntimeError('boom')"
        assert [e.node for e in errors] == ["fail", "fail"]
        assert "boom" in str(errors[1].error)
        return first, out, calls

    ours = await program(OURS)
    assert ours == await program(THEIRS)
    assert ours == ({"node": 1, "handler": 1}, {"foo": "recovered"}, {"node": 1, "handler": 2})


async def test_error_handler_resumes_after_crash_multiple_nodes() -> None:
    # LangGraph: test_retry.py::test_error_handler_resumes_after_crash_multiple_nodes, without
    # its threading.Event (node b waited, blocking, for a's handler to start: a sync node of
    # ours runs on the event loop, so it would wait for good)
    async def program(g: Any) -> Any:
        calls = dict.fromkeys(("a", "b", "handler_a", "handler_b"), 0)
        crash = [True]

        def node(name: str) -> Any:
            def fail(state: Any) -> Any:
                calls[name] += 1
                raise RuntimeError(f"{name} failed")

            return fail

        def handler(name: str) -> Any:
            def handle(state: Any, error: error_type(g)) -> Any:  # type: ignore[valid-type]
                calls[f"handler_{name}"] += 1
                assert error.node == name and f"{name} failed" in str(error.error)
                if crash[0]:
                    raise RuntimeError(f"handler_{name} crash")
                return {"results": [f"recovered_{name}:{error.node}"]}

            return handle

        class State(TypedDict):
            results: Annotated[list[str], operator.add]

        graph = (
            g.StateGraph(State)
            .add_node("a", node("a"), error_handler=handler("a"))
            .add_node("b", node("b"), error_handler=handler("b"))
            .add_edge(g.START, "a")
            .add_edge(g.START, "b")
            .compile(checkpointer=saver(g))
        )
        with pytest.raises(RuntimeError, match="crash"):
            await run(g, graph, {"results": []}, "t1")
        first = dict(calls)
        crash[0] = False
        out = await run(g, graph, None, "t1")
        return first, sorted(out["results"]), calls

    ours = await program(OURS)
    theirs = await program(THEIRS)
    assert ours[1] == theirs[1] == ["recovered_a:a", "recovered_b:b"]
    assert ours[0] == {"a": 1, "b": 1, "handler_a": 1, "handler_b": 1}
    assert ours[2] == {"a": 1, "b": 1, "handler_a": 2, "handler_b": 2}
    # LangGraph runs the two handlers in threads: the first one's crash can end the step
    # before the other handler starts (seen once in CI on a loaded machine: b's), which then
    # runs only once, on the resume. Ours runs both before the crash ends the step, always.
    ran = {h: theirs[0][h] for h in ("handler_a", "handler_b")}
    assert set(ran.values()) <= {0, 1} and 1 in ran.values(), theirs
    assert theirs[0] == {**ours[0], **ran}
    assert theirs[2] == {**ours[2], **{h: 1 + n for h, n in ran.items()}}


async def test_interrupt_in_a_handler_resumes_the_handler() -> None:
    # a handler may ask (interrupt()); the answer resumes the handler, not the failed node
    async def program(g: Any) -> Any:
        calls = {"node": 0, "handler": 0}

        def failing(state: Foo) -> Foo:
            calls["node"] += 1
            raise RuntimeError("boom")

        def handler(state: Foo, error: error_type(g)) -> Foo:  # type: ignore[valid-type]
            calls["handler"] += 1
            return {"foo": f"{g.interrupt('retry?')}:{error.node}"}

        graph = (
            g.StateGraph(Foo)
            .add_node("fail", failing, error_handler=handler)
            .add_edge(g.START, "fail")
            .compile(checkpointer=saver(g))
        )
        await run(g, graph, {"foo": ""}, "t")
        return await run(g, graph, g.Command(resume="no"), "t"), calls

    ours = await program(OURS)
    assert ours == await program(THEIRS)
    assert ours == ({"foo": "no:fail"}, {"node": 1, "handler": 2})


# -- differences we keep ---------------------------------------------------------------


async def test_handler_update_is_streamed_as_the_failed_nodes() -> None:
    # the handler runs in the failed node's task: its update is the node's, and the task
    # ends without an error; LangGraph's handler is a node of its own, "__error_handler__a",
    # and its failed task ends with the error
    def fail(state: Foo) -> Foo:
        raise ValueError("boom")

    async def items(g: Any) -> list[Any]:
        graph = (
            g.StateGraph(Foo)
            .add_node("a", fail, error_handler=lambda s: {"foo": "h"})
            .add_edge(g.START, "a")
            .compile()
        )
        if g is OURS:
            return [i async for i in graph.stream({"foo": ""}, mode="updates")]
        return [i async for i in graph.astream({"foo": ""}, stream_mode="updates")]

    assert await items(OURS) == [{"a": {"foo": "h"}}]
    assert await items(THEIRS) == [{"__error_handler__a": {"foo": "h"}}]


def test_handler_is_no_node_of_the_graph() -> None:
    # LangGraph adds "__error_handler__<node>" (and "__default_error_handler__") as nodes, so
    # a user node of that name collides at compile
    # (test_set_node_defaults_error_handler_collides_with_user_node); ours are no nodes.
    # interrupt_before may name them on both (a no-op: test_langgraph_ports_15.py), but not
    # the handler of a node that has none
    builder = (
        StateGraph(Foo)
        .set_node_defaults(error_handler=lambda s: {"foo": "handled"})
        .add_node("__default_error_handler__", lambda s: s)
        .add_edge(START, "__default_error_handler__")
    )
    graph = builder.compile()
    assert list(graph.get_graph().nodes) == ["__start__", "__default_error_handler__", "__end__"]
    theirs = (
        THEIRS.StateGraph(Foo)
        .set_node_defaults(error_handler=lambda s: {"foo": "handled"})
        .add_node("__default_error_handler__", lambda s: s)
        .add_edge(THEIRS.START, "__default_error_handler__")
    )
    with pytest.raises(ValueError, match="__default_error_handler__"):
        theirs.compile()
    fails = StateGraph(Foo).add_node("a", lambda s: s, error_handler=lambda s: s)
    fails.add_edge(START, "a")
    fails.compile(interrupt_before=["__error_handler__a"])
    with pytest.raises(GraphValidationError, match="__error_handler__b"):
        fails.compile(interrupt_before=["__error_handler__b"])
    plain = StateGraph(Foo).add_node("a", lambda s: s).add_edge(START, "a")
    with pytest.raises(GraphValidationError, match="__default_error_handler__"):
        plain.compile(interrupt_after=["__default_error_handler__"])


def test_goto_must_be_declared() -> None:
    # as for a node's own Command(goto=...): a node only the handler's goto reaches is
    # unreachable unless declared (destinations=, or the handler's -> Command[Literal[...]]),
    # where LangGraph compiles it
    def handler(state: Foo) -> Any:
        return Command(goto="after")

    def build(**kw: Any) -> StateGraph:
        return (
            StateGraph(Foo)
            .add_node("a", lambda s: s, error_handler=handler, **kw)
            .add_node("after", lambda s: s)
            .add_edge(START, "a")
        )

    with pytest.raises(GraphValidationError, match="unreachable"):
        build().compile()
    build(destinations=["after"]).compile()

    def hinted(state: Foo) -> Command[Literal["after"]]:
        return Command(goto="after")

    defaults = StateGraph(Foo).set_node_defaults(error_handler=hinted)
    defaults.add_node("a", lambda s: s).add_node("after", lambda s: s).add_edge(START, "a")
    defaults.compile()


# -- ours alone ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [42, "handler", StateGraph, None.__class__])
def test_error_handler_must_be_a_function(bad: Any) -> None:
    with pytest.raises(GraphValidationError, match="error_handler must be a function"):
        StateGraph(Foo).add_node("a", lambda s: s, error_handler=bad)
    with pytest.raises(GraphValidationError, match="error_handler must be a function"):
        StateGraph(Foo).set_node_defaults(error_handler=bad)


def test_node_error_param_must_take_a_keyword() -> None:
    def positional_only(state: Foo, error: NodeError, /) -> Foo:
        return state

    with pytest.raises(GraphValidationError, match="NodeError parameter 'error'"):
        StateGraph(Foo).add_node("a", lambda s: s, error_handler=positional_only)


async def test_handler_forms() -> None:
    # async handlers; the failure before the config; keyword-only; none at all; a string
    # annotation; the handler's own retry default; a sync handler with a timeout default
    seen: list[Any] = []

    async def async_handler(state: Foo, error: NodeError) -> Foo:
        seen.append(("async", error.node))
        return {"foo": "async"}

    def before_config(state: Foo, error: NodeError, config: Any) -> Foo:
        seen.append(("config", error.node, config["configurable"]["thread_id"]))
        return {"foo": "config"}

    def keyword_only(state: Foo, *, error: NodeError, runtime: Any) -> Foo:
        seen.append(("kw", error.node, runtime.context))
        return {"foo": "kw"}

    def no_error(state: Foo) -> Foo:
        seen.append(("none", state["foo"]))
        return {"foo": "none"}

    def as_text(state: Foo, error: NodeError) -> Foo:
        seen.append(("text", type(error.error).__name__))
        return {"foo": "text"}

    as_text.__annotations__["error"] = "tinyagents.graph.NodeError"

    def fail(state: Foo) -> Foo:
        raise KeyError("k")

    for handler in (async_handler, before_config, keyword_only, no_error, as_text):
        graph = (
            StateGraph(Foo)
            .set_node_defaults(timeout=5.0)
            .add_node("a", fail, error_handler=handler)
            .add_edge(START, "a")
            .compile(checkpointer=MemoryCheckpointer())
        )
        out = await graph.run({"foo": "in"}, thread_id="t", context="ctx")
        assert out.status == "completed", out.error
    assert seen == [
        ("async", "a"),
        ("config", "a", "t"),
        ("kw", "a", "ctx"),
        ("none", "in"),
        ("text", "KeyError"),
    ]


async def test_handler_retry_default() -> None:
    # set_node_defaults(retry_policy=...) applies to the handlers too, as LangGraph's
    calls: list[str] = []

    def flaky(state: Foo, error: NodeError) -> Foo:
        calls.append("handler")
        if calls.count("handler") < 2:
            raise ValueError("once")
        return {"foo": "second"}

    def fail(state: Foo) -> Foo:
        calls.append("node")
        raise KeyError("k")

    graph = (
        StateGraph(Foo)
        .set_node_defaults(retry_policy=RetryPolicy(max_attempts=2, retry_on=ValueError))
        .add_node("a", fail, error_handler=flaky)
        .add_edge(START, "a")
        .compile()
    )
    out = await graph.run({"foo": ""})
    assert (out.state, calls) == ({"foo": "second"}, ["node", "handler", "handler"])


async def test_handler_of_a_send_task_gets_its_argument() -> None:
    class Fan(TypedDict):
        items: list[int]
        out: Annotated[list[str], operator.add]

    def work(arg: dict[str, int]) -> Any:
        if arg["n"] == 2:
            raise ValueError("two")
        return {"out": [f"ok{arg['n']}"]}

    def handler(arg: dict[str, int], error: NodeError) -> Any:
        return {"out": [f"handled{arg['n']}:{error.error}"]}

    graph = (
        StateGraph(Fan)
        .add_node("start", lambda s: {})
        .add_node("work", work, error_handler=handler)
        .add_edge(START, "start")
        .add_conditional_edges(
            "start", lambda s: [Send("work", {"n": n}) for n in s["items"]], ["work"]
        )
        .compile()
    )
    out = await graph.run({"items": [1, 2, 3], "out": []})
    assert out.state["out"] == ["ok1", "handled2:two", "ok3"]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_saved_error_of_a_resumed_handler(backend: str, tmp_path: Path) -> None:
    # the node's failure is saved before its handler runs: the run that goes on (on a
    # checkpointer read anew from its file, too) runs the handler, not the node
    seen: list[Any] = []
    crash = [True]

    def fail(state: Foo) -> Foo:
        raise ValueError("first")

    def handler(state: Foo, error: NodeError) -> Foo:
        seen.append(error.error)
        if crash[0]:
            raise RuntimeError("crash")
        return {"foo": "ok"}

    def build(cp: Checkpointer) -> Any:
        graph = StateGraph(Foo).add_node("a", fail, error_handler=handler)
        return graph.add_edge(START, "a").compile(checkpointer=cp)

    async def run_on_new(inp: Any) -> Any:
        if backend == "memory":
            return await build(memory).run(inp, thread_id="t")
        cp = SqliteCheckpointer(tmp_path / "cp.sqlite")  # the same file, read anew
        await cp.setup()
        try:
            return await build(cp).run(inp, thread_id="t")
        finally:
            await cp.aclose()

    memory = MemoryCheckpointer()
    assert (await run_on_new({"foo": ""})).status == "failed"
    crash[0] = False
    assert (await run_on_new(None)).state == {"foo": "ok"}
    assert len(seen) == 2
    assert isinstance(seen[1], GraphError)
    assert str(seen[1]) == "ValueError('first') (saved when node 'a' failed)"


async def test_plain_fast_path_untouched_without_handler() -> None:
    # a node without a handler that fails still fails the run with its own error (the fast
    # path of a plain node is not the handler's)
    graph = StateGraph(Foo).add_node("a", lambda s: 1 / 0).add_edge(START, "a").compile()
    out = await graph.run({"foo": ""})
    assert isinstance(out.error, ZeroDivisionError)
    assert graph.nodes["a"].plain
    handled = StateGraph(Foo).add_node("a", lambda s: 1 / 0, error_handler=lambda s: s)
    assert not handled.add_edge(START, "a").compile().nodes["a"].plain
