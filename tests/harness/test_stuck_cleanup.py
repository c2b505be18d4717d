"""A tool whose cancellation never finishes (it swallows every cancel, or awaits for ever in
its cleanup) must not hold its run, nor ``Runtime.close``, for ever: past a grace the run gets
its terminal state without its task, which is abandoned (and logged)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TypedDict

import pytest

from tinyagents import Agent, RunLimits, RunStatus, SubAgent, SubAgentTool, tool
from tinyagents.graph import END, START, AgentNode, StateGraph
from tinyagents.harness import FunctionTool, loop
from tinyagents.runtime import Runtime
from tinyagents.testkit import EventRecorder, ScriptedModel, reply, tool_call


class Topic(TypedDict, total=False):
    topic: str
    draft: str


class StuckCleanup:
    """A tool that, once cancelled, never finishes its cleanup (every cancel swallowed)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.release = asyncio.Event()

        @tool
        async def stuck() -> str:
            """Waits; its cleanup never ends until released."""
            self.started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                while not self.release.is_set():
                    try:
                        await self.release.wait()
                    except asyncio.CancelledError:
                        continue
            return "late"

        self.tool = stuck


@pytest.fixture(autouse=True)
def short_graces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop, "CANCEL_GRACE_S", 0.05)
    monkeypatch.setattr("tinyagents.runtime.CLOSE_GRACE_S", 0.05)


@pytest.fixture
async def stuck() -> AsyncIterator[StuckCleanup]:
    tool = StuckCleanup()
    yield tool
    tool.release.set()  # whatever the test found: the event loop must be able to close
    await asyncio.sleep(0)


async def test_a_cancel_ends_a_run_whose_timed_out_tool_never_finishes_its_cleanup(
    caplog: pytest.LogCaptureFixture, stuck: StuckCleanup
) -> None:
    """The tool timed out and its cleanup never ends: the cancel, which waits for the tool's
    result, held the run (and its ``result()``) for ever. It now ends the run ``cancelled``
    without its task, the cancel applied; the task ending later changes nothing."""
    recorder = EventRecorder()
    rt = Runtime(testing=True, sinks=[recorder])
    await rt.open()
    agent = Agent(
        "a", model=ScriptedModel([tool_call("stuck", {}), reply("done")]), tools=[stuck.tool]
    )
    handle = await rt.start(agent, "go", limits=RunLimits(tool_timeout_s=0.01))
    await stuck.cancelled.wait()  # timed out: its cleanup now never ends
    with caplog.at_level(logging.ERROR):
        receipt = await handle.cancel("stop it")
        assert receipt.status == "accepted"
        result = await handle.result()
    assert result.status is RunStatus.CANCELLED
    assert result.error is not None and "'stuck'" in result.error and "stop it" in result.error
    assert any("abandoned" in r.getMessage() for r in caplog.records)
    assert handle.task is not None and not handle.task.done()
    ends = [e for e in recorder.events if e.type.startswith("run.") and e.type != "run.started"]
    assert [e.type for e in ends] == ["run.cancelled"]
    terminal = {"steering.applied", "steering.failed", "steering.superseded"}
    settled = [
        e.type
        for e in recorder.steering()
        if e.correlation_id == receipt.correlation_id and e.type in terminal
    ]
    assert settled == ["steering.applied"]
    await rt.close()  # returns: the stuck task was already given up
    # the task ends late: the run keeps its one terminal state
    stuck.release.set()
    await asyncio.wait([handle.task])
    assert (await handle.result()).status is RunStatus.CANCELLED
    ends = [e for e in recorder.events if e.type.startswith("run.") and e.type != "run.started"]
    assert [e.type for e in ends] == ["run.cancelled"]


async def test_close_returns_past_a_run_whose_tool_swallows_every_cancel(
    caplog: pytest.LogCaptureFixture, stuck: StuckCleanup
) -> None:
    """``close`` cancels the run's task, whose tool swallows every cancel: it waited for it
    for ever. It now ends the run ``cancelled`` after its grace and returns."""
    rt = Runtime(testing=True)
    await rt.open()
    agent = Agent(
        "a", model=ScriptedModel([tool_call("stuck", {}), reply("done")]), tools=[stuck.tool]
    )
    handle = await rt.start(agent, "go")
    await stuck.started.wait()
    with caplog.at_level(logging.ERROR):
        await rt.close()
    result = await handle.result()
    assert result.status is RunStatus.CANCELLED
    assert result.error is not None and "runtime closed" in result.error
    assert any("abandoned" in r.getMessage() for r in caplog.records)
    assert handle.task is not None and not handle.task.done()
    stuck.release.set()
    await asyncio.wait([handle.task])
    assert (await handle.result()).status is RunStatus.CANCELLED


