"""A hostile user's second round: the sub-agent session and tool, the testkit's fakes, the
supervisor's rules and judge, and events, given what a careless or malicious caller gives.

Each test is a probe that found something (named in its comment) or pins a refusal the docs
promise; the first round's are in the ``*hostile*`` files of each directory."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest

from tinyagents import Agent, Boundary, RunStatus, Runtime, SubAgent, SubAgentTool
from tinyagents.errors import ConfigurationError, InvalidIdError
from tinyagents.events import EventBus, MemorySink, RunEvent
from tinyagents.graph import END, START, StateGraph
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import (
    BoundaryProbe,
    EventRecorder,
    EventWaiter,
    FunctionModel,
    Gate,
    ScriptedModel,
    fake_agent,
)


def _helper() -> SubAgent:
    return SubAgent(Agent("helper", ScriptedModel(["one", "two"])))


@pytest.mark.parametrize("blank", ["", "   ", "\t"])
async def test_a_blank_session_thread_id_is_refused_not_replaced_by_a_fresh_one(
    blank: str,
) -> None:
    # "" was read as "no thread id": the session ran on a random thread, and steering sent to
    # the thread the caller named never reached it ("   " was refused, at the first send)
    async with Runtime() as rt:
        with pytest.raises(InvalidIdError, match="thread_id must be a non-blank string"):
            _helper().session(runtime=rt, thread_id=blank)
        assert rt.runs.list() == []  # nothing started


@pytest.mark.parametrize("bad", ["a\x00b", "\ud800", "x" * 300, 5])
async def test_a_session_thread_id_breaking_the_id_rule_is_refused_when_the_session_is_made(
    bad: Any,
) -> None:
    async with Runtime() as rt:
        with pytest.raises(InvalidIdError) as raised:
            _helper().session(runtime=rt, thread_id=bad)
        assert raised.value.field == "thread_id"


async def test_a_session_without_a_thread_id_gets_a_fresh_one_and_keeps_it() -> None:
    async with Runtime() as rt:
        session = _helper().session(runtime=rt)
        assert session.thread_id is not None and session.thread_id.startswith("th-")
        assert await session.send("first") == "one"
        assert await session.send("second") == "two"
        threads = {rt.runs.get(run_id).info.thread_id for run_id in session.runs}
        assert threads == {session.thread_id}


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_sub_agent_tool_name_is_refused_not_replaced(blank: str) -> None:
    # name="" was read as "no name": the tool took the sub-agent's, where SubAgent(name="")
    # and @tool(name="") refuse a blank name
    with pytest.raises(ConfigurationError, match="tool name"):
        SubAgentTool(_helper(), name=blank)
    assert SubAgentTool(_helper()).name == "helper"  # no name: the sub-agent's


@pytest.mark.parametrize("produced", [None, 42, b"bytes", {"text": "hi"}, ["a"]])
async def test_a_function_model_producing_no_response_fails_the_run_naming_the_model(
    produced: Any,
) -> None:
    model = FunctionModel(lambda request: produced, name="fake")
    result = await Agent("a", model).run("go")
    assert result.status.value == "failed"
    assert result.error is not None and "model 'fake' produced" in result.error


# ---------------------------------------------------------------------- testkit: BoundaryProbe


@pytest.mark.parametrize(
    "boundary",
    [
        "before_modell_call",  # a typo: no boundary, so no run ever reached it
        5,
        None,
        Boundary.WHILE_PAUSED,  # taken without a call of the run's `at`: never seen
        Boundary.BETWEEN_SUPERSTEPS,  # a graph's: the probe watches agent runs
    ],
)
async def test_a_hold_no_agent_run_can_reach_is_refused_not_waited_on_for_ever(
    boundary: Any,
) -> None:
    # each was a Hold whose `reached` never came: the test using it hung
    async with Runtime() as rt:
        probe = BoundaryProbe(rt)
        with pytest.raises(ConfigurationError, match="hold"):
            probe.hold(boundary)
        assert probe._holds == []


async def test_a_hold_given_a_boundarys_name_holds_the_run_there() -> None:
    # "before_model_call" equals Boundary.BEFORE_MODEL_CALL, but a hold compared them with
    # `is`: the string matched no visit, and the test hung
    async with Runtime() as rt:
        probe = BoundaryProbe(rt)
        hold = probe.hold("before_model_call")  # type: ignore[arg-type]
        handle = await rt.start(fake_agent("worker"), "go")
        await hold.reached.wait()
        assert hold.visit is not None and hold.visit.boundary is Boundary.BEFORE_MODEL_CALL
        assert probe.current(handle.run_id) is Boundary.BEFORE_MODEL_CALL
        hold.release()
        assert (await handle.result()).output == "done"


@pytest.mark.parametrize("nth", [0, -1, True, 1.5, "2", None])
async def test_a_hold_nth_that_is_no_count_from_one_is_refused(nth: Any) -> None:
    # "2" failed the held run with a TypeError at its boundary (int < str); 0 and -1 held
    # the first arrival as if 1 were given
    async with Runtime() as rt:
        probe = BoundaryProbe(rt)
        with pytest.raises(ConfigurationError, match="nth"):
            probe.hold(Boundary.BEFORE_MODEL_CALL, nth=nth)


@pytest.mark.parametrize("runtime", [None, "sqlite:///runs.db", object()])
def test_a_boundary_probe_of_no_runtime_is_refused(runtime: Any) -> None:
    # an AttributeError ("'NoneType' object has no attribute 'runs'")
    with pytest.raises(ConfigurationError, match="BoundaryProbe"):
        BoundaryProbe(runtime)


# ---------------------------------------------------------------------- events


@pytest.mark.parametrize("sink", [None, 5, "print", [print]])
def test_a_sink_that_is_no_callable_is_refused_when_added_not_at_every_event(sink: Any) -> None:
    # taken, it raised a TypeError at every event (counted as the sink's errors, logged once),
    # as Runtime(sinks=[...]) and subscribe(where=...) refuse one
    bus = EventBus()
    with pytest.raises(ConfigurationError, match="add_sink"):
        bus.add_sink(sink)
    bus.publish(RunEvent(type="run.started", run_id="r-1"))
    assert bus.sink_errors == {}


def test_a_callable_sink_is_still_taken_and_fed() -> None:
    bus, sink = EventBus(), MemorySink()
    bus.add_sink(sink)
    bus.publish(RunEvent(type="run.started", run_id="r-1"))
    assert [e.type for e in sink.events] == ["run.started"]


@pytest.mark.parametrize("pred", [5, None, "run.completed"])
async def test_an_event_waiter_until_no_predicate_is_refused_not_waited_on(pred: Any) -> None:
    # with no event seen yet the wait was kept, and failed (a TypeError) only when an event
    # came: a test awaiting it with nothing more to come hung
    waiter = EventWaiter()
    with pytest.raises(ConfigurationError, match="until"):
        await waiter.until(pred)
    assert waiter._waiting == []


# ---------------------------------------------------------------------- a run cancelled unstarted


async def test_a_runtime_closed_right_after_a_start_ends_the_run_cancelled() -> None:
    # no await between start and close: the run's task was cancelled before its first step,
    # so none of its code ran, its end included; the run stayed 'running' and result() hung
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        gate = Gate("never opened")
        handle = await rt.start(Agent("a", gate.model("x")), "go")
    result = await handle.result()
    assert result.status is RunStatus.CANCELLED and result.error == "runtime closed"
    assert handle.info.status is RunStatus.CANCELLED
    ends = [
        e.type for e in recorder.events if e.run_id == handle.run_id and e.type != "run.started"
    ]
    assert ends == ["run.cancelled"]  # one terminal event, nothing else of a run never run


async def test_a_run_whose_task_is_cancelled_before_it_starts_ends_cancelled_saying_why() -> None:
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        parent = await rt.start(Agent("lead", Gate("lead").model("x")), "go")
        handle = await rt.start(Agent("a", ScriptedModel(["x"])), "go", parent=parent)
        assert handle.task is not None
        handle.task.cancel("stopped by its starter")
        result = await handle.result()
        assert result.status is RunStatus.CANCELLED
        assert result.error == "stopped by its starter"
        assert handle.done and rt.runs.get(handle.run_id) is not None
        child_ends = [
            e.type
            for e in recorder.events
            if e.type.startswith("subagent.") and getattr(e, "child_run_id", None) == handle.run_id
        ]
        assert child_ends == ["subagent.started", "subagent.completed"]  # the parent is told
        await parent.cancel()


class _State(TypedDict):
    x: int


async def test_a_graph_run_started_right_before_the_close_ends_cancelled_and_frees_its_thread() -> (
    None
):
    # as for an agent run: its task was cancelled before its first step, so the run stayed
    # 'running', result() hung, and the thread's lease stayed held (ThreadBusy for the next)
    gate = asyncio.Event()

    async def node(state: _State) -> dict[str, int]:
        await gate.wait()
        return {"x": 1}

    builder = StateGraph(_State)
    builder.add_node("a", node)
    builder.add_edge(START, "a")
    builder.add_edge("a", END)
    checkpointer = MemoryCheckpointer()
    graph = builder.compile(checkpointer=checkpointer)
    async with Runtime() as rt:
        handle = await rt.start_graph(graph, {"x": 0}, thread_id="t-1")
    result = await handle.result()
    assert result.status is RunStatus.CANCELLED
    await checkpointer.acquire("t-1", "the next writer")  # the lease was given back
    await checkpointer.release("t-1", "the next writer")
