"""The managed loop (``graph/managed.py``) and the one ``update_state`` it shares with the API.

Steering lowers ``update_state`` through the same function as ``CompiledGraph.update_state``,
so both accept the same ``as_node`` values (``START`` included), refuse the same ones, and
keep a static breakpoint's mark the same way. Between a step and a breakpoint stop there is
no steering boundary: a command sent meanwhile waits for the run that continues.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from graphkit import LogState, logger

from tinyagents import Agent, RunStatus, Runtime, SubAgent
from tinyagents.errors import ConfigurationError, GraphError, UnknownTargetError
from tinyagents.graph import END, START, AgentNode, Send, StateGraph, interrupt
from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import EventRecorder, EventWaiter, Gate, ScriptedModel, fake_agent


def update(run_id: str, payload: dict[str, Any]) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=SteeringActor.test(),
        kind=SteeringKind.UPDATE_STATE,
        payload=payload,
    )


def gated_chain(gate: asyncio.Event, **compile_kw: Any) -> Any:
    """START → a (waits for ``gate``) → b → END."""

    async def a(state: Any) -> dict[str, Any]:
        await gate.wait()
        return {"log": ["a"]}

    graph = StateGraph(LogState).add_node("a", a).add_node("b", logger("b"))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    return graph.compile(checkpointer=MemoryCheckpointer(), **compile_kw)


async def terminal(waiter: EventWaiter, correlation_id: str) -> Any:
    return await waiter.until(
        lambda e: (
            e.type in ("steering.applied", "steering.failed")
            and getattr(e, "correlation_id", None) == correlation_id
        )
    )


def graph_run_id(rt: Runtime, thread_id: str) -> str:
    [info] = [i for i in rt.runs.list() if i.kind == "graph" and i.thread_id == thread_id]
    return info.run_id


async def test_update_as_node_start_is_the_same_through_the_api_and_steering(
    rt: Runtime, waiter: EventWaiter
) -> None:
    # the API: stop after a, update as START, continue
    api_gate = asyncio.Event()
    api_gate.set()
    api = gated_chain(api_gate)
    stopped = await api.run({"log": ["seed"]}, thread_id="t", interrupt_after=["a"])
    assert stopped.status == "interrupted"
    await api.update_state("t", {"log": ["x"]}, as_node=START)
    assert (await api.get_state("t")).next == ("a",)
    by_api = await api.run(None, thread_id="t")

    # steering: the same update lands at the boundary after a
    gate = asyncio.Event()
    steered = gated_chain(gate)
    handle = await rt.start_graph(steered, {"log": ["seed"]}, thread_id="t")
    await waiter.event("graph.task_started", handle.run_id, node="a")
    cmd = update(handle.run_id, {"update": {"log": ["x"]}, "as_node": START})
    assert (await rt.submit(cmd)).status == "accepted"
    gate.set()
    result = await handle.result()
    assert (await terminal(waiter, cmd.correlation_id)).type == "steering.applied"

    assert by_api.state["log"] == result.output["log"] == ["seed", "a", "x", "a", "b"]


async def test_an_unknown_as_node_is_refused_alike_by_the_api_and_steering(
    rt: Runtime, waiter: EventWaiter
) -> None:
    gate = asyncio.Event()
    graph = gated_chain(gate)
    with pytest.raises(GraphError, match="no such node") as refused:
        await graph.update_state("other", {"log": ["x"]}, as_node="ghost")
    handle = await rt.start_graph(graph, {}, thread_id="t")
    await waiter.event("graph.task_started", handle.run_id, node="a")
    cmd = update(handle.run_id, {"update": {"log": ["x"]}, "as_node": "ghost"})
    receipt = await rt.submit(cmd)  # known wrong when sent: refused at submit
    assert receipt.status == "rejected" and receipt.reason == str(refused.value)
    gate.set()
    assert (await handle.result()).output["log"] == ["a", "b"]  # the run goes on unchanged


async def test_a_steering_update_at_a_breakpoint_keeps_its_mark_as_the_api_does(
    rt: Runtime, waiter: EventWaiter
) -> None:
    opened = asyncio.Event()
    opened.set()
    api = gated_chain(opened, interrupt_before=["b"])
    assert (await api.run({"log": ["seed"]}, thread_id="t")).status == "interrupted"
    await api.update_state("t", {"log": ["human"]})
    by_api = await api.run(None, thread_id="t")
    assert by_api.status == "completed"

    steered = gated_chain(opened, interrupt_before=["b"])
    first = await steered.run({"log": ["seed"]}, thread_id="t", runtime=rt)
    assert first.status == "interrupted" and first.interrupts == []  # at the breakpoint
    cmd = update(graph_run_id(rt, "t"), {"update": {"log": ["human"]}})
    assert (await rt.submit(cmd)).status == "accepted"  # waits for the run that continues
    second = await steered.run(None, thread_id="t", runtime=rt)
    assert (await terminal(waiter, cmd.correlation_id)).type == "steering.applied"
    assert second.status == "completed"  # the update kept the mark: the breakpoint passed
    assert second.state["log"] == by_api.state["log"] == ["seed", "a", "human", "b"]


async def test_no_boundary_between_a_step_and_its_breakpoint_stop(
    rt: Runtime, waiter: EventWaiter
) -> None:
    gate = asyncio.Event()
    graph = gated_chain(gate, interrupt_after=["a"])
    run = asyncio.create_task(graph.run({"log": ["seed"]}, thread_id="t", runtime=rt))
    started = await waiter.event("graph.task_started", node="a")
    cmd = update(started.run_id or "", {"update": {"log": ["human"]}})
    assert (await rt.submit(cmd)).status == "accepted"
    gate.set()
    first = await run
    assert first.status == "interrupted" and first.state["log"] == ["seed", "a"]
    applied = [e for e in waiter.events if e.type == "steering.applied"]
    assert not applied  # the stop came before any boundary: the command still waits
    second = await graph.run(None, thread_id="t", runtime=rt)  # its first boundary takes it
    assert (await terminal(waiter, cmd.correlation_id)).type == "steering.applied"
    assert second.state["log"] == ["seed", "a", "human", "b"]


async def test_a_stream_attached_to_a_running_run_gets_the_steps_from_then_on(
    rt: Runtime, waiter: EventWaiter
) -> None:
    gate = asyncio.Event()
    handle = await rt.start_graph(gated_chain(gate), {"log": ["seed"]}, thread_id="t")
    await waiter.event("graph.task_started", handle.run_id, node="a")  # the run is in a step
    stream = handle.stream("updates")
    gate.set()
    assert [item async for item in stream] == [{"a": {"log": ["a"]}}, {"b": {"log": ["b"]}}]


async def test_start_graph_refuses_what_is_not_a_compiled_graph() -> None:
    # a builder (compile() forgotten), an Agent or None raised AttributeError: '...' object
    # has no attribute 'checkpointer'
    builder = StateGraph(LogState).add_node("a", logger("a")).add_edge(START, "a")
    async with Runtime() as rt:
        agent = Agent("helper", model=ScriptedModel(["done"]))
        refused = ((builder, "StateGraph"), (None, "NoneType"), (agent, "Agent"))
        # a SubAgent has a start(input, runtime=...) of its own: it is still no graph
        for graph, name in (*refused, (SubAgent(agent), "SubAgent")):
            with pytest.raises(ConfigurationError, match=rf"takes a compiled graph, got {name}"):
                await rt.start_graph(graph, {"log": []}, thread_id="t-1")
        assert rt.runs.list() == []


async def test_a_compiled_graph_starts_itself_on_a_runtime_as_start_graph_does() -> None:
    graph = StateGraph(LogState).add_node("a", logger("a")).add_edge(START, "a")
    compiled = graph.compile(checkpointer=MemoryCheckpointer())
    async with Runtime() as rt:
        handle = await compiled.start({"log": ["seed"]}, runtime=rt, thread_id="t")
        assert handle.info.kind == "graph" and rt.runs.get(handle.run_id) is handle
        result = await handle.result()
        assert result.output == {"log": ["seed", "a"]}
        again = await rt.start_graph(compiled, None, thread_id="t")  # the same thread, continued
        assert (await again.result()).output == {"log": ["seed", "a"]}


async def test_start_graph_refuses_a_wait_on_interrupt_that_is_not_a_bool() -> None:
    # "no" was taken as true: the run waited on its interrupts for steering
    graph = StateGraph(LogState).add_node("a", logger("a")).add_edge(START, "a")
    compiled = graph.compile(checkpointer=MemoryCheckpointer())
    async with Runtime() as rt:
        for bad in ("no", 0, None):
            with pytest.raises(ConfigurationError, match=r"wait_on_interrupt=\.\.\.\) is True or"):
                await rt.start_graph(compiled, {"log": []}, thread_id="t", wait_on_interrupt=bad)  # type: ignore[arg-type]
        assert rt.runs.list() == []
        assert await compiled.history("t") == []


async def test_start_graph_refuses_a_parent_the_runtime_does_not_have() -> None:
    # taken: the graph ran as a root whose parent_run_id named no run (rt.start refuses one)
    graph = StateGraph(LogState).add_node("a", logger("a")).add_edge(START, "a").compile()
    async with Runtime() as rt:
        with pytest.raises(UnknownTargetError, match=r"parent run r-nope is not registered"):
            await rt.start_graph(graph, {"log": []}, thread_id="t-1", parent="r-nope")
        assert rt.runs.list() == []


async def test_start_graph_refuses_a_parent_that_has_ended() -> None:
    # taken: the graph ran below a run that had finished, with nothing waiting for it
    graph = StateGraph(LogState).add_node("a", logger("a")).add_edge(START, "a").compile()
    async with Runtime() as rt:
        parent = await rt.start(fake_agent("done", turns=1), "go")
        await parent.result()
        with pytest.raises(ConfigurationError, match=rf"parent run {parent.run_id} has ended"):
            await rt.start_graph(graph, {"log": []}, thread_id="t-1", parent=parent)
        assert [r.run_id for r in rt.runs.list()] == [parent.run_id]


class HeldCheckpointer(MemoryCheckpointer):
    """Taking a thread's lease waits at a gate: the awaits between a graph run's parent check
    and its registering, held open for as long as the test needs."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = Gate("acquire")

    async def acquire(self, thread_id: str, owner: str) -> None:
        await self.gate.wait()
        await super().acquire(thread_id, owner)