async def test_a_cancelled_parent_ends_past_a_child_whose_timed_out_tool_never_finishes(
    stuck: StuckCleanup,
) -> None:
    """The parent's cancel goes down to the child inside its ``SubAgentTool``: the child, held
    by its timed-out tool's cleanup, is ended without its task, so the parent's tool call
    returns and its own cancel lands at its next boundary."""
    recorder = EventRecorder()
    rt = Runtime(testing=True, sinks=[recorder])
    await rt.open()
    stuck.tool.timeout_s = 0.01
    child = Agent(
        "child", model=ScriptedModel([tool_call("stuck", {}), reply("c")]), tools=[stuck.tool]
    )
    parent = Agent(
        "parent",
        model=ScriptedModel([tool_call("child", input="go"), reply("p")]),
        tools=[SubAgentTool(SubAgent(child))],
    )
    handle = await rt.start(parent, "go")
    await stuck.cancelled.wait()
    child_run = next(h for h in rt.runs.handles() if h.run_id != handle.run_id)
    assert (await handle.cancel("stop all")).status == "accepted"
    result = await handle.result()
    assert result.status is RunStatus.CANCELLED and result.error == "stop all"
    child_result = await child_run.result()
    assert child_result.status is RunStatus.CANCELLED
    assert child_result.error is not None and "'stuck'" in child_result.error
    applied = [e.run_id for e in recorder.steering() if e.type == "steering.applied"]
    assert sorted(applied) == sorted([handle.run_id, child_run.run_id])
    await rt.close()


async def test_a_cancelled_agent_node_ends_past_its_tool_that_never_finishes_its_cleanup(
    stuck: StuckCleanup,
) -> None:
    """A graph whose agent node is cancelled cancels the node's run's task, which its tool's
    cleanup then holds: the run still ends ``cancelled``, saying why, and the graph too."""
    rt = Runtime(testing=True)
    await rt.open()
    agent = Agent(
        "writer",
        model=ScriptedModel([tool_call("stuck", {}), reply("w")]),
        tools=[stuck.tool],
    )
    graph = StateGraph(Topic)
    graph.add_node("writer", AgentNode(agent, input="topic", output="draft"))
    graph.add_edge(START, "writer").add_edge("writer", END)
    handle = await rt.start_graph(graph.compile(), {"topic": "cats"})
    await stuck.started.wait()
    [child] = [
        h for h in rt.runs.handles() if h.info.kind == "agent" and h.info.node_id == "writer"
    ]
    await handle.cancel(immediate=True)
    assert (await handle.result()).status is RunStatus.CANCELLED
    result = await child.result()
    assert result.status is RunStatus.CANCELLED
    assert "writer" in str(result.error) and "'stuck'" in str(result.error)
    await rt.close()


async def test_close_returns_past_a_graph_node_that_swallows_every_cancel(
    stuck: StuckCleanup, caplog: pytest.LogCaptureFixture
) -> None:
    """A graph run's task is the runtime's own too: ``close`` waited for it there after it
    had ended the run without it."""

    async def node(state: Topic) -> Topic:
        return {"draft": await stuck.tool.call({})}

    graph = StateGraph(Topic).add_node("n", node).add_edge(START, "n").add_edge("n", END)
    rt = Runtime(testing=True)
    await rt.open()
    handle = await rt.start_graph(graph.compile(), {"topic": "cats"})
    await stuck.started.wait()
    with caplog.at_level(logging.ERROR):
        await rt.close()
    result = await handle.result()
    assert result.status is RunStatus.CANCELLED
    assert "runtime closed" in str(result.error)
    assert any("abandoned" in r.getMessage() for r in caplog.records)
    assert handle.task is not None
    stuck.release.set()
    await asyncio.wait([handle.task])
    assert (await handle.result()).status is RunStatus.CANCELLED
    assert "runtime closed" in str((await handle.result()).error)  # not the late task's end


def _stuck_sync_tool(stuck: StuckCleanup) -> FunctionTool:
    """A sync ``def`` tool whose work is the coroutine it returns (run in the run's task)."""

    @tool
    def stuck_sync() -> object:
        """Returns the stuck coroutine."""
        return stuck.tool.fn()

    return stuck_sync


