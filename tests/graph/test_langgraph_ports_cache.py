"""Ports of LangGraph's node-caching tests: the same program on LangGraph and on
``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.

- ``test_in_one_fan_out_state_graph_waiting_edge_multiple`` (``tests/test_pregel_async.py``
  and its sync twin in ``tests/test_pregel.py``, ``with_cache`` True/False over the ``cache``
  fixture's memory and SQLite caches): a cached node in a loop runs once per input, its hits
  streamed as ``{node: writes, "__metadata__": {"cached": True}}``; ``aclear_cache()`` /
  ``clear_cache()`` makes it run again.
- ``test_multiple_interrupts_functional_cache`` (both files): a ``@task(cache_policy=...)``
  called between ``interrupt()``s of an ``@entrypoint(cache=...)`` runs once per argument
  across threads; ``task.aclear_cache(cache)`` makes it run again.

Beyond them, compared the same way: what the ``tasks`` stream shows of a hit (its start,
no result), a ``Send`` task's key (its argument), a hit's ``Command(goto=...)``, a node that
paused or failed (never cached), ``CachePolicy(key_func=...)``, per-node ``clear_cache``, and
a cached ``@task`` call in an entrypoint's ``updates`` stream.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, cfg, func_of, lg_memory, lg_types

from tinyagents.graph import CachePolicy
from tinyagents.store.cache import InMemoryCache, SqliteCache
from tinyagents.store.checkpoint import MemoryCheckpointer

lg_cache_memory = pytest.importorskip("langgraph.cache.memory")
lg_cache_sqlite = pytest.importorskip("langgraph.cache.sqlite")


@pytest.fixture(params=["memory", "sqlite"])
async def caches(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """(ours, LangGraph's) caches of one kind: in memory, or each in a SQLite file."""
    if request.param == "memory":
        yield InMemoryCache(), lg_cache_memory.InMemoryCache()
        return
    ours = SqliteCache(tmp_path / "ours.db")
    yield ours, lg_cache_sqlite.SqliteCache(path=str(tmp_path / "theirs.db"))
    await ours.aclose()


def policy(g: Any, **kw: Any) -> Any:
    return CachePolicy(**kw) if g is OURS else lg_types.CachePolicy(**kw)


def sorted_add(x: list[str], y: list[str] | list[tuple[str, str]]) -> list[str]:
    if isinstance(y[0], tuple):
        for rem, _ in y:
            x.remove(rem)  # type: ignore[arg-type]
        y = [t[1] for t in y]  # type: ignore[index]
    return sorted(operator.add(x, y))  # type: ignore[operator]


class Query(TypedDict, total=False):
    query: str
    answer: str
    docs: Annotated[list[str], sorted_add]


def fan_out(g: Any, with_cache: bool, counts: list[int], *, sync: bool = False) -> Any:
    """LangGraph's ``test_in_one_fan_out_state_graph_waiting_edge_multiple`` graph:
    rewrite_query (cached) fans out, the two branches join at decider, which loops back
    once. Its nodes are async, as in the async test (``sync=True``: plain functions)."""

    def rewrite_query(data: Any) -> dict[str, Any]:
        counts.append(1)
        return {"query": f"query: {data['query']}"}

    def analyzer_one(data: Any) -> dict[str, Any]:
        return {"query": f"analyzed: {data['query']}"}

    def retriever_one(data: Any) -> dict[str, Any]:
        return {"docs": ["doc1", "doc2"]}

    def retriever_two(data: Any) -> dict[str, Any]:
        return {"docs": ["doc3", "doc4"]}

    def qa(data: Any) -> dict[str, Any]:
        return {"answer": ",".join(data["docs"])}

    def decider(data: Any) -> None:
        return None

    def decider_cond(data: Any) -> str:
        return "qa" if data["query"].count("analyzed") > 1 else "rewrite_query"

    def made(fn: Any) -> Any:
        if sync:
            return fn

        async def node(data: Any) -> Any:
            return fn(data)

        node.__name__ = node.__qualname__ = fn.__name__
        return node

    rewrite_query, analyzer_one, retriever_one, retriever_two, qa, decider = map(
        made, (rewrite_query, analyzer_one, retriever_one, retriever_two, qa, decider)
    )
    workflow = g.StateGraph(Query)
    workflow.add_node(
        "rewrite_query", rewrite_query, cache_policy=policy(g) if with_cache else None
    )
    workflow.add_node("analyzer_one", analyzer_one)
    workflow.add_node("retriever_one", retriever_one)
    workflow.add_node("retriever_two", retriever_two)
    workflow.add_node("decider", decider)
    workflow.add_node("qa", qa)
    workflow.add_edge(g.START, "rewrite_query")
    workflow.add_edge("rewrite_query", "analyzer_one")
    workflow.add_edge("analyzer_one", "retriever_one")
    workflow.add_edge("rewrite_query", "retriever_two")
    workflow.add_edge(["retriever_one", "retriever_two"], "decider")
    workflow.add_conditional_edges("decider", decider_cond)
    workflow.add_edge("qa", g.END)
    return workflow


@pytest.mark.parametrize("with_cache", [True, False])
async def test_in_one_fan_out_state_graph_waiting_edge_multiple(
    with_cache: bool, caches: tuple[Any, Any]
) -> None:
    ours_cache, theirs_cache = caches
    ours_counts: list[int] = []
    theirs_counts: list[int] = []
    ours = fan_out(OURS, with_cache, ours_counts).compile(cache=ours_cache)
    theirs = fan_out(THEIRS, with_cache, theirs_counts).compile(cache=theirs_cache)
    inp = {"query": "what is weather in sf"}

    expected = await theirs.ainvoke(inp)
    assert (
        (await ours.run(inp)).state
        == expected
        == {
            "query": "analyzed: query: analyzed: query: what is weather in sf",
            "answer": "doc1,doc1,doc2,doc2,doc3,doc3,doc4,doc4",
            "docs": ["doc1", "doc1", "doc2", "doc2", "doc3", "doc3", "doc4", "doc4"],
        }
    )
    assert len(ours_counts) == len(theirs_counts) == 2

    theirs_items = [c async for c in theirs.astream(inp)]
    ours_items = [c async for c in ours.stream(inp, mode="updates")]
    assert ours_items == theirs_items
    assert {"__metadata__": {"cached": True}} in [
        {k: v} for item in ours_items for k, v in item.items() if k == "__metadata__"
    ] or not with_cache
    assert len(ours_counts) == len(theirs_counts) == (2 if with_cache else 4)

    if with_cache:
        await theirs.aclear_cache()
        await ours.aclear_cache()
        assert (await ours.run(inp)).state == await theirs.ainvoke(inp)
        assert len(ours_counts) == len(theirs_counts) == 4


def test_in_one_fan_out_state_graph_waiting_edge_multiple_sync(tmp_path: Path) -> None:
    """The sync twin (``tests/test_pregel.py``): ``invoke`` / ``clear_cache()``, with a SQLite
    file cache each."""
    ours_counts: list[int] = []
    theirs_counts: list[int] = []
    ours_cache = SqliteCache(tmp_path / "ours.db")
    ours = fan_out(OURS, True, ours_counts, sync=True).compile(cache=ours_cache)
    theirs = fan_out(THEIRS, True, theirs_counts, sync=True).compile(
        cache=lg_cache_sqlite.SqliteCache(path=str(tmp_path / "theirs.db"))
    )
    inp = {"query": "what is weather in sf"}
    for _ in range(2):
        assert ours.run_sync(inp).state == theirs.invoke(inp)
    assert len(ours_counts) == len(theirs_counts) == 2
    ours.clear_cache()
    theirs.clear_cache()
    assert ours.run_sync(inp).state == theirs.invoke(inp)
    assert len(ours_counts) == len(theirs_counts) == 4
    asyncio.run(ours_cache.aclose())


# -- the functional API ---------------------------------------------------------------------


def doubling_workflow(g: Any, cp: Any, cache: Any, counter: list[int]) -> tuple[Any, Any]:
    """``test_multiple_interrupts_functional_cache``'s entrypoint and its cached task."""
    func = func_of(g)

    @func.task(cache_policy=policy(g))
    def double(x: int) -> int:
        counter.append(1)
        return 2 * x

    @func.entrypoint(checkpointer=cp, cache=cache)
    def graph(state: dict[str, Any]) -> dict[str, Any]:
        values: list[Any] = []
        for idx in [1, 1, 2, 2, 3, 3]:
            values.extend([double(idx).result(), g.interrupt({"a": "boo"})])
        return {"values": values}

    return graph, double


async def test_multiple_interrupts_functional_cache(caches: tuple[Any, Any]) -> None:
    ours_cache, theirs_cache = caches
    ours_counter: list[int] = []
    theirs_counter: list[int] = []
    ours, ours_double = doubling_workflow(OURS, MemoryCheckpointer(), ours_cache, ours_counter)
    theirs, theirs_double = doubling_workflow(
        THEIRS, lg_memory.InMemorySaver(), theirs_cache, theirs_counter
    )

    async def answer_all(thread: str) -> None:
        config = cfg(thread)
        await theirs.ainvoke({}, config)
        result = await ours.run({}, thread_id=thread)
        for answer in "abcdef":
            expected = await theirs.ainvoke(lg_types.Command(resume=answer), config)
            result = await ours.run(OURS.Command(resume=answer), thread_id=thread)
        assert (
            result.state == expected == {"values": [2, "a", 2, "b", 4, "c", 4, "d", 6, "e", 6, "f"]}
        )

    await answer_all("1")
    assert len(ours_counter) == len(theirs_counter) == 3
    await answer_all("2")
    assert len(ours_counter) == len(theirs_counter) == 3
    await ours_double.aclear_cache(ours_cache)
    await theirs_double.aclear_cache(theirs_cache)
    await answer_all("3")
    assert len(ours_counter) == len(theirs_counter) == 6


# -- what LangGraph does, compared ------------------------------------------------------------


class Log(TypedDict, total=False):
    x: int
    log: Annotated[list[str], operator.add]


def logging_pair(g: Any, calls: list[str], **policy_kw: Any) -> Any:
    """START → a (cached) → b (cached), each logging its name and noting its call."""

    def a(state: Any) -> dict[str, Any]:
        calls.append("a")
        return {"log": [f"a{state['x']}"]}

    def b(state: Any) -> dict[str, Any]:
        calls.append("b")
        return {"log": ["b"]}

    graph = g.StateGraph(Log)
    graph.add_node("a", a, cache_policy=policy(g, **policy_kw))
    graph.add_node("b", b, cache_policy=policy(g, **policy_kw))
    return graph.add_edge(g.START, "a").add_edge("a", "b")


async def test_a_hit_in_the_tasks_and_updates_streams() -> None:
    """A hit's ``tasks`` item is its start alone (no result: it did not run), and its
    ``updates`` item is marked cached."""
    ours = logging_pair(OURS, []).compile(cache=InMemoryCache())
    theirs = logging_pair(THEIRS, []).compile(cache=lg_cache_memory.InMemoryCache())
    for _ in range(2):
        theirs_items = [
            (mode, {k: v for k, v in item.items() if k not in ("id", "triggers")})
            async for mode, item in theirs.astream({"x": 1}, stream_mode=["updates", "tasks"])
        ]
        ours_items = [
            (mode, {k: v for k, v in item.items() if k not in ("id", "triggers")})
            async for mode, item in ours.stream({"x": 1}, mode=["updates", "tasks"])
        ]
        assert ours_items == theirs_items


async def test_clear_cache_of_one_node_and_a_key_func() -> None:
    """``key_func`` keys ``b`` by ``x`` alone (its log grows, the key does not);
    ``clear_cache(["a"])`` runs ``a`` again, not ``b``."""
    ours_calls: list[str] = []
    theirs_calls: list[str] = []

    def by_x(state: Any) -> str:
        return str(state["x"])

    ours = logging_pair(OURS, ours_calls, key_func=by_x).compile(cache=InMemoryCache())
    theirs = logging_pair(THEIRS, theirs_calls, key_func=by_x).compile(
        cache=lg_cache_memory.InMemoryCache()
    )
    for clear in (None, None, ["a"], ["b"], None):
        if clear is not None:
            await ours.aclear_cache(clear)
            await theirs.aclear_cache(clear)
        assert (await ours.run({"x": 1})).state == await theirs.ainvoke({"x": 1})
        assert ours_calls == theirs_calls
    assert ours_calls == ["a", "b", "a", "b"]


class Fan(TypedDict, total=False):
    items: list[int]
    out: Annotated[list[int], operator.add]


def send_graph(g: Any, calls: list[int]) -> Any:
    """START fans out a ``Send`` per item to ``square`` (cached): the key is each one's
    argument, so a repeated item is a hit within the same step's peers' later runs."""

    def square(arg: Any) -> dict[str, Any]:
        calls.append(arg["v"])
        return {"out": [arg["v"] ** 2]}

    def fan(state: Any) -> list[Any]:
        return [g.Send("square", {"v": v}) for v in state["items"]]

    graph = g.StateGraph(Fan).add_node("square", square, cache_policy=policy(g))
    return graph.add_conditional_edges(g.START, fan, ["square"])


async def test_send_tasks_are_keyed_by_their_argument(caches: tuple[Any, Any]) -> None:
    """(Parallel tasks of one step store and read side by side: over both caches.)"""
    ours_calls: list[int] = []
    theirs_calls: list[int] = []
    ours = send_graph(OURS, ours_calls).compile(cache=caches[0])
    theirs = send_graph(THEIRS, theirs_calls).compile(cache=caches[1])
    for items in ([1, 2, 4, 5], [2, 3, 5, 6]):
        assert (await ours.run({"items": items})).state == await theirs.ainvoke({"items": items})
        assert sorted(ours_calls) == sorted(theirs_calls)
    assert sorted(ours_calls) == [1, 2, 3, 4, 5, 6]


class Route(TypedDict, total=False):
    x: int
    path: Annotated[list[str], operator.add]


def routing_graph(g: Any, calls: list[str]) -> Any:
    """``pick`` (cached) routes with ``Command(goto=...)``: a hit routes the same way."""

    def pick(state: Any) -> Any:
        calls.append("pick")
        target = "even" if state["x"] % 2 == 0 else "odd"
        return g.Command(update={"path": ["pick"]}, goto=target)

    def even(state: Any) -> dict[str, Any]:
        return {"path": ["even"]}

    def odd(state: Any) -> dict[str, Any]:
        return {"path": ["odd"]}

    graph = g.StateGraph(Route)
    graph.add_node("pick", pick, cache_policy=policy(g), destinations=("even", "odd"))
    graph.add_node("even", even).add_node("odd", odd)
    return graph.add_edge(g.START, "pick")


async def test_a_hit_routes_as_its_command_did() -> None:
    ours_calls: list[str] = []
    theirs_calls: list[str] = []
    ours = routing_graph(OURS, ours_calls).compile(cache=InMemoryCache())
    theirs = routing_graph(THEIRS, theirs_calls).compile(cache=lg_cache_memory.InMemoryCache())
    for x in (2, 2, 3, 3):
        assert (await ours.run({"x": x})).state == await theirs.ainvoke({"x": x})
    assert ours_calls == theirs_calls == ["pick", "pick"]


def asking_graph(g: Any, calls: list[str], fail: list[bool]) -> Any:
    """``ask`` (cached) fails while ``fail`` holds True, else asks a question and writes the
    answer: neither a failure nor a pause is cached, the answered result is."""

    def ask(state: Any) -> dict[str, Any]:
        calls.append("ask")
        if fail and fail.pop():
            raise ValueError("not yet")
        return {"path": [g.interrupt("go?")]}

    graph = g.StateGraph(Route).add_node("ask", ask, cache_policy=policy(g))
    return graph.add_edge(g.START, "ask")


async def test_failed_and_paused_nodes_are_not_cached() -> None:
    ours_calls: list[str] = []
    theirs_calls: list[str] = []
    ours_fail, theirs_fail = [True], [True]
    ours = asking_graph(OURS, ours_calls, ours_fail).compile(
        checkpointer=MemoryCheckpointer(), cache=InMemoryCache()
    )
    theirs = asking_graph(THEIRS, theirs_calls, theirs_fail).compile(
        checkpointer=lg_memory.InMemorySaver(), cache=lg_cache_memory.InMemoryCache()
    )
    with pytest.raises(ValueError):
        await theirs.ainvoke({"x": 1}, cfg("1"))
    assert (await ours.run({"x": 1}, thread_id="1")).status == "failed"
    await theirs.ainvoke({"x": 1}, cfg("2"))
    paused = await ours.run({"x": 1}, thread_id="2")
    assert paused.status == "interrupted"
    assert ours_calls == theirs_calls == ["ask", "ask"]
    expected = await theirs.ainvoke(lg_types.Command(resume="yes"), cfg("2"))
    assert (await ours.run(OURS.Command(resume="yes"), thread_id="2")).state == expected
    # the answered result was cached: a new thread with the same input does not ask
    expected = await theirs.ainvoke({"x": 1}, cfg("3"))
    result = await ours.run({"x": 1}, thread_id="3")
    assert result.status == "completed"
    assert result.state == expected == {"x": 1, "path": ["yes"]}
    assert ours_calls == theirs_calls == ["ask", "ask", "ask"]


async def test_a_cached_task_call_in_an_entrypoint_stream() -> None:
    """A ``@task`` call that hits the entrypoint's cache is streamed as the task's update,
    marked cached."""

    def workflow(g: Any, cp: Any, cache: Any) -> Any:
        func = func_of(g)

        @func.task(cache_policy=policy(g))
        def double(x: int) -> int:
            return 2 * x

        @func.entrypoint(checkpointer=cp, cache=cache)
        def wf(n: int) -> int:
            return double(n).result() + 1

        return wf

    ours = workflow(OURS, MemoryCheckpointer(), InMemoryCache())
    theirs = workflow(THEIRS, lg_memory.InMemorySaver(), lg_cache_memory.InMemoryCache())
    for thread in ("1", "2"):
        expected = [c async for c in theirs.astream(3, cfg(thread), stream_mode="updates")]
        assert [c async for c in ours.stream(3, thread_id=thread, mode="updates")] == expected
    assert expected == [{"double": 6, "__metadata__": {"cached": True}}, {"wf": 7}]


def parent_of_cached_subgraph(g: Any, calls: list[str]) -> Any:
    """START → sub (a compiled sub-graph, cached) → after: a hit skips the whole sub-graph."""

    def inner(state: Any) -> dict[str, Any]:
        calls.append("inner")
        return {"log": [f"inner{state['x']}"]}

    def after(state: Any) -> dict[str, Any]:
        return {"log": ["after"]}

    sub = g.StateGraph(Log).add_node("inner", inner).add_edge(g.START, "inner").compile()
    graph = g.StateGraph(Log).add_node("sub", sub, cache_policy=policy(g))
    return graph.add_node("after", after).add_edge(g.START, "sub").add_edge("sub", "after")


async def test_a_cached_sub_graph_node_does_not_run_its_sub_graph() -> None:
    """The states and calls are compared; the updates only for where the hit is marked (a
    sub-graph node's update holds the keys it changed here, its whole output in LangGraph's,
    hit or not)."""
    ours_calls: list[str] = []
    theirs_calls: list[str] = []
    ours = parent_of_cached_subgraph(OURS, ours_calls).compile(
        checkpointer=MemoryCheckpointer(), cache=InMemoryCache()
    )
    theirs = parent_of_cached_subgraph(THEIRS, theirs_calls).compile(
        checkpointer=lg_memory.InMemorySaver(), cache=lg_cache_memory.InMemoryCache()
    )
    for thread in ("1", "2"):
        expected = [c async for c in theirs.astream({"x": 1}, cfg(thread), stream_mode="updates")]
        got = [c async for c in ours.stream({"x": 1}, thread_id=thread, mode="updates")]
        assert [sorted(c) for c in got] == [sorted(c) for c in expected]
        theirs_state = await theirs.aget_state(cfg(thread))
        assert (await ours.get_state(thread)).values == theirs_state.values
    assert got[0]["__metadata__"] == {"cached": True}
    assert ours_calls == theirs_calls == ["inner"]
