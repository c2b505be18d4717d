"""Ids and limits a caller passes to a graph are taken as given or refused, never read as
"not given": an empty (or blank, or non-string) ``thread_id`` used to start a fresh thread
with a random id, so the caller's next ``run(None, thread_id="")`` found nothing, and
``recursion_limit=0`` used to mean the default of 25."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from graphkit import LogState, chain

from tinyagents import Runtime
from tinyagents.errors import ConfigurationError, UnknownTargetError
from tinyagents.graph import END, START, CompiledGraph, StateGraph
from tinyagents.store.checkpoint import Checkpointer

BAD_THREAD_IDS = ["", "   ", "\n", 7, b"t"]

Call = Callable[[CompiledGraph, Any], Awaitable[Any]]


async def _iter(graph: CompiledGraph, thread_id: Any) -> None:
    async with graph.iter({"log": []}, thread_id=thread_id):
        pass


async def _stream(graph: CompiledGraph, thread_id: Any) -> None:
    async for _ in graph.stream({"log": []}, thread_id=thread_id):
        pass


ENTRY_POINTS: dict[str, Call] = {
    "run": lambda g, t: g.run({"log": []}, thread_id=t),
    "stream": _stream,
    "iter": _iter,
    "get_state": lambda g, t: g.get_state(t),
    "history": lambda g, t: g.history(t),
    "update_state": lambda g, t: g.update_state(t, {"log": ["x"]}),
    "fork": lambda g, t: g.fork(t, "any"),
}


@pytest.mark.parametrize("thread_id", BAD_THREAD_IDS, ids=repr)
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
async def test_a_bad_thread_id_is_refused_by_every_entry_point(
    checkpointer: Checkpointer, entry: str, thread_id: Any
) -> None:
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    with pytest.raises(ValueError, match="thread_id"):
        await ENTRY_POINTS[entry](graph, thread_id)
    # nothing was written under the id given (the fresh thread it used to start is unnamed)
    assert await checkpointer.latest(thread_id if isinstance(thread_id, str) else "") is None


@pytest.mark.parametrize("thread_id", ["t\x00x", "t\ud800"], ids=["nul", "lone-surrogate"])
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
async def test_a_thread_id_no_database_can_store_is_refused_alike(
    checkpointer: Checkpointer, entry: str, thread_id: str
) -> None:
    # a NUL was taken by memory and SQLite and a StoreError from PostgreSQL; a lone
    # surrogate a UnicodeEncodeError from SQLite, a StoreError from PostgreSQL
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    with pytest.raises(ValueError, match=r"thread_id must be text without NUL"):
        await ENTRY_POINTS[entry](graph, thread_id)


@pytest.mark.parametrize("entry", ["get_state", "history", "update_state", "fork"])
async def test_the_thread_methods_need_a_thread_id(checkpointer: Checkpointer, entry: str) -> None:
    # update_state(None, ...) used to write its checkpoint to a new thread nobody could name
    graph = chain("a").compile(checkpointer=checkpointer)
    with pytest.raises(ValueError, match="thread_id"):
        await ENTRY_POINTS[entry](graph, None)


async def test_a_bad_thread_id_is_refused_before_the_stream_is_read(
    checkpointer: Checkpointer,
) -> None:
    graph = chain("a").compile(checkpointer=checkpointer)
    with pytest.raises(ValueError, match="thread_id"):
        graph.stream({"log": []}, thread_id="")  # the call, before any item is read


async def test_a_bad_thread_id_is_refused_without_a_checkpointer() -> None:
    graph = chain("a").compile()
    with pytest.raises(ValueError, match="thread_id"):
        await graph.run({"log": []}, thread_id="")
    assert (await graph.run({"log": []}, thread_id="t")).state == {"log": ["a"]}


async def test_a_bad_thread_id_is_refused_with_a_runtime(
    checkpointer: Checkpointer, rt: Runtime
) -> None:
    graph = chain("a").compile(checkpointer=checkpointer)
    with pytest.raises(ValueError, match="thread_id"):
        await graph.run({"log": []}, thread_id="", runtime=rt)
    with pytest.raises(ValueError, match="thread_id"):
        await rt.start_graph(graph, {"log": []}, thread_id=" ")
    with pytest.raises(ValueError, match="thread_id"):
        graph.stream({"log": []}, thread_id="", runtime=rt)  # the call, not the first read
    assert [i for i in rt.runs.list() if i.kind == "graph"] == []  # nothing registered


@pytest.mark.parametrize("tenant_id", ["", "  "])
async def test_a_blank_tenant_is_refused_before_the_input_is_saved(
    checkpointer: Checkpointer, rt: Runtime, tenant_id: str
) -> None:
    """The refusal came after the input was checkpointed: a later run continued it, and a
    retry with an append reducer applied the input twice."""
    graph = chain("a").compile(checkpointer=checkpointer)
    with pytest.raises(ValueError, match="tenant_id"):
        await rt.start_graph(graph, {"log": ["in"]}, thread_id="t", tenant_id=tenant_id)
    assert (await graph.get_state("t")).values == {}
    assert await graph.history("t") == []
    handle = await rt.start_graph(graph, {"log": ["in"]}, thread_id="t", tenant_id="acme")
    assert (await handle.result()).output == {"log": ["in", "a"]}


async def test_a_bad_fork_thread_id_is_refused(checkpointer: Checkpointer) -> None:
    graph = chain("a").compile(checkpointer=checkpointer)
    done = await graph.run({"log": []}, thread_id="t")
    assert done.checkpoint_id is not None
    with pytest.raises(ValueError, match="new_thread_id"):
        await graph.fork("t", done.checkpoint_id, new_thread_id="")
    assert await graph.fork("t", done.checkpoint_id, new_thread_id="u") == "u"


async def test_no_thread_id_still_makes_a_fresh_thread(checkpointer: Checkpointer) -> None:
    graph = chain("a").compile(checkpointer=checkpointer)
    first = await graph.run({"log": []})
    assert first.thread_id and first.thread_id.strip()
    assert (await graph.get_state(first.thread_id)).values == {"log": ["a"]}


async def test_an_empty_checkpoint_id_is_an_unknown_checkpoint(
    checkpointer: Checkpointer,
) -> None:
    # not "no checkpoint id": the head
    graph = chain("a").compile(checkpointer=checkpointer)
    await graph.run({"log": []}, thread_id="t")
    with pytest.raises(UnknownTargetError, match="''"):
        await graph.get_state("t", "")
    with pytest.raises(UnknownTargetError, match="''"):
        await graph.run(None, thread_id="t", checkpoint_id="")
    with pytest.raises(UnknownTargetError, match="''"):
        await graph.update_state("t", {"log": ["x"]}, checkpoint_id="")
    assert (await graph.get_state("t")).values == {"log": ["a"]}


@pytest.mark.parametrize("limit", [0, -1])
async def test_a_recursion_limit_below_one_is_refused(
    checkpointer: Checkpointer, limit: int
) -> None:
    # as LangGraph's "recursion_limit must be at least 1" (a ValueError); 0 was the default
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    # a ConfigurationError that says what it takes, and still the ValueError LangGraph raises
    with pytest.raises(ValueError, match=r"recursion_limit must be at least 1 \(a whole") as exc:
        await graph.run({"log": []}, thread_id="t", recursion_limit=limit)
    assert isinstance(exc.value, ConfigurationError)
    assert await checkpointer.latest("t") is None
    with pytest.raises(ConfigurationError, match="recursion_limit"):
        chain("a").compile(recursion_limit=limit)


async def test_a_recursion_limit_below_one_is_refused_for_a_called_graph(
    checkpointer: Checkpointer,
) -> None:
    inner = chain("x").compile()

    async def call(state: Any) -> dict[str, Any]:
        await inner.run({"log": []}, recursion_limit=0)
        return {}

    graph = StateGraph(LogState).add_node("call", call).add_edge(START, "call")
    graph.add_edge("call", END)
    for outer in (graph.compile(), graph.compile(checkpointer=checkpointer)):
        result = await outer.run({"log": []}, thread_id="t")
        assert isinstance(result.error, ValueError), result.error
        assert isinstance(result.error, ConfigurationError), result.error
        assert "recursion_limit" in str(result.error)


@pytest.mark.parametrize("limit", [float("nan"), float("inf"), 2.5, True, "10", None])
async def test_a_recursion_limit_that_is_no_whole_number_is_refused(
    checkpointer: Checkpointer, limit: Any
) -> None:
    # nan compared false with every step count: the step limit was off and a looping graph
    # ran on; 2.5 and True were taken as limits, "10" raised TypeError ('<' not supported)
    graph = chain("a", "b").compile(checkpointer=checkpointer)
    if limit is not None:  # None at run time: the graph's own limit
        with pytest.raises(ValueError, match=r"recursion_limit must be a whole number") as exc:
            await graph.run({"log": []}, thread_id="t", recursion_limit=limit)
        assert isinstance(exc.value, ConfigurationError)
        assert await checkpointer.latest("t") is None
    with pytest.raises(ConfigurationError, match=r"recursion_limit must be a whole number"):
        chain("a").compile(recursion_limit=limit)
