"""Ports of LangGraph's tests, eighth round (``libs/langgraph/tests/test_pregel.py`` and
``test_pregel_async.py``, tasks called from a ``StateGraph``'s nodes): the same program on
LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``. Each
test's comment names the LangGraph test it follows.

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture). A difference docs/graph.md documents is asserted as ours, with a
comment naming the section.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
from langgraph_kit import OURS, THEIRS, X, cfg, func_of, lg_memory, shape, two_tasks_in_a_node

import tinyagents.graph as ours_graph
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer

lg_func = pytest.importorskip("langgraph.func")

if TYPE_CHECKING:  # the names LangGraph reads in the annotations (strings here)
    from langgraph.types import StreamWriter


def plain(item: Any) -> Any:
    """A stream item without what each library names its own way: a namespace's task ids, a
    ``tasks`` item's ``id`` (and LangGraph's ``triggers``, which ours has not), an
    interrupt's id (its value kept)."""
    if isinstance(item, tuple) and len(item) == 3:
        ns, mode, payload = item
        return (shape(ns), mode, plain((mode, payload))[1])
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        mode, payload = item
        return (mode, plain_payload(mode, payload))
    return plain_payload("", item)


def plain_payload(mode: str, payload: Any) -> Any:
    if not isinstance(payload, dict):
        return payload
    if mode == "tasks":
        drop = {"id", "triggers"}
        payload = {k: v for k, v in payload.items() if k not in drop}
        if "interrupts" in payload:
            payload["interrupts"] = [i["value"] for i in payload["interrupts"]]
        return payload
    if "__interrupt__" in payload:
        return {**payload, "__interrupt__": [i.value for i in payload["__interrupt__"]]}
    return payload


async def streamed(graph: Any, value: Any, thread: str, **kw: Any) -> list[Any]:
    """``graph``'s stream of ``value`` on ``thread``, each item ``plain``."""
    if hasattr(graph, "astream"):
        if "mode" in kw:
            kw["stream_mode"] = kw.pop("mode")
        return [plain(i) async for i in graph.astream(value, cfg(thread), **kw)]
    return [plain(i) async for i in graph.stream(value, thread_id=thread, **kw)]


def both(build: Any, checkpointer: Checkpointer) -> tuple[Any, Any]:
    """``build(g, cp)`` of each library: (ours, LangGraph's)."""
    return build(OURS, checkpointer), build(THEIRS, lg_memory.InMemorySaver())


# -- a task called by a graph's node streams in that graph's stream -------------------------


def calling_tasks(g: Any) -> Any:
    """A node ``n`` calling a task ``t`` that calls a task ``inner``; each writes a custom item."""
    func = func_of(g)

    @func.task
    async def inner(v: int, writer: StreamWriter) -> int:
        writer({"inner": v})
        return v * 10

    @func.task
    async def t(v: int, writer: StreamWriter) -> int:
        writer({"t": v})
        await inner(v)
        return v + 1

    async def node(state: Any, writer: StreamWriter) -> dict[str, Any]:
        writer({"n": 1})
        return {"x": await t(state["x"])}

    return g.StateGraph(X).add_node("n", node).add_edge(g.START, "n")


def flat(g: Any, cp: Any) -> Any:
    return calling_tasks(g).compile(checkpointer=cp)


def nested(g: Any, cp: Any) -> Any:
    """``calling_tasks`` as the sub-graph node ``p``."""
    sub = calling_tasks(g).compile()
    return g.StateGraph(X).add_node("p", sub).add_edge(g.START, "p").compile(checkpointer=cp)