async def test_start_graph_refuses_a_parent_that_ends_while_the_run_starts() -> None:
    # taken: a parent that ended while the graph run read its thread (after the parent check,
    # before registering) got the graph run as a child all the same, nothing waiting for it
    checkpointer = HeldCheckpointer()
    graph = StateGraph(LogState).add_node("a", logger("a")).add_edge(START, "a")
    compiled = graph.compile(checkpointer=checkpointer)
    parent_gate = Gate("parent")
    async with Runtime() as rt:
        parent = await rt.start(Agent("lead", parent_gate.model("done")), "go")
        await parent_gate.entered.wait()
        start = asyncio.ensure_future(
            rt.start_graph(compiled, {"log": []}, thread_id="t-1", parent=parent)
        )
        await checkpointer.gate.entered.wait()  # past the parent check, not yet registered
        parent_gate.open()
        assert (await parent.result()).output == "done"
        checkpointer.gate.open()
        with pytest.raises(
            ConfigurationError, match=rf"parent run {parent.run_id} has ended \(completed\)"
        ):
            await start
        assert [r.run_id for r in rt.runs.list()] == [parent.run_id]
        assert await compiled.history("t-1") == []


# -- a run resting on interrupts, woken by what answers nothing ---------------------------------


def _asking(asked: list[int]) -> Any:
    """ask (asks ``ok?``, counting each time its node runs) → b."""

    def ask(state: Any) -> dict[str, Any]:
        asked.append(1)
        return {"log": [f"ask:{interrupt('ok?')['approved']}"]}

    built = StateGraph(LogState).add_node("ask", ask).add_node("b", logger("b"))
    built.add_edge(START, "ask").add_edge("ask", "b").add_edge("b", END)
    return built.compile(checkpointer=MemoryCheckpointer(), name="asks")