@pytest.mark.parametrize("kind", ["async", "sync returning a coroutine"])
async def test_a_tool_that_times_out_and_never_finishes_its_cleanup_ends_its_run(
    caplog: pytest.LogCaptureFixture, stuck: StuckCleanup, kind: str
) -> None:
    """The tool's own ``tool_timeout_s`` runs out and its cleanup never ends, no cancel sent:
    the run waited for the tool for ever (``result()`` never answered). Past the same grace
    as a cancel's, it now ends ``failed`` without its task, saying which tool timed out."""
    recorder = EventRecorder()
    rt = Runtime(testing=True, sinks=[recorder])
    await rt.open()
    used = stuck.tool if kind == "async" else _stuck_sync_tool(stuck)
    name = used.name
    agent = Agent("a", model=ScriptedModel([tool_call(name, {}), reply("done")]), tools=[used])
    # the sync one's thread must hand its coroutine back before the timeout: ample time
    limit = 0.01 if kind == "async" else 0.5
    handle = await rt.start(agent, "go", limits=RunLimits(tool_timeout_s=limit))
    with caplog.at_level(logging.ERROR):
        # a guard against the hang this test is about, not a measure of anything
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status is RunStatus.FAILED
    assert result.error is not None
    assert f"tool {name!r}" in result.error and f"timed out after {limit:g} s" in result.error
    assert "did not finish" in result.error
    assert any("abandoned" in r.getMessage() for r in caplog.records)
    # the call is answered in the transcript (a session can go on with it)
    [answer] = [m for m in result.messages if m.role == "tool"]
    assert "timed out" in answer.content
    ends = [e for e in recorder.events if e.type.startswith("run.") and e.type != "run.started"]
    assert [e.type for e in ends] == ["run.failed"]
    await rt.close()
    stuck.release.set()
    assert handle.task is not None
    await asyncio.wait([handle.task])
    assert (await handle.result()).status is RunStatus.FAILED
    ends = [e for e in recorder.events if e.type.startswith("run.") and e.type != "run.started"]
    assert [e.type for e in ends] == ["run.failed"]


async def test_a_timed_out_tool_whose_cleanup_ends_within_the_grace_lets_the_run_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The watch a tool's timeout arms ends only a run whose call is still being cancelled
    after the grace: a cleanup that ends within it is waited for, and the model reads that
    the tool timed out, as before."""
    monkeypatch.setattr(loop, "CANCEL_GRACE_S", 60.0)  # far longer than the test takes
    in_cleanup, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow_cleanup() -> str:
        """Waits; cleans up until released, then lets its cancellation go on."""
        try:
            await asyncio.Event().wait()
        finally:
            in_cleanup.set()
            await asyncio.shield(release.wait())
        return "never"

    agent = Agent(
        "a",
        model=ScriptedModel([tool_call("slow_cleanup", {}), reply("done")]),
        tools=[slow_cleanup],
    )
    async with Runtime(testing=True) as rt:
        handle = await rt.start(agent, "go", limits=RunLimits(tool_timeout_s=0.01))
        await in_cleanup.wait()  # timed out, in its cleanup
        release.set()
        result = await handle.result()
    assert (result.status, result.output) == (RunStatus.COMPLETED, "done")
    [answer] = [m for m in result.messages if m.role == "tool"]
    assert "timed out after 0.01 s" in answer.content


async def test_a_tool_cut_short_by_the_deadline_that_never_finishes_ends_limit_exceeded(
    stuck: StuckCleanup,
) -> None:
    """The run's ``deadline_s`` (not the tool's timeout) cut the call short, and its cleanup
    never ends: the run ends ``limit_exceeded`` on ``deadline_s``, as it would have at its
    next boundary, saying which tool held it, and ``limit_error`` says so to a caller."""
    recorder = EventRecorder()
    agent = Agent(
        "a", model=ScriptedModel([tool_call("stuck", {}), reply("done")]), tools=[stuck.tool]
    )
    async with Runtime(testing=True, sinks=[recorder]) as rt:
        handle = await rt.start(agent, "go", limits=RunLimits(deadline_s=0.05))
        # a guard against the hang this test is about, not a measure of anything
        result = await asyncio.wait_for(handle.result(), 60)
        assert result.status is RunStatus.LIMIT_EXCEEDED
        assert result.error is not None
        assert "'deadline_s'" in result.error and "'stuck'" in result.error
        error = loop.limit_error(handle, result)
        assert (error.limit, error.allowed) == ("deadline_s", 0.05)
        assert [e.limit for e in recorder.events if e.type == "limit.exceeded"] == ["deadline_s"]