@pytest.mark.parametrize("subgraphs", [False, True])
@pytest.mark.parametrize("build", [flat, nested])
async def test_a_task_a_node_calls_streams_in_its_graph_s_stream(
    checkpointer: Checkpointer, build: Any, subgraphs: bool
) -> None:
    # LangGraph: test_pregel_async.py::test_overriding_injectable_args_with_async_task (and
    # test_pregel.py's tasks in nodes): a task called by a node is a task of the node's
    # graph: its tasks and updates items are that graph's (a task's call of a task too), no
    # values, its custom items shown with the graph's, with subgraphs=True in the namespace
    # of the task that called it
    ours, theirs = both(build, checkpointer)
    mode = ["custom", "updates", "tasks", "values"]
    theirs_items = await streamed(theirs, {"x": 1}, "1", mode=mode, subgraphs=subgraphs)
    ours_items = await streamed(ours, {"x": 1}, "1", mode=mode, subgraphs=subgraphs)
    assert ours_items == theirs_items
    if build is flat:
        updates = [i[-1] for i in theirs_items if i[-2] == "updates"]
        assert updates == [{"inner": 10}, {"t": 2}, {"n": {"x": 2}}]


@pytest.mark.parametrize("mode", ["updates", "values", ["updates", "values"]])
async def test_a_task_a_node_calls_shows_in_a_stream_read_between_steps(
    checkpointer: Checkpointer, mode: Any
) -> None:
    # the same, streamed in values or updates only (ours then steps the run in the reader's
    # task, with no queue): the task calls' updates come before the node's
    ours, theirs = both(flat, checkpointer)
    theirs_items = await streamed(theirs, {"x": 1}, "1", mode=mode)
    assert await streamed(ours, {"x": 1}, "1", mode=mode) == theirs_items


def calling_twice(g: Any, cp: Any) -> Any:
    """A node calling the same (sync) task twice, one after the other."""
    func = func_of(g)

    @func.task
    def add(v: int, writer: StreamWriter) -> int:
        writer({"add": v})
        return v + 1

    async def node(state: Any) -> dict[str, Any]:
        first = await add(state["x"])
        return {"x": await add(first)}

    return g.StateGraph(X).add_node("n", node).add_edge(g.START, "n").compile(checkpointer=cp)


@pytest.mark.parametrize("subgraphs", [False, True])
async def test_a_task_a_node_calls_twice_streams_each_call_in_the_node_s_namespace(
    checkpointer: Checkpointer, subgraphs: bool
) -> None:
    # LangGraph: test_pregel.py's tasks in a node: every call's custom items are in the
    # node's namespace (ours numbers a task's second call "n:id|1": not its stream's)
    ours, theirs = both(calling_twice, checkpointer)
    mode = ["custom", "updates"]
    theirs_items = await streamed(theirs, {"x": 1}, "1", mode=mode, subgraphs=subgraphs)
    assert await streamed(ours, {"x": 1}, "1", mode=mode, subgraphs=subgraphs) == theirs_items
    custom = [i for i in theirs_items if i[-2] == "custom"]
    if subgraphs:
        assert custom == [(("n",), "custom", {"add": 1}), (("n",), "custom", {"add": 2})]


def asking_task(g: Any, cp: Any) -> Any:
    """A node calling a task that asks a question, then one that does not."""
    func = func_of(g)

    @func.task
    def ask(v: int) -> int:
        answer = g.interrupt(f"add to {v}?")
        return v + answer

    @func.task
    def double(v: int) -> int:
        return v * 2

    async def node(state: Any) -> dict[str, Any]:
        asked = await ask(state["x"])
        return {"x": await double(asked)}

    return g.StateGraph(X).add_node("n", node).add_edge(g.START, "n").compile(checkpointer=cp)


@pytest.mark.parametrize("mode", ["updates", ["updates", "values"], ["updates", "tasks"]])
async def test_a_task_a_node_calls_that_asks_streams_its_question_and_its_answer(
    checkpointer: Checkpointer, mode: Any
) -> None:
    # LangGraph: test_pregel_async.py's interrupts inside tasks called by nodes: the node's
    # graph pauses with the task's question, and on resume the task's update comes, then
    # the next task's and the node's
    ours, theirs = both(asking_task, checkpointer)
    first = await streamed(theirs, {"x": 1}, "1", mode=mode)
    assert await streamed(ours, {"x": 1}, "1", mode=mode) == first
    second = await streamed(theirs, THEIRS.Command(resume=5), "1", mode=mode)
    assert await streamed(ours, OURS.Command(resume=5), "1", mode=mode) == second
    assert (await ours.get_state("1")).values == {"x": 12}


