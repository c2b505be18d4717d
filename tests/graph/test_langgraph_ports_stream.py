"""The ``updates`` and ``values`` streams item by item as LangGraph's ``astream`` gives them
(ported from ``test_pregel_async.py``: ``test_dynamic_interrupt``,
``test_nested_graph_interrupts_parallel``, ``test_stream_subgraphs_during_execution``, and
the shapes ``_loop.output_writes`` makes): a task's update as the task finishes, the updates
of tasks finished before a pause again (marked cached) when the step goes on, one
``__interrupt__`` item per paused task. Each program runs on both libraries."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, abc_graph, cfg, pair, shape

from tinyagents.graph import NodeContext, StateGraph
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


async def theirs_items(graph: Any, data: Any, mode: Any, **kw: Any) -> list[Any]:
    return [item async for item in graph.astream(data, cfg(), stream_mode=mode, **kw)]


async def ours_items(graph: Any, data: Any, mode: Any, **kw: Any) -> list[Any]:
    return [item async for item in graph.stream(data, thread_id="1", mode=mode, **kw)]


def plain(items: list[Any]) -> list[Any]:
    """Items with each ``Interrupt`` as its value (ids and classes are each library's)."""

    def one(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: [i.value for i in v] if k == "__interrupt__" else one(v)
                for k, v in value.items()
            }
        if isinstance(value, tuple):
            return tuple(one(v) for v in value)
        return value

    return [one(item) for item in items]


def half_paused_graph(g: Any) -> Any:
    """``asker`` pauses while ``other`` finishes, then both lead to ``after``."""

    def asker(state: Any) -> dict[str, Any]:
        return {"log": ["asker:" + g.interrupt("q")]}

    graph = g.StateGraph(Log)
    graph.add_node("asker", asker).add_node("other", lambda s: {"log": ["other"]})
    graph.add_node("after", lambda s: {"log": ["after"]})
    graph.add_edge(g.START, "asker").add_edge(g.START, "other")
    return graph.add_edge(["asker", "other"], "after")


async def test_a_resumed_step_streams_its_finished_tasks_updates_again_as_cached(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(half_paused_graph, checkpointer)
    first = await theirs_items(theirs, {"log": []}, "updates")
    assert plain(first) == [{"__interrupt__": ["q"]}, {"other": {"log": ["other"]}}]
    assert plain(await ours_items(ours, {"log": []}, "updates")) == plain(first)

    expected = await theirs_items(theirs, THEIRS.Command(resume="yes"), "updates")
    assert expected == [
        {"other": {"log": ["other"]}, "__metadata__": {"cached": True}},
        {"asker": {"log": ["asker:yes"]}},
        {"after": {"log": ["after"]}},
    ]
    assert await ours_items(ours, OURS.Command(resume="yes"), "updates") == expected


async def test_continuing_a_paused_step_streams_the_cached_updates_before_asking_again(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(half_paused_graph, checkpointer)
    await theirs_items(theirs, {"log": []}, "updates")
    await ours_items(ours, {"log": []}, "updates")
    expected = plain(await theirs_items(theirs, None, "updates"))
    assert expected == [
        {"other": {"log": ["other"]}, "__metadata__": {"cached": True}},
        {"__interrupt__": ["q"]},
    ]
    assert plain(await ours_items(ours, None, "updates")) == expected


def two_askers_graph(g: Any) -> Any:
    def a(state: Any) -> dict[str, Any]:
        return {"log": [g.interrupt("qa")]}

    def b(state: Any) -> dict[str, Any]:
        return {"log": [g.interrupt("qb")]}

    graph = g.StateGraph(Log).add_node("a", a).add_node("b", b)
    return graph.add_edge(g.START, "a").add_edge(g.START, "b")


@pytest.mark.parametrize("mode", ["updates", "values"])
async def test_each_paused_task_streams_its_own_interrupt_item(
    mode: str, checkpointer: Checkpointer
) -> None:
    ours, theirs = pair(two_askers_graph, checkpointer)
    expected = plain(await theirs_items(theirs, {"log": []}, mode))
    if mode == "updates":
        assert expected == [{"__interrupt__": ["qa"]}, {"__interrupt__": ["qb"]}]
    else:
        assert expected == [
            {"log": []},
            {"log": [], "__interrupt__": ["qa"]},
            {"log": [], "__interrupt__": ["qb"]},
        ]
    assert plain(await ours_items(ours, {"log": []}, mode)) == expected


def racing_graph(g: Any, *, fail: bool = False) -> Any:
    """``a_slow`` finishes only once ``b_fast`` has (it waits for b's event); with ``fail``
    it then raises."""
    b_done = asyncio.Event()

    async def a_slow(state: Any) -> dict[str, Any]:
        await b_done.wait()
        if fail:
            raise ValueError("a failed")
        return {"log": ["a"]}

    async def b_fast(state: Any) -> dict[str, Any]:
        b_done.set()
        return {"log": ["b"]}

    graph = g.StateGraph(Log).add_node("a_slow", a_slow).add_node("b_fast", b_fast)
    return graph.add_edge(g.START, "a_slow").add_edge(g.START, "b_fast")


async def test_a_tasks_update_streams_when_it_finishes_not_in_task_order() -> None:
    ours, theirs = pair(racing_graph, None)
    expected = await theirs_items(theirs, {"log": []}, "updates")
    assert expected == [{"b_fast": {"log": ["b"]}}, {"a_slow": {"log": ["a"]}}]
    assert await ours_items(ours, {"log": []}, "updates") == expected


async def test_a_finished_tasks_update_streams_before_its_siblings_error() -> None:
    ours, theirs = pair(lambda g: racing_graph(g, fail=True), None)
    for graph in (theirs, ours):
        seen: list[Any] = []
        with pytest.raises(ValueError, match="a failed"):
            async for item in (
                graph.astream({"log": []}, stream_mode="updates")
                if graph is theirs
                else graph.stream({"log": []}, mode="updates")
            ):
                seen.append(item)
        assert seen == [{"b_fast": {"log": ["b"]}}]


async def test_updates_interleave_with_the_custom_items_of_the_node_that_wrote_them() -> None:
    b_done = asyncio.Event()

    async def a_slow(state: Any, ctx: NodeContext) -> dict[str, Any]:
        await b_done.wait()
        ctx.emit("a done")
        return {"log": ["a"]}

    async def b_fast(state: Any, ctx: NodeContext) -> dict[str, Any]:
        ctx.emit("b done")
        b_done.set()
        return {"log": ["b"]}

    graph = StateGraph(Log).add_node("a_slow", a_slow).add_node("b_fast", b_fast)
    graph.add_edge("__start__", "a_slow").add_edge("__start__", "b_fast")
    items = await ours_items(graph.compile(), {"log": []}, ["updates", "custom"])
    assert items == [
        ("custom", "b done"),
        ("updates", {"b_fast": {"log": ["b"]}}),
        ("custom", "a done"),
        ("updates", {"a_slow": {"log": ["a"]}}),
    ]


async def test_the_input_values_item_comes_before_the_first_step_runs() -> None:
    calls: list[str] = []

    def build(g: Any) -> Any:
        def node(state: Any) -> dict[str, Any]:
            calls.append("n")
            return {"log": ["n"]}

        graph = g.StateGraph(Log).add_node("n", node)
        return graph.add_edge(g.START, "n").add_edge("n", g.END)

    ours, theirs = pair(build, None)
    async for item in theirs.astream({"log": ["in"]}, stream_mode="values"):
        assert item == {"log": ["in"]}
        break
    assert calls == []
    async for item in ours.stream({"log": ["in"]}, mode="values"):
        assert item == {"log": ["in"]}
        break
    assert calls == []  # the reader stopped before the run stepped


async def test_subgraph_items_arrive_while_the_parent_step_still_runs() -> None:
    # LangGraph's test_stream_subgraphs_during_execution: the parent's other node waits for
    # the reader to have seen the sub-graph's first update; a stream that held sub-graph
    # items until the parent step ended would never get there (the wait_for fails it)
    seen_inner = asyncio.Event()

    async def outer(state: Any) -> dict[str, Any]:
        await seen_inner.wait()
        return {"log": ["outer"]}

    inner = StateGraph(Log).add_node("i1", lambda s: {"log": ["i1"]})
    inner.add_node("i2", lambda s: {"log": ["i2"]}).add_edge("__start__", "i1")
    inner.add_edge("i1", "i2")
    graph = StateGraph(Log).add_node("inner", inner.compile()).add_node("outer", outer)
    graph.add_edge("__start__", "inner").add_edge("__start__", "outer")

    async def read() -> list[Any]:
        items = []
        async for ns, item in graph.compile().stream({"log": []}, mode="updates", subgraphs=True):
            items.append((tuple(part.split(":")[0] for part in ns), item))
            if "i1" in item:
                seen_inner.set()
        return items

    items = await asyncio.wait_for(read(), timeout=60)
    assert items[0] == (("inner",), {"i1": {"log": ["i1"]}})
    assert ((), {"outer": {"log": ["outer"]}}) in items


def test_leaving_a_stream_early_in_a_script_logs_nothing() -> None:
    # the generator is closed by asyncio.run's shutdown, in another context: the interrupt
    # scope it had set across a yield could not be reset there ("Token was created in a
    # different Context", logged as an error of the loop)
    problems: list[dict[str, Any]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: problems.append(ctx))
        graph = StateGraph(Log).add_node("a", lambda s: {"log": ["a"]})
        graph.add_node("b", lambda s: {"log": ["b"]}).add_edge("__start__", "a")
        async for item in graph.add_edge("a", "b").compile().stream({"log": []}):
            assert item == {"log": []}
            break

    asyncio.run(main())
    assert problems == []


async def test_a_subgraph_stopped_at_its_breakpoint_streams_its_siblings_writes(
    checkpointer: Checkpointer,
) -> None:
    def build(g: Any) -> Any:
        sub = g.StateGraph(Log).add_node("s1", lambda s: {"log": ["s1"]})
        sub.add_node("s2", lambda s: {"log": ["s2"]}).add_edge(g.START, "s1")
        sub.add_edge("s1", "s2")
        graph = g.StateGraph(Log).add_node("sub", sub.compile(interrupt_before=["s2"]))
        graph.add_node("o", lambda s: {"log": ["o"]})
        return graph.add_edge(g.START, "sub").add_edge(g.START, "o")

    ours, theirs = pair(build, checkpointer)
    expected = await theirs_items(theirs, {"log": []}, "values")
    assert expected == [{"log": []}, {"log": ["o"]}]
    assert await ours_items(ours, {"log": []}, "values") == expected


@pytest.mark.parametrize("mode", ["updates", "values"])
async def test_a_paused_sibling_sub_graph_does_not_ask_its_siblings_question_again(
    mode: str, checkpointer: Checkpointer
) -> None:
    # the sub-graph's own pause cleared the questions its parent's step had shown, and the
    # parent's step end showed the sibling's question a second time
    def build(g: Any) -> Any:
        sub = g.StateGraph(Log).add_node("inner", lambda s: {"log": [g.interrupt("inner?")]})
        sub.add_edge(g.START, "inner").add_edge("inner", g.END)
        graph = g.StateGraph(Log).add_node("a", lambda s: {"log": [g.interrupt("a?")]})
        graph.add_node("b", sub.compile()).add_edge(g.START, "a").add_edge(g.START, "b")
        return graph.add_edge("a", g.END).add_edge("b", g.END)

    ours, theirs = pair(build, checkpointer)
    expected = plain(await theirs_items(theirs, {"log": []}, mode))
    asked = [item["__interrupt__"] for item in expected if "__interrupt__" in item]
    assert asked == [["a?"], ["inner?"]]
    assert plain(await ours_items(ours, {"log": []}, mode)) == expected


async def test_stream_takes_per_run_breakpoints_as_astream(checkpointer: Checkpointer) -> None:
    """LangGraph's ``astream(..., interrupt_before=[...])``; ``stream`` "takes the arguments
    of ``run``" but refused ``interrupt_before`` / ``interrupt_after`` (a ``TypeError``)."""
    ours, theirs = pair(lambda g: abc_graph(g, []), checkpointer)
    for where, thread in (("interrupt_before", "1"), ("interrupt_after", "2")):
        items = [
            item
            async for item in ours.stream(
                {"log": []}, thread_id=thread, mode="updates", **{where: ["b"]}
            )
        ]
        expected = [
            item
            async for item in theirs.astream(
                {"log": []}, cfg(thread), stream_mode="updates", **{where: ["b"]}
            )
        ]
        assert items == expected
        rest = [item async for item in ours.stream(None, thread_id=thread, mode="updates")]
        assert rest == [i async for i in theirs.astream(None, cfg(thread), stream_mode="updates")]


def sends_beside_nodes_graph(g: Any) -> Any:
    """``d`` routes to ``c``, two ``Send``s to ``w`` and ``a``, ``b``; the nodes are added
    out of name order (c, b, a). Every node is async and never waits, so each finishes in
    the order it was started."""
    graph = g.StateGraph(Log)
    for name in ("c", "b", "a", "d", "w"):

        async def node(arg: Any, name: str = name) -> dict[str, Any]:
            return {"log": [f"{name}{arg.get('i', '')}"]}

        graph.add_node(name, node)
    graph.add_edge(g.START, "d")
    return graph.add_conditional_edges(
        "d", lambda s: ["c", g.Send("w", {"i": 1}), "a", g.Send("w", {"i": 2}), "b"]
    )


@pytest.mark.parametrize("mode", ["updates", "tasks"])
async def test_a_steps_tasks_start_sends_first_then_nodes_by_name(
    mode: str, checkpointer: Checkpointer
) -> None:
    # LangGraph starts a step's tasks in the order it prepares them: the Sends as they were
    # made, then the nodes the edges triggered sorted by name (not add_node order); the
    # updates come as the nodes return, so in that order here (the tasks' ends, once the
    # results are saved, in the order the store answers). The writes are still applied in
    # task order (the state is the same).
    ours, theirs = pair(sends_beside_nodes_graph, checkpointer)

    def names(items: list[Any]) -> list[Any]:
        if mode == "updates":
            return [next(iter(i.values()))["log"][0] for i in items]
        return [(i["name"], "start" if "input" in i else "end") for i in items]

    expected = names(await theirs_items(theirs, {"log": []}, mode))
    if mode == "updates":
        assert expected == ["d", "w1", "w2", "a", "b", "c"]
    else:
        assert expected[2:7] == [("w", "start")] * 2 + [(n, "start") for n in "abc"]
        assert expected[7:] == [("w", "end")] * 2 + [(n, "end") for n in "abc"]
    ours_names = names(await ours_items(ours, {"log": []}, mode))
    if mode == "updates":
        assert ours_names == expected
    else:
        assert ours_names[:7] == expected[:7]
        assert sorted(ours_names[7:]) == sorted(expected[7:])
    assert (await ours.get_state("1")).values == (await theirs.aget_state(cfg())).values


async def test_a_resumed_step_lists_the_start_of_its_finished_tasks_too(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph lists every task of the step it goes on with, those that finished before
    # the pause too (their updates come again, cached; they do not run, so have no end)
    ours, theirs = pair(half_paused_graph, checkpointer)
    await theirs_items(theirs, {"log": []}, "tasks")
    await ours_items(ours, {"log": []}, "tasks")

    def kind(item: tuple[str, Any]) -> tuple[str, Any]:
        mode, payload = item
        if mode == "updates":
            return (mode, payload)
        return (payload["name"], "start" if "input" in payload else "end")

    expected = [
        kind(i)
        for i in await theirs_items(theirs, THEIRS.Command(resume="yes"), ["tasks", "updates"])
    ]
    assert expected == [
        ("asker", "start"),
        ("other", "start"),
        ("updates", {"other": {"log": ["other"]}, "__metadata__": {"cached": True}}),
        ("updates", {"asker": {"log": ["asker:yes"]}}),
        ("asker", "end"),
        ("after", "start"),
        ("updates", {"after": {"log": ["after"]}}),
        ("after", "end"),
    ]
    ours_items_ = await ours_items(ours, OURS.Command(resume="yes"), ["tasks", "updates"])
    assert [kind(i) for i in ours_items_] == expected


async def test_a_tasks_start_carries_its_nodes_metadata(checkpointer: Checkpointer) -> None:
    # LangGraph's task start has the node's add_node(metadata=...) under "metadata" (and no
    # such key for a node without any)
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", lambda s: {"log": ["a"]}, metadata={"team": "x"})
        graph.add_node("b", lambda s: {"log": ["b"]})
        return graph.add_edge(g.START, "a").add_edge("a", "b")

    ours, theirs = pair(build, checkpointer)
    expected = [
        {k: v for k, v in i.items() if k not in ("id", "triggers")}
        for i in await theirs_items(theirs, {"log": []}, "tasks")
        if "input" in i
    ]
    assert expected == [
        {"name": "a", "input": {"log": []}, "metadata": {"team": "x"}},
        {"name": "b", "input": {"log": ["a"]}},
    ]
    starts = [i for i in await ours_items(ours, {"log": []}, "tasks") if "input" in i]
    assert [{k: v for k, v in i.items() if k != "id"} for i in starts] == expected


async def test_a_subgraph_stopped_at_its_breakpoint_has_no_task_end(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph's sub-graph task that stops at the sub-graph's breakpoint asks nothing and
    # has no result: its tasks stream has its start and no end
    def build(g: Any) -> Any:
        child = g.StateGraph(Log).add_node("c0", lambda s: {"log": ["c0"]})
        child.add_node("c1", lambda s: {"log": ["c1"]}).add_edge(g.START, "c0")
        child = child.add_edge("c0", "c1").compile(interrupt_before=["c1"])
        graph = g.StateGraph(Log).add_node("sub", child).add_node("z", lambda s: {"log": ["z"]})
        return graph.add_edge(g.START, "sub").add_edge("sub", "z")

    ours, theirs = pair(build, checkpointer)

    def kind(item: tuple[Any, dict[str, Any]]) -> tuple[Any, ...]:
        ns, payload = item
        return (shape(ns), payload["name"], "start" if "input" in payload else "end")

    expected = [kind(i) for i in await theirs_items(theirs, {"log": []}, "tasks", subgraphs=True)]
    assert expected == [
        ((), "sub", "start"),
        (("sub",), "c0", "start"),
        (("sub",), "c0", "end"),
    ]
    items = await ours_items(ours, {"log": []}, "tasks", subgraphs=True)
    assert [kind(i) for i in items] == expected


async def test_a_paused_step_that_goes_on_paused_streams_its_finished_tasks_writes_last(
    checkpointer: Checkpointer,
) -> None:
    # continuing a step whose finished task wrote while another still waits: LangGraph's
    # values stream ends, as the first call's does, with the state holding that task's
    # writes (the state the call returns), though no task of the step finished this time
    ours, theirs = pair(half_paused_graph, checkpointer)
    expected = plain(await theirs_items(theirs, {"log": []}, "values"))
    assert expected == [{"log": []}, {"log": [], "__interrupt__": ["q"]}, {"log": ["other"]}]
    assert plain(await ours_items(ours, {"log": []}, "values")) == expected

    assert plain(await theirs_items(theirs, None, "values")) == expected
    assert plain(await ours_items(ours, None, "values")) == expected

    expected = plain(await theirs_items(theirs, THEIRS.Command(update={"log": ["u"]}), "values"))
    assert expected == [
        {"log": ["u"]},
        {"log": ["u"], "__interrupt__": ["q"]},
        {"log": ["u", "other"]},
    ]
    assert plain(await ours_items(ours, OURS.Command(update={"log": ["u"]}), "values")) == expected
    assert (await ours.get_state("1")).values == expected[-1]


async def test_a_paused_subgraph_streams_no_state_of_its_finished_tasks_writes(
    checkpointer: Checkpointer,
) -> None:
    # the last values item with the paused step's finished writes is the graph's own: a
    # sub-graph's run hands its pause to its parent without one (LangGraph's nested loop
    # does not suppress the interrupt, so it never streams that item)
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("sub", half_paused_graph(g).compile())
        graph.add_node("side", lambda s: {"log": ["side"]})
        return graph.add_edge(g.START, "sub").add_edge(g.START, "side")

    ours, theirs = pair(build, checkpointer)

    def shaped(items: list[Any]) -> list[Any]:
        return [(shape(ns), payload) for ns, payload in plain(items)]

    expected = shaped(await theirs_items(theirs, {"log": []}, "values", subgraphs=True))
    assert expected == [
        ((), {"log": []}),
        (("sub",), {"log": []}),
        (("sub",), {"log": [], "__interrupt__": ["q"]}),
        ((), {"log": [], "__interrupt__": ["q"]}),
        ((), {"log": ["side"]}),
    ]
    items = await ours_items(ours, {"log": []}, "values", subgraphs=True)
    assert shaped(items) == expected


async def test_a_tasks_end_streams_as_it_finishes_not_once_its_result_is_saved() -> None:
    # LangGraph streams a task's end with its update, as the node returns (the result is
    # saved in the background): "other" ends before its sibling sub-graph runs on, as in
    # the updates stream, not once the checkpointer has taken its result
    def build(g: Any) -> Any:
        child = g.StateGraph(Log).add_node("c0", lambda s: {"log": ["c0"]})
        child.add_node("c1", lambda s: {"log": [g.interrupt("q")]}).add_edge(g.START, "c0")
        graph = g.StateGraph(Log).add_node("sub", child.add_edge("c0", "c1").compile())

        async def other(state: Any) -> dict[str, Any]:
            return {"log": ["other"]}

        graph.add_node("other", other)
        return graph.add_edge(g.START, "sub").add_edge(g.START, "other")

    ours, theirs = pair(build, MemoryCheckpointer())

    def kind(item: tuple[str, Any]) -> tuple[str, Any]:
        mode, payload = item
        if mode == "updates":
            return (mode, next(iter(payload)))
        return (payload["name"], "start" if "input" in payload else "end")

    expected = [kind(i) for i in await theirs_items(theirs, {"log": []}, ["tasks", "updates"])]
    assert expected == [
        ("other", "start"),
        ("sub", "start"),
        ("updates", "other"),
        ("other", "end"),
        ("updates", "__interrupt__"),
        ("sub", "end"),
    ]
    assert [kind(i) for i in await ours_items(ours, {"log": []}, ["tasks", "updates"])] == expected


async def test_a_node_handing_a_command_to_its_parent_has_no_task_end(
    checkpointer: Checkpointer,
) -> None:
    # a sub-graph's node that returns Command(graph=Command.PARENT) does not finish in the
    # sub-graph: LangGraph streams its start only (its command is the parent task's
    # result), never an end carrying the exception that took the command up
    def build(g: Any) -> Any:
        child = g.StateGraph(Log).add_node("c0", lambda s: {"log": ["c0"]})
        child.add_node(
            "c1", lambda s: g.Command(graph=g.Command.PARENT, goto="z", update={"log": ["up"]})
        )
        child = child.add_edge(g.START, "c0").add_edge("c0", "c1").compile()
        graph = g.StateGraph(Log).add_node("sub", child, destinations=("z",))
        return graph.add_node("z", lambda s: {"log": ["z"]}).add_edge(g.START, "sub")

    ours, theirs = pair(build, checkpointer)

    def kind(item: tuple[Any, dict[str, Any]]) -> tuple[Any, ...]:
        ns, payload = item
        if "input" in payload:
            return (shape(ns), payload["name"], "start")
        return (shape(ns), payload["name"], "end", payload["result"], payload["error"])

    expected = [kind(i) for i in await theirs_items(theirs, {"log": []}, "tasks", subgraphs=True)]
    assert expected == [
        ((), "sub", "start"),
        (("sub",), "c0", "start"),
        (("sub",), "c0", "end", {"log": ["c0"]}, None),
        (("sub",), "c1", "start"),
        ((), "sub", "end", {"log": ["up"]}, None),
        ((), "z", "start"),
        ((), "z", "end", {"log": ["z"]}, None),
    ]
    items = await ours_items(ours, {"log": []}, "tasks", subgraphs=True)
    assert [kind(i) for i in items] == expected