async def _until(check: Any) -> None:
    while not check():  # noqa: ASYNC110 (a run status, no event to wait on)
        await asyncio.sleep(0.01)


async def _rests_again(handle: Any) -> None:
    """Wait until the run rests on its interrupts again (its status, which no event says)."""
    await asyncio.wait_for(_until(lambda: handle.status is RunStatus.INTERRUPTED), 60)


def _still_asking(recorder: EventRecorder, asked: list[int]) -> None:
    """The run never went on from its question: not resumed, not run again, not asked anew."""
    assert [e.type for e in recorder.events if e.type == "graph.resumed"] == []
    assert asked == [1]
    assert len([e for e in recorder.events if e.type == "graph.interrupt"]) == 1


async def _answer_and_finish(
    rt: Runtime, recorder: EventRecorder, handle: Any, question: Any
) -> None:
    """The answer then lets it go on, once."""
    approve = SteeringCommand(
        target=SteeringTarget.agent_run(handle.run_id),
        actor=SteeringActor.test(),
        kind=SteeringKind.APPROVE,
        payload={"interrupt_id": question.data["interrupt_id"]},
    )
    assert (await rt.submit(approve)).status == "accepted"
    result = await asyncio.wait_for(handle.result(), 60)
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["ask:True", "b"]
    assert len([e for e in recorder.events if e.type == "graph.resumed"]) == 1
    assert len([e for e in recorder.events if e.type == "graph.interrupt"]) == 1
    recorder.assert_every_command_terminal()


