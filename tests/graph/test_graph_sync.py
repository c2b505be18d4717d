"""``CompiledGraph.run_sync``: ``run`` for code without an event loop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypedDict

import pytest
from graphkit import chain

from tinyagents.errors import SyncInAsyncError, TinyAgentsError
from tinyagents.graph import END, START, Command, StateGraph, interrupt
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer, SqliteCheckpointer


class Review(TypedDict, total=False):
    draft: str
    verdict: Any


def review(state: Review) -> dict[str, Any]:
    return {"verdict": interrupt(f"approve {state['draft']!r}?")}


def review_graph(checkpointer: Checkpointer) -> Any:
    graph = StateGraph(Review).add_node("review", review)
    graph.add_edge(START, "review").add_edge("review", END)
    return graph.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_run_sync_pauses_and_resumes_a_thread_without_a_loop(backend: str, tmp_path: Path) -> None:
    checkpointer: Checkpointer = (
        MemoryCheckpointer() if backend == "memory" else SqliteCheckpointer(tmp_path / "cp.db")
    )
    graph = review_graph(checkpointer)
    paused = graph.run_sync({"draft": "v1"}, thread_id="t")
    assert paused.status == "interrupted"
    [question] = paused.interrupts
    assert question.value == "approve 'v1'?"
    done = graph.run_sync(Command(resume={question.id: "yes"}), thread_id="t")
    assert done.status == "completed"
    assert done.state == {"draft": "v1", "verdict": "yes"}
    saved = asyncio.run(graph.get_state("t"))
    assert saved.values == done.state and saved.checkpoint_id == done.checkpoint_id


def test_run_sync_returns_what_run_returns() -> None:
    graph = chain("a", "b").compile()
    by_sync = graph.run_sync({"x": 1}, recursion_limit=5)
    by_await = asyncio.run(graph.run({"x": 1}, recursion_limit=5))
    assert by_sync.status == by_await.status == "completed"
    assert by_sync.state == by_await.state == {"x": 1, "log": ["a", "b"]}
    assert by_sync.steps == by_await.steps == 2


async def test_run_sync_inside_a_running_loop_raises_and_runs_nothing() -> None:
    calls: list[Any] = []
    checkpointer = MemoryCheckpointer()
    graph = (
        StateGraph(Review)
        .add_node("a", lambda state: calls.append(state) or {})
        .add_edge(START, "a")
        .add_edge("a", END)
        .compile(checkpointer=checkpointer, name="g")
    )
    with pytest.raises(SyncInAsyncError, match=r"await graph\.run") as caught:
        graph.run_sync({"draft": "v1"}, thread_id="t")
    assert isinstance(caught.value, TinyAgentsError) and isinstance(caught.value, RuntimeError)
    assert calls == []
    assert (await graph.get_state("t")).checkpoint_id is None  # nothing was saved either
    # and the graph still runs the async way in this loop
    assert (await graph.run({"draft": "v1"}, thread_id="t")).status == "completed"
    assert len(calls) == 1


def test_run_sync_takes_every_argument_of_run() -> None:
    """docs/graph.md: ``run_sync`` takes "the arguments of run()"; ``interrupt_before`` and
    ``interrupt_after`` were missing (a ``TypeError``)."""
    import inspect

    graph = chain("a", "b").compile(checkpointer=MemoryCheckpointer())
    run_args = inspect.signature(graph.run).parameters
    assert list(inspect.signature(graph.run_sync).parameters) == list(run_args)
    paused = graph.run_sync({"x": 1}, thread_id="t", interrupt_before=["b"])
    assert paused.status == "interrupted" and paused.state["log"] == ["a"]
    assert graph.run_sync({"x": 2}, thread_id="u", interrupt_after="a").state["log"] == ["a"]
    assert graph.run_sync(None, thread_id="t").state["log"] == ["a", "b"]
