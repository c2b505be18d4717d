"""Graph runs and agent runs share a runtime's thread ids: a graph run and a session's turn
(an agent run holding its thread) are never two writers of one thread.

A runtime indexes the runs of a thread whatever their kind, and ``SteeringTarget.thread``
reaches the newest of them, graph or agent: one id space. A session's turn was refused while
a graph run of its thread ran, but a graph run started on a thread a turn held ran beside it
(and a thread command then reached the graph alone). Now each is ``ThreadBusy`` while the
other writes the thread, naming it, and starts (and saves) nothing; with a durable store a
turn holding the thread in another runtime on the store refuses the graph run too. Plain
agent runs (no hold) still run beside a graph run of their thread, as they do beside each
other. Runs are held at gates, never by sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from graphkit import LogState, logger

from tinyagents import Agent, Runtime, SubAgent
from tinyagents.errors import ThreadBusy
from tinyagents.graph import END, START, CompiledGraph, StateGraph
from tinyagents.runs import RunStatus
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer, SqliteCheckpointer
from tinyagents.testkit import Gate, ScriptedModel, reply


@pytest.fixture(params=["memory", "sqlite"])
async def rt(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Runtime]:
    if request.param == "memory":
        runtime = Runtime(testing=True)
    else:
        runtime = Runtime(f"sqlite:///{tmp_path / 'runs.db'}", testing=True)
    async with runtime:
        yield runtime


def gated_graph(gate: asyncio.Event, cp: Checkpointer | None = None) -> CompiledGraph:
    async def a(state: Any) -> dict[str, Any]:
        await gate.wait()
        return {"log": ["a"]}

    graph = StateGraph(LogState).add_node("a", a).add_node("b", logger("b"))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    return graph.compile(checkpointer=cp or MemoryCheckpointer())


def plain_graph(cp: Checkpointer | None = None) -> CompiledGraph:
    graph = StateGraph(LogState).add_node("a", logger("a"))
    graph.add_edge(START, "a").add_edge("a", END)
    return graph.compile(checkpointer=cp or MemoryCheckpointer())


async def test_a_graph_run_on_a_thread_a_turn_holds_is_thread_busy(rt: Runtime) -> None:
    gate = Gate("turn")
    session = SubAgent(Agent("chat", gate.model("answered"))).session(runtime=rt, thread_id="t")
    turn = asyncio.ensure_future(session.send("hi"))
    await gate.entered.wait()
    graph = plain_graph()
    before = rt.runs.list()
    for start in (
        lambda: rt.start_graph(graph, {}, thread_id="t"),
        lambda: graph.run({}, thread_id="t", runtime=rt),
    ):
        with pytest.raises(ThreadBusy) as busy:
            await start()
        assert busy.value.thread_id == "t"
        assert busy.value.held_by == session.runs[0]
    assert rt.runs.list() == before
    assert await graph.checkpointer.latest("t") is None  # type: ignore[union-attr]
    gate.open()
    assert await turn == "answered"
    # the turn ended: the thread is the graph's to write
    result = await graph.run({}, thread_id="t", runtime=rt)
    assert result.state["log"] == ["a"]


async def test_a_turn_on_a_thread_a_graph_run_writes_is_thread_busy(rt: Runtime) -> None:
    gate = asyncio.Event()
    handle = await rt.start_graph(gated_graph(gate), {}, thread_id="t")
    calls: list[object] = []
    agent = Agent("chat", ScriptedModel([lambda r: calls.append(r) or "no"]))
    with pytest.raises(ThreadBusy) as busy:
        await SubAgent(agent).session(runtime=rt, thread_id="t").send("hi")
    assert busy.value.held_by == handle.run_id
    with pytest.raises(ThreadBusy):
        await rt.start(agent, "hi", thread_id="t", hold_thread=True)
    assert calls == []
    gate.set()
    assert (await handle.result()).status is RunStatus.COMPLETED
    after = SubAgent(Agent("chat", ScriptedModel([reply("now")]))).session(
        runtime=rt, thread_id="t"
    )
    assert await after.send("hi") == "now"


async def test_of_a_turn_and_a_graph_run_started_at_once_one_gets_the_thread(
    rt: Runtime,
) -> None:
    gates = [Gate("turn"), asyncio.Event()]
    started = await asyncio.gather(
        rt.start(Agent("chat", gates[0].model()), "hi", thread_id="t", hold_thread=True),
        rt.start_graph(gated_graph(gates[1]), {}, thread_id="t"),
        return_exceptions=True,
    )
    refused = [s for s in started if isinstance(s, BaseException)]
    assert len(refused) == 1 and isinstance(refused[0], ThreadBusy), started
    gates[0].open()
    gates[1].set()
    for handle in started:
        if not isinstance(handle, BaseException):
            await handle.result()


async def test_plain_agent_runs_still_run_beside_a_graph_run_of_their_thread(
    rt: Runtime,
) -> None:
    gate = asyncio.Event()
    handle = await rt.start_graph(gated_graph(gate), {}, thread_id="t")
    plain = await rt.start(Agent("plain", ScriptedModel([reply("side")])), "hi", thread_id="t")
    assert (await plain.result()).output == "side"
    gate.set()
    await handle.result()
    gate2 = Gate("plain")
    running = await rt.start(Agent("plain", gate2.model()), "hi", thread_id="t")
    await gate2.entered.wait()
    assert (await plain_graph().run({}, thread_id="t", runtime=rt)).state["log"] == ["a"]
    gate2.open()
    await running.result()


async def test_a_graph_run_in_another_runtime_on_a_held_thread_is_thread_busy(
    tmp_path: Path,
) -> None:
    """On one SQLite file: a turn of runtime A holds thread t; a graph run of runtime B on
    t is refused naming the turn, and saves nothing; once the turn ended, it runs."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    cp = SqliteCheckpointer(tmp_path / "graph.db")
    gate = Gate("turn")
    async with Runtime(url, testing=True) as a, Runtime(url, testing=True) as b:
        session = SubAgent(Agent("chat", gate.model())).session(runtime=a, thread_id="t")
        turn = asyncio.ensure_future(session.send("hi"))
        await gate.entered.wait()
        graph = plain_graph(cp)
        with pytest.raises(ThreadBusy) as busy:
            await b.start_graph(graph, {}, thread_id="t")
        assert busy.value.held_by == session.runs[0]
        assert b.runs.list() == []
        assert await cp.latest("t") is None
        gate.open()
        await turn
        assert (await graph.run({}, thread_id="t", runtime=b)).state["log"] == ["a"]
    await cp.aclose()