async def test_a_status_request_to_a_run_resting_on_an_interrupt_leaves_it_resting(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    """A status request is answered, and the run waits for its answer still: a status request
    answers no question, so the run does not go on (no ``graph.resumed``, no step that runs
    the asking task again to ask anew)."""
    asked: list[int] = []
    handle = await rt.start_graph(_asking(asked), {}, thread_id="t")
    question = await waiter.event("graph.interrupt", run_id=handle.run_id)
    status = SteeringCommand(
        target=SteeringTarget.agent_run(handle.run_id),
        actor=SteeringActor.test(),
        kind=SteeringKind.REQUEST_STATUS,
    )
    assert (await rt.submit(status)).status == "accepted"
    said = await terminal(waiter, status.correlation_id)
    assert said.type == "steering.applied"
    assert said.affected["interrupts"] == [question.data["interrupt_id"]]
    assert said.affected["status"] == "interrupted"  # what it is, and stays: not "running"
    await _rests_again(handle)
    _still_asking(recorder, asked)
    await _answer_and_finish(rt, recorder, handle, question)


async def test_an_answer_that_fails_leaves_a_run_resting_on_its_interrupt(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    """An answer naming no pending question fails, and the run waits for its answer still.
    (Sent while the run rests, the graph policy refuses it at submit, below: this one was
    accepted anyway, as one handed over from an older process would be.)"""
    asked: list[int] = []
    handle = await rt.start_graph(_asking(asked), {}, thread_id="t")
    question = await waiter.event("graph.interrupt", run_id=handle.run_id)
    handle.policies = []  # as if accepted before the graph's policy existed
    wrong = SteeringCommand(
        target=SteeringTarget.agent_run(handle.run_id),
        actor=SteeringActor.test(),
        kind=SteeringKind.APPROVE,
        payload={"interrupt_id": "no-such-question"},
    )
    assert (await rt.submit(wrong)).status == "accepted"
    assert (await terminal(waiter, wrong.correlation_id)).type == "steering.failed"
    await _rests_again(handle)
    _still_asking(recorder, asked)
    await _answer_and_finish(rt, recorder, handle, question)


async def test_an_undeliverable_command_failed_at_rest_leaves_the_run_resting(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    """A command for an agent-loop boundary accepted anyway (say, handed over after a
    restart) is failed at the boundary it wakes the run to, and changes nothing there."""
    asked: list[int] = []
    handle = await rt.start_graph(_asking(asked), {}, thread_id="t")
    question = await waiter.event("graph.interrupt", run_id=handle.run_id)
    handle.policies = []  # as if accepted before the graph's policy existed
    stray = SteeringCommand(
        target=SteeringTarget.agent_run(handle.run_id),
        actor=SteeringActor.test(),
        kind=SteeringKind.UPDATE_STATE,
        payload={"update": {"log": ["never"]}},
        delivery=SteeringDelivery.AFTER_TOOL_RESULT,
    )
    assert (await rt.submit(stray)).status == "accepted"
    assert (await terminal(waiter, stray.correlation_id)).type == "steering.failed"
    await _rests_again(handle)
    _still_asking(recorder, asked)
    await _answer_and_finish(rt, recorder, handle, question)


# -- commands that answer nothing, sent to a run resting on interrupts ---------------------------


def _cmd(target: Any, kind: SteeringKind, payload: dict[str, Any] | None = None) -> SteeringCommand:
    return SteeringCommand(
        target=target, actor=SteeringActor.test(), kind=kind, payload=payload or {}
    )


async def _rests_asking(rt: Runtime, waiter: EventWaiter, handle: Any, question: Any) -> None:
    """The run rests on ``question`` alone: in the live listing and in a status report."""
    await _rests_again(handle)
    asked = question.data["interrupt_id"]
    (listed,) = rt.live_snapshots([handle.run_id])
    assert [i["id"] for i in listed["interrupts"]] == [asked]
    status = _cmd(SteeringTarget.agent_run(handle.run_id), SteeringKind.REQUEST_STATUS)
    assert (await rt.submit(status)).status == "accepted"
    said = await terminal(waiter, status.correlation_id)
    assert said.affected["status"] == "interrupted" and said.affected["interrupts"] == [asked]
    await _rests_again(handle)


@pytest.mark.parametrize("by", ["task", "node"])
async def test_a_resume_of_a_resting_task_or_node_is_refused_and_answers_nothing(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder, by: str
) -> None:
    """A resume of the task (or node) waiting on a question was applied as ``paused: False``
    and woke the run: ``graph.resumed``, a step that answered nothing, the same question
    announced again. A resume carries no answer, and a function node is never paused: it is
    refused at submit, the reason saying how to answer, and the run rests on."""
    rt.live_runs()
    asked: list[int] = []
    handle = await rt.start_graph(_asking(asked), {}, thread_id="t")
    question = await waiter.event("graph.interrupt", run_id=handle.run_id)
    target = (
        SteeringTarget.graph_task(handle.run_id, question.task_id)
        if by == "task"
        else SteeringTarget.graph_node(handle.run_id, "ask")
    )
    resume = _cmd(target, SteeringKind.RESUME)
    receipt = await rt.submit(resume)
    assert receipt.status == "rejected" and receipt.policy_id == "graph"
    reason = receipt.reason or ""
    assert "resume cannot reach node 'ask'" in reason
    assert "approve / reject / provide_context" in reason
    await _rests_asking(rt, waiter, handle, question)
    _still_asking(recorder, asked)
    await _answer_and_finish(rt, recorder, handle, question)


async def test_a_resume_of_an_agent_node_not_running_fails_and_the_run_rests_on(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    """An agent node takes a resume while its agent runs (for that agent's run); one that
    lands when the node is not running resumes nothing and fails with a reason, as a pause
    does: the run resting on another node's question is not woken."""
    rt.live_runs()
    asked: list[int] = []

    def ask(state: Any) -> dict[str, Any]:
        asked.append(1)
        return {"log": [f"ask:{interrupt('ok?')['approved']}"]}

    helper = AgentNode(fake_agent("helper"), input=lambda s: "go", output=lambda o, s: {})
    built = StateGraph(LogState).add_node("helper", helper).add_node("ask", ask)
    built.add_node("b", logger("b")).add_edge(START, "helper").add_edge("helper", "ask")
    graph = built.add_edge("ask", "b").add_edge("b", END).compile(checkpointer=MemoryCheckpointer())
    handle = await rt.start_graph(graph, {}, thread_id="t")
    question = await waiter.event("graph.interrupt", run_id=handle.run_id)
    await _rests_again(handle)
    resume = _cmd(SteeringTarget.graph_node(handle.run_id, "helper"), SteeringKind.RESUME)
    assert (await rt.submit(resume)).status == "accepted"
    failed = await terminal(waiter, resume.correlation_id)
    assert failed.type == "steering.failed"
    assert "node 'helper'" in (failed.reason or "") and "only while that node runs" in (
        failed.reason or ""
    )
    await _rests_asking(rt, waiter, handle, question)
    _still_asking(recorder, asked)
    await _answer_and_finish(rt, recorder, handle, question)


@pytest.mark.parametrize("kind", [SteeringKind.APPROVE, SteeringKind.PROVIDE_CONTEXT])
async def test_an_answer_to_a_node_that_asks_nothing_while_the_run_rests_is_refused(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder, kind: SteeringKind
) -> None:
    """While the run rests on its interrupts nothing runs until a command moves it on, so a
    node that asks nothing now asks nothing when the command lands: it was accepted and
    failed there. Refused at submit, the reason naming what the run waits on."""
    rt.live_runs()
    asked: list[int] = []
    handle = await rt.start_graph(_asking(asked), {}, thread_id="t")
    question = await waiter.event("graph.interrupt", run_id=handle.run_id)
    await _rests_again(handle)
    payload = {"value": "x"} if kind is SteeringKind.PROVIDE_CONTEXT else {}
    answer = _cmd(SteeringTarget.graph_node(handle.run_id, "b"), kind, payload)
    receipt = await rt.submit(answer)
    assert receipt.status == "rejected" and receipt.policy_id == "graph"
    reason = receipt.reason or ""
    assert f"node 'b' of graph run {handle.run_id} has no pending interrupt" in reason
    assert question.data["interrupt_id"] in reason and "'ask'" in reason
    await _rests_asking(rt, waiter, handle, question)
    _still_asking(recorder, asked)
    await _answer_and_finish(rt, recorder, handle, question)


@pytest.mark.parametrize(
    "kind", [SteeringKind.APPROVE, SteeringKind.REJECT, SteeringKind.PROVIDE_CONTEXT]
)
@pytest.mark.parametrize("to", ["run", "thread"])
async def test_an_answer_naming_an_interrupt_a_resting_run_has_not_is_refused_at_submit(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder, kind: SteeringKind, to: str
) -> None:
    """An answer to the run (or its thread) naming an interrupt it does not wait on was
    accepted, and failed only when it landed: the run's pending interrupts are known at
    submit while it rests, so the sender learns it there (``steering.rejected``, policy
    ``graph``, the pending ones listed), and the run rests on."""
    rt.live_runs()
    asked: list[int] = []
    handle = await rt.start_graph(_asking(asked), {}, thread_id="t")
    question = await waiter.event("graph.interrupt", run_id=handle.run_id)
    await _rests_again(handle)
    target = SteeringTarget.agent_run(handle.run_id) if to == "run" else SteeringTarget.thread("t")
    payload: dict[str, Any] = {"interrupt_id": "i-no-such-question"}
    if kind is SteeringKind.PROVIDE_CONTEXT:
        payload["value"] = "x"
    wrong = _cmd(target, kind, payload)
    receipt = await rt.submit(wrong)
    assert receipt.status == "rejected" and receipt.policy_id == "graph"
    reason = receipt.reason or ""
    assert "has no pending interrupt 'i-no-such-question'" in reason
    assert question.data["interrupt_id"] in reason
    assert [e.type for e in recorder.steering(wrong.correlation_id)] == [
        "steering.requested",
        "steering.rejected",
    ]
    await _rests_asking(rt, waiter, handle, question)
    _still_asking(recorder, asked)
    await _answer_and_finish(rt, recorder, handle, question)


def _two_asks() -> Any:
    """fan → two ``Send``s to ``ask`` (``x`` and ``y``), each asking "ok?"."""

    def ask(state: Any) -> dict[str, Any]:
        return {"log": [f"{state['log'][0]}:{interrupt('ok?')['approved']}"]}

    built = StateGraph(LogState).add_node("fan", lambda s: None).add_node("ask", ask)
    built.add_edge(START, "fan").add_edge("ask", END)
    built.add_conditional_edges("fan", lambda s: [Send("ask", {"log": [j]}) for j in "xy"])
    return built.compile(checkpointer=MemoryCheckpointer())


@pytest.mark.parametrize(
    "kind", [SteeringKind.APPROVE, SteeringKind.REJECT, SteeringKind.PROVIDE_CONTEXT]
)
@pytest.mark.parametrize("to", ["run", "thread", "node"])
async def test_an_answer_naming_no_interrupt_to_a_run_resting_on_several_is_refused_at_submit(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder, kind: SteeringKind, to: str
) -> None:
    """An answer without ``interrupt_id`` to a run (its thread, a node) resting on several
    questions was accepted, and failed when it landed ("has 2 pending interrupts"): it answers
    none of them (docs/graph.md: with several, name one). The run rests, so the sender learns
    it at submit (``steering.rejected``, policy ``graph``, the pending ones listed); the run
    rests on, and answers naming each question let it finish."""
    rt.live_runs()
    handle = await rt.start_graph(_two_asks(), {}, thread_id="t")
    one = await waiter.event("graph.interrupt", run_id=handle.run_id)
    two = await waiter.until(lambda e: e.type == "graph.interrupt" and e.task_id != one.task_id)
    await _rests_again(handle)
    target = {
        "run": SteeringTarget.agent_run(handle.run_id),
        "thread": SteeringTarget.thread("t"),
        "node": SteeringTarget.graph_node(handle.run_id, "ask"),
    }[to]
    payload = {"value": "x"} if kind is SteeringKind.PROVIDE_CONTEXT else {}
    vague = _cmd(target, kind, payload)
    receipt = await rt.submit(vague)
    assert receipt.status == "rejected" and receipt.policy_id == "graph"
    reason = receipt.reason or ""
    assert "has 2 pending interrupts" in reason and "name one with payload interrupt_id" in reason
    assert one.data["interrupt_id"] in reason and two.data["interrupt_id"] in reason
    assert [e.type for e in recorder.steering(vague.correlation_id)] == [
        "steering.requested",
        "steering.rejected",
    ]
    await _rests_again(handle)
    assert handle.status is RunStatus.INTERRUPTED
    assert [e for e in recorder.events if e.type == "graph.resumed"] == []
    for question in (one, two):
        named = _cmd(target, SteeringKind.APPROVE, {"interrupt_id": question.data["interrupt_id"]})
        assert (await rt.submit(named)).status == "accepted"
        await terminal(waiter, named.correlation_id)
    result = await asyncio.wait_for(handle.result(), 60)
    assert result.status is RunStatus.COMPLETED
    assert sorted(result.output["log"]) == ["x:True", "y:True"]
    recorder.assert_every_command_terminal()


async def test_an_answer_naming_no_interrupt_behind_one_naming_the_other_is_taken(
    rt: Runtime, recorder: EventRecorder
) -> None:
    """A run-level answer naming no interrupt is judged against what is pending when it
    lands: behind a waiting answer to one of two questions it answers the other, so it is
    not refused at submit (a foreground run at rest keeps both in its inbox until the next
    run of its thread)."""
    graph = _two_asks()
    stopped = await graph.run({}, thread_id="t", runtime=rt)
    assert stopped.status == "interrupted" and len(stopped.interrupts) == 2
    first, second = stopped.interrupts
    run_id = graph_run_id(rt, "t")
    run = SteeringTarget.agent_run(run_id)
    named = _cmd(run, SteeringKind.APPROVE, {"interrupt_id": first.id})
    assert (await rt.submit(named)).status == "accepted"
    vague = _cmd(run, SteeringKind.REJECT)
    receipt = await rt.submit(vague)
    assert receipt.status == "accepted", receipt.reason
    result = await graph.run(None, thread_id="t", runtime=rt)
    assert result.status == "completed"
    # one question approved by its id, the other rejected by the answer naming none
    assert sorted(result.state["log"]) in (["x:True", "y:False"], ["x:False", "y:True"])
    [applied] = [e for e in recorder.steering(vague.correlation_id) if e.type == "steering.applied"]
    assert applied.affected["interrupt_id"] == second.id
    recorder.assert_every_command_terminal()


async def test_an_answer_naming_an_interrupt_a_running_run_has_not_asked_yet_is_taken(
    rt: Runtime, waiter: EventWaiter
) -> None:
    """While a task runs, the question a run-level answer names may still come: it is
    accepted, and judged when it lands (here: never asked, so it fails)."""
    gate = asyncio.Event()

    async def ask(state: Any) -> dict[str, Any]:
        await gate.wait()
        return {"log": [str(interrupt("ok?")["approved"])]}

    graph = StateGraph(LogState).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    handle = await rt.start_graph(graph.compile(checkpointer=MemoryCheckpointer()), {})
    await waiter.event("graph.task_started", handle.run_id)
    approve = _cmd(
        SteeringTarget.agent_run(handle.run_id),
        SteeringKind.APPROVE,
        {"interrupt_id": "i-not-asked-yet"},
    )
    assert (await rt.submit(approve)).status == "accepted"
    gate.set()
    assert (await terminal(waiter, approve.correlation_id)).type == "steering.failed"
    await handle.cancel()
    await handle.result()