def entry_calling_a_task(g: Any, cp: Any) -> Any:
    func = func_of(g)

    @func.task
    async def t(v: int, writer: StreamWriter) -> int:
        writer({"t": v})
        return v + 1

    @func.entrypoint(checkpointer=cp)
    async def flow(v: int, writer: StreamWriter) -> int:
        writer({"flow": v})
        return await t(v)

    return flow


async def test_an_entrypoint_s_task_streams_its_custom_items_in_the_entrypoint_s_namespace(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel_async.py::test_overriding_injectable_args_with_async_task,
    # streamed with subgraphs=True: the entrypoint's own custom items are at the top, its
    # task's in the namespace of the entrypoint's task, ("flow:id",) (ours showed them at
    # the top too)
    ours, theirs = both(entry_calling_a_task, checkpointer)
    mode = ["custom", "updates"]
    theirs_items = await streamed(theirs, 1, "1", mode=mode, subgraphs=True)
    assert theirs_items == [
        ((), "custom", {"flow": 1}),
        (("flow",), "custom", {"t": 1}),
        ((), "updates", {"t": 2}),
        ((), "updates", {"flow": 2}),
    ]
    assert await streamed(ours, 1, "1", mode=mode, subgraphs=True) == theirs_items


def sync_node_waiting(g: Any, cp: Any, **node_kw: Any) -> Any:
    """A sync node that waits for the tasks it calls with ``.result()``."""
    func = func_of(g)

    @func.task
    def add(v: int) -> int:
        return v + 1

    def node(state: Any) -> dict[str, Any]:
        return {"x": add(add(state["x"]).result()).result()}

    return (
        g.StateGraph(X)
        .add_node("n", node, **node_kw)
        .add_edge(g.START, "n")
        .compile(checkpointer=cp)
    )


async def test_a_sync_node_waits_for_its_tasks_on_a_thread_of_its_own(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel.py's sync nodes calling tasks (.result()): LangGraph runs a sync
    # node on a thread, where it may wait for its tasks. Ours runs one inline on the event
    # loop, where it cannot wait, unless it has a timeout= (a thread of its own): there it
    # waits as LangGraph's does (it failed: "called on a thread without an event loop");
    # inline it fails, named (docs/graph.md, "The functional API", where it differs)
    from tinyagents.errors import GraphError

    theirs = sync_node_waiting(THEIRS, lg_memory.InMemorySaver())
    ours = sync_node_waiting(OURS, checkpointer, timeout=30)
    mode = ["updates", "tasks"]
    theirs_items = await streamed(theirs, {"x": 1}, "1", mode=mode)
    assert await streamed(ours, {"x": 1}, "1", mode=mode) == theirs_items
    assert (await ours.get_state("1")).values == {"x": 3}
    inline = sync_node_waiting(OURS, checkpointer)
    result = await inline.run({"x": 1}, thread_id="2")
    assert result.status == "failed" and isinstance(result.error, GraphError)
    assert "add_node(..., timeout=...) runs it on a thread of its own" in str(result.error)


def leaving_a_task(g: Any, cp: Any, ran: list[int], *, fail: bool) -> Any:
    """A node that starts a task and neither awaits it nor waits for it (then fails, if
    ``fail``)."""
    func = func_of(g)

    @func.task
    async def t(v: int) -> int:
        for _ in range(20):  # a few turns of the event loop: the node has returned by then
            await asyncio.sleep(0)
        ran.append(v)
        return v + 1

    async def node(state: Any) -> dict[str, Any]:
        t(state["x"])
        if fail:
            raise ValueError("the node failed")
        return {"x": 5}

    return g.StateGraph(X).add_node("n", node).add_edge(g.START, "n").compile(checkpointer=cp)


async def test_a_task_a_node_leaves_unawaited_runs_to_its_end_within_the_node_s_step(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel_async.py's tasks in nodes: a task is a task of the node's step,
    # so the step (and the run) ends after it. Ours left it running past the run's end: it
    # wrote to the thread afterwards (or, the checkpointer closed, failed with nobody to
    # hear it). Now the node's attempt waits for it, so its update comes before the node's,
    # where LangGraph's comes after (docs/graph.md, "The functional API", where it differs)
    theirs_ran: list[int] = []
    ours_ran: list[int] = []
    theirs = leaving_a_task(THEIRS, lg_memory.InMemorySaver(), theirs_ran, fail=False)
    ours = leaving_a_task(OURS, checkpointer, ours_ran, fail=False)
    theirs_items = await streamed(theirs, {"x": 1}, "1", mode="updates")
    assert theirs_items == [{"n": {"x": 5}}, {"t": 2}]
    ours_items = await streamed(ours, {"x": 1}, "1", mode="updates")
    assert ours_items == [{"t": 2}, {"n": {"x": 5}}]
    assert ours_ran == theirs_ran == [1]
    assert (await ours.get_state("1")).values == {"x": 5}


async def test_a_task_a_failing_node_left_runs_to_its_end_before_the_run_fails(
    checkpointer: Checkpointer,
) -> None:
    # the same node failing after it started the task: LangGraph's run fails once the task
    # ran to its end; ours too (the task no longer runs on after the failed run)
    theirs_ran: list[int] = []
    ours_ran: list[int] = []
    theirs = leaving_a_task(THEIRS, lg_memory.InMemorySaver(), theirs_ran, fail=True)
    ours = leaving_a_task(OURS, checkpointer, ours_ran, fail=True)
    with pytest.raises(ValueError, match="the node failed"):
        await theirs.ainvoke({"x": 1}, cfg("1"))
    result = await ours.run({"x": 1}, thread_id="1")
    assert result.status == "failed" and isinstance(result.error, ValueError)
    assert ours_ran == theirs_ran == [1]


def leaving_a_question(g: Any, cp: Any, ran: list[Any]) -> Any:
    """A node that starts a task that asks, and does not await it."""
    func = func_of(g)

    @func.task
    def ask(v: int) -> int:
        answer = g.interrupt("add what?")
        ran.append(answer)
        return v + answer

    async def node(state: Any) -> dict[str, Any]:
        ran.append("node")
        ask(state["x"])
        return {"x": 5}

    return g.StateGraph(X).add_node("n", node).add_edge(g.START, "n").compile(checkpointer=cp)


async def test_a_task_a_node_leaves_unawaited_that_asks_pauses_the_node(
    checkpointer: Checkpointer,
) -> None:
    # the same with a task that asks: ours pauses the node with its question (as an
    # entrypoint's task left un-awaited pauses the entrypoint), and on resume the node runs
    # again and the task gets its answer; LangGraph's run ends without asking (the task's
    # GraphInterrupt is left unretrieved), its answer never given (docs/graph.md, "The
    # functional API", where it differs)
    theirs_ran: list[Any] = []
    ours_ran: list[Any] = []
    theirs = leaving_a_question(THEIRS, lg_memory.InMemorySaver(), theirs_ran)
    ours = leaving_a_question(OURS, checkpointer, ours_ran)
    assert await streamed(theirs, {"x": 1}, "1", mode="updates") == [{"n": {"x": 5}}]
    assert await streamed(ours, {"x": 1}, "1", mode="updates") == [{"__interrupt__": ["add what?"]}]
    await streamed(theirs, THEIRS.Command(resume=3), "1", mode="updates")
    resumed = await streamed(ours, OURS.Command(resume=3), "1", mode="updates")
    assert resumed == [{"ask": 4}, {"n": {"x": 5}}]
    assert theirs_ran == ["node"]
    assert ours_ran == ["node", "node", 3]


async def test_a_node_paused_in_a_task_it_called_has_no_sub_graph_state(
    checkpointer: Checkpointer,
) -> None:
    # LangGraph: test_pregel_async.py's get_state(subgraphs=True) of a node paused in a task
    # it called: a task call is no sub-graph, so the node's task has no state (ours showed
    # the task's one-node graph as the node's sub-graph), its question its interrupts
    ours, theirs = both(asking_task, checkpointer)
    await theirs.ainvoke({"x": 1}, cfg("1"))
    await ours.run({"x": 1}, thread_id="1")
    theirs_state = await theirs.aget_state(cfg("1"), subgraphs=True)
    ours_state = await ours.get_state("1", subgraphs=True)
    assert [(t.name, t.state, [i.value for i in t.interrupts]) for t in theirs_state.tasks] == [
        ("n", None, ["add to 1?"])
    ]
    assert [(t.name, t.state, [i.value for i in t.interrupts]) for t in ours_state.tasks] == [
        ("n", None, ["add to 1?"])
    ]


async def test_a_stream_of_updates_of_a_run_that_saves_nothing_shows_its_task_calls() -> None:
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api, with the
    # tasks called by a StateGraph's node: the updates stream shows each task's update, in
    # a run without checkpointer streamed in updates only (the executor's fast path: it
    # showed none of them until the ninth round), with a live mode beside, with a
    # checkpointer
    theirs = two_tasks_in_a_node(THEIRS, None)
    expected = [{"slow": 2}, {"slow": 3}, {"n": {"x": 3}}]
    assert [i async for i in theirs.astream({"x": 1}, stream_mode="updates")] == expected
    ours = two_tasks_in_a_node(OURS, None)
    assert [i async for i in ours.stream({"x": 1}, mode="updates")] == expected
    live = [i async for i in ours.stream({"x": 1}, mode=["updates", "custom"])]
    assert live == [("updates", u) for u in expected]
    saved = two_tasks_in_a_node(OURS, MemoryCheckpointer())
    assert [i async for i in saved.stream({"x": 1}, thread_id="1", mode="updates")] == expected


def counting_entrypoint(mod: Any, started: list[int]) -> Any:
    """An entrypoint awaiting two calls of a task that counts its starts."""

    @mod.task
    async def slow() -> int:
        started.append(1)
        await asyncio.sleep(0)
        return len(started)

    @mod.entrypoint()
    async def graph(inputs: dict[str, Any]) -> list[int]:
        return [await slow(), await slow()]

    return graph


async def test_an_entrypoint_streams_each_task_s_update_as_it_comes() -> None:
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api (without its
    # clock: the first task's update is read before the second task starts)
    for mod in (lg_func, ours_graph):
        started: list[int] = []
        graph = counting_entrypoint(mod, started)
        items = graph.astream({}) if mod is lg_func else graph.stream({})
        seen = [(chunk, len(started)) async for chunk in items]
        assert seen == [({"slow": 1}, 1), ({"slow": 2}, 2), ({"graph": [1, 2]}, 2)]


@pytest.mark.parametrize("is_async", [True, False])
async def test_an_entrypoint_without_checkpointer_has_no_previous(is_async: bool) -> None:
    # LangGraph: test_pregel_async.py::test_async_entrypoint_without_checkpointer and
    # test_pregel.py::test_entrypoint_without_checkpointer: without a checkpointer nothing
    # is kept, so ``previous`` is None on every call, and the input comes back as given
    for mod in (lg_func, ours_graph):
        if is_async:

            @mod.entrypoint()
            async def echo(inputs: Any) -> Any:
                return inputs

            @mod.entrypoint()
            async def remember(inputs: Any, *, previous: Any) -> Any:
                return {"previous": previous, "current": inputs}

            assert await echo.ainvoke({"a": "1"}, cfg("1")) == {"a": "1"}
            for _ in range(2):
                out = await remember.ainvoke({"a": "1"}, cfg("1"))
                assert out == {"current": {"a": "1"}, "previous": None}
        else:

            @mod.entrypoint()
            def echo(inputs: Any) -> Any:
                return inputs

            @mod.entrypoint()
            def remember(inputs: Any, *, previous: Any) -> Any:
                return {"previous": previous, "current": inputs}

            def calls() -> list[Any]:
                made = [echo.invoke({"a": "1"}, cfg("1"))]
                made += [remember.invoke({"a": "1"}, cfg("1")) for _ in range(2)]
                return made

            made = await asyncio.to_thread(calls)
            assert made == [{"a": "1"}, *[{"current": {"a": "1"}, "previous": None}] * 2]
