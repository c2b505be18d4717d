"""A node whose cancellation never finishes (it swallows every cancel, or awaits for ever in its
cleanup) must not hold its parallel step for ever when the step cancels it (a sibling failed,
the run was cancelled): past ``CANCEL_GRACE_S`` the step goes on without it, its task is left
behind (logged) and changes nothing when it ends, and the run keeps one terminal state."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Annotated, TypedDict

import pytest

from tinyagents import RunStatus
from tinyagents.graph import END, START, StateGraph
from tinyagents.harness import loop
from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.runtime import Runtime
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import EventRecorder


def _add(a: list[str], b: list[str]) -> list[str]:
    return a + b


class State(TypedDict, total=False):
    log: Annotated[list[str], _add]


class Stuck:
    """A node that, once cancelled, does not finish until released (every cancel swallowed)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.release = asyncio.Event()
        #: once released, end with the cancel (a cleanup that awaited in ``finally``)
        self.reraise = False

    async def node(self, state: State) -> State:
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
            if self.reraise:
                raise
        return {"log": ["late"]}


@pytest.fixture(autouse=True)
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop, "CANCEL_GRACE_S", 0.05)


@pytest.fixture
async def stuck() -> AsyncIterator[Stuck]:
    node = Stuck()
    yield node
    node.release.set()  # whatever the test found: the event loop must be able to close
    await asyncio.sleep(0)


def _graph(stuck: Stuck, other: object) -> StateGraph[State]:
    graph = StateGraph(State)
    graph.add_node("stuck", stuck.node).add_node("other", other)  # type: ignore[arg-type]
    graph.add_edge(START, "stuck").add_edge(START, "other")
    graph.add_edge(["stuck", "other"], END)
    return graph


async def test_a_failing_sibling_ends_the_run_past_a_node_that_swallows_its_cancel(
    stuck: Stuck, caplog: pytest.LogCaptureFixture
) -> None:
    """A sibling fails: the TaskGroup cancelled the stuck node and waited for it for ever. The
    run now fails with the sibling's error after the grace; the node is left behind, named in
    the log and in a note on the error, and its late result is not saved."""

    async def bad(state: State) -> State:
        await stuck.started.wait()
        raise ValueError("boom")

    cp = MemoryCheckpointer()
    app = _graph(stuck, bad).compile(checkpointer=cp)
    with caplog.at_level(logging.ERROR):
        result = await asyncio.wait_for(app.run({"log": []}, thread_id="t"), 60)
    assert result.status == "failed"
    assert isinstance(result.error, ValueError) and str(result.error) == "boom"
    assert any("'stuck'" in note for note in getattr(result.error, "__notes__", ()))
    assert any(
        "'stuck'" in r.getMessage() and "left behind" in r.getMessage() for r in caplog.records
    )
    before = await app.get_state(thread_id="t")
    stuck.release.set()
    for _ in range(20):
        await asyncio.sleep(0)
    after = await app.get_state(thread_id="t")
    assert after.values == before.values
    assert [t.name for t in after.tasks if t.result is not None] == []  # no late write


async def test_a_run_cancel_ends_the_run_past_a_node_that_swallows_its_cancel(
    stuck: Stuck,
) -> None:
    """An immediate cancel of a runtime-managed run stops the step's tasks: it waited for the
    stuck one for ever. The run now ends ``cancelled`` after the grace, its reason naming the
    node, one terminal event; the task ending later changes nothing."""

    async def waits(state: State) -> State:
        await asyncio.Event().wait()
        return {}

    recorder = EventRecorder()
    rt = Runtime(testing=True, sinks=[recorder])
    await rt.open()
    cp = MemoryCheckpointer()
    app = _graph(stuck, waits).compile(checkpointer=cp)
    handle = await rt.start_graph(app, {"log": []}, thread_id="t")
    await stuck.started.wait()
    receipt = await handle.cancel("stop it", immediate=True)
    assert receipt.status == "accepted"
    result = await asyncio.wait_for(handle.result(), 60)
    assert result.status is RunStatus.CANCELLED
    assert result.error is not None
    assert "stop it" in result.error and "'stuck'" in result.error
    ends = [e.type for e in recorder.events if e.type in ("graph.completed", "run.cancelled")]
    # its task's entry in the run tree ended too, cancelled, as a task that stops does
    cancelled = [e for e in recorder.events if e.type == "graph.task_cancelled"]
    assert sorted(e.node for e in cancelled) == ["other", "stuck"]
    assert all(h.status.finished for h in rt.runs.handles())
    stuck.release.set()
    for _ in range(20):
        await asyncio.sleep(0)
    assert (await handle.result()).status is RunStatus.CANCELLED
    assert [e for e in recorder.events if e.type == "graph.task_cancelled"] == cancelled
    assert [
        e.type for e in recorder.events if e.type in ("graph.completed", "run.cancelled")
    ] == ends
    state = await app.get_state(thread_id="t")
    assert [t.name for t in state.tasks if t.result is not None] == []  # no late write
    await rt.close()


async def test_a_cancelled_caller_gets_its_cancel_past_a_node_that_swallows_it(
    stuck: Stuck,
) -> None:
    """A plain ``graph.run`` (no runtime) whose caller is cancelled: the step cancels its tasks
    and waited for the stuck one for ever; it now re-raises the cancel after the grace."""

    async def waits(state: State) -> State:
        await asyncio.Event().wait()
        return {}

    app = _graph(stuck, waits).compile()
    running = asyncio.ensure_future(app.run({"log": []}))
    await stuck.started.wait()
    running.cancel()
    done, _ = await asyncio.wait([running], timeout=60)  # a hang guard
    assert running in done and running.cancelled()


@pytest.mark.parametrize("reraise", [False, True])
async def test_an_immediate_task_cancel_skips_a_node_that_swallows_its_cancel(
    stuck: Stuck, reraise: bool
) -> None:
    """A steering cancel of one running task whose cancellation never finishes: the step
    waited for it for ever. It now ends skipped after the grace and the run goes on; its late
    result changes nothing."""

    async def fine(state: State) -> State:
        return {"log": ["fine"]}

    stuck.reraise = reraise
    recorder = EventRecorder()
    rt = Runtime(testing=True, sinks=[recorder])
    await rt.open()
    cp = MemoryCheckpointer()
    handle = await rt.start_graph(_graph(stuck, fine).compile(checkpointer=cp), {"log": []})
    await stuck.started.wait()
    [task_id] = [t.id for t in handle.driver.run.plan() if t.node == "stuck"]  # type: ignore[attr-defined]
    cancel = SteeringCommand(
        target=SteeringTarget.graph_task(handle.run_id, task_id),
        kind=SteeringKind.CANCEL,
        actor=SteeringActor.test(),
        delivery=SteeringDelivery.IMMEDIATE,
    )
    assert (await rt.submit(cancel)).status == "accepted"
    result = await asyncio.wait_for(handle.result(), 60)
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["fine"]
    stuck.release.set()
    for _ in range(20):
        await asyncio.sleep(0)
    assert (await handle.result()).output["log"] == ["fine"]
    ends = [
        e.type
        for e in recorder.events
        if e.type.startswith("graph.task_")
        and e.type != "graph.task_started"
        and getattr(e, "node", None) == "stuck"
    ]
    assert ends == ["graph.task_cancelled"]  # once, as it was left behind: not as it ended
    await rt.close()


@pytest.mark.parametrize("saved", [False, True])
async def test_a_node_that_raises_cancelled_error_uncancelled_fails_its_run(saved: bool) -> None:
    """A node of a parallel step raises ``CancelledError`` though nothing cancelled it (a
    cancel of something it awaited, let through): the step took it for a cancelled task and
    the run ended ``interrupted`` with nothing to answer. It fails the node now."""

    async def stray(state: State) -> State:
        raise asyncio.CancelledError

    async def fine(state: State) -> State:
        return {"log": ["fine"]}

    graph = StateGraph(State).add_node("stray", stray).add_node("fine", fine)
    graph.add_edge(START, "stray").add_edge(START, "fine").add_edge(["stray", "fine"], END)
    app = graph.compile(checkpointer=MemoryCheckpointer() if saved else None)
    result = await app.run({"log": []}, thread_id="t" if saved else None)
    assert result.status == "failed"
    assert isinstance(result.error, RuntimeError) and "'stray'" in str(result.error)
    assert isinstance(result.error.__cause__, asyncio.CancelledError)


@pytest.mark.parametrize("is_async", [True, False])
async def test_a_lone_plain_node_that_raises_cancelled_error_uncancelled_fails_its_run(
    is_async: bool,
) -> None:
    """The same in a step of one plain function node of a run without checkpointer, runtime or
    stream (the run's fast path): its ``CancelledError`` went out of ``run()`` to a caller that
    had cancelled nothing, instead of failing the run."""

    async def stray_async(state: State) -> State:
        raise asyncio.CancelledError

    def stray_sync(state: State) -> State:
        raise asyncio.CancelledError

    graph = StateGraph(State).add_node("stray", stray_async if is_async else stray_sync)
    app = graph.add_edge(START, "stray").add_edge("stray", END).compile()
    result = await app.run({"log": []})
    assert result.status == "failed"
    assert isinstance(result.error, RuntimeError) and "'stray'" in str(result.error)
    assert isinstance(result.error.__cause__, asyncio.CancelledError)


async def test_a_lone_plain_node_cancelled_by_its_caller_ends_with_the_cancel() -> None:
    """The caller of that run cancelling it while the node awaits: the cancel goes out to the
    caller as before, not taken for a node's stray one."""
    started = asyncio.Event()

    async def waits(state: State) -> State:
        started.set()
        await asyncio.Event().wait()
        return {}

    app = StateGraph(State).add_node("waits", waits).add_edge(START, "waits").compile()
    running = asyncio.ensure_future(app.run({"log": []}))
    await started.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
