"""Graph steering that must fail (or be refused) alone, and never hang or end the run.

Every command sent to a graph run is refused at submit with a reason, or reaches applied or
failed; a command the graph cannot apply changes nothing and the run goes on.
"""

from __future__ import annotations

import asyncio
import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from graphkit import logger
from pydantic import BaseModel

from tinyagents import Runtime
from tinyagents.errors import InvalidUpdateError
from tinyagents.graph import END, START, StateGraph, interrupt
from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.runs import RunStatus
from tinyagents.store.checkpoint import Checkpointer
from tinyagents.testkit import EventRecorder, EventWaiter

TEST = SteeringActor.test()
TERMINAL = {"steering.applied", "steering.failed", "steering.rejected", "steering.superseded"}
#: a hang guard, never a timing assertion: every step below settles at once
GUARD_S = 60


def command(
    target: Any, kind: SteeringKind, payload: dict[str, Any] | None = None, **kw: Any
) -> SteeringCommand:
    return SteeringCommand(target=target, actor=TEST, kind=kind, payload=payload or {}, **kw)


async def outcome(waiter: EventWaiter, cmd: SteeringCommand) -> Any:
    """The command's terminal event."""
    async with asyncio.timeout(GUARD_S):
        return await waiter.until(
            lambda e: (
                e.type in TERMINAL and getattr(e, "correlation_id", None) == cmd.correlation_id
            )
        )


def strict(current: int, update: Any) -> int:
    if not isinstance(update, int):
        raise TypeError(f"score takes an int, got {type(update).__name__}")
    return current + update


class Scores(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    score: Annotated[int, strict]
    mode: str


def ask(state: Any) -> dict[str, Any]:
    answer = interrupt("go on?")
    return {"log": [f"ask:{answer['approved']}"]}


def done(state: Any) -> dict[str, Any]:
    return {"log": ["done"]}


def mode_router(state: Any) -> str:
    return {"fast": "done", "slow": "ask"}[state["mode"]]  # a KeyError on any other mode


def asking_graph(cp: Checkpointer) -> Any:
    """START → ask (interrupts) → route → done (by ``mode``) → END; ``score``'s reducer
    rejects non-ints."""
    graph = StateGraph(Scores).add_node("ask", ask).add_node("done", done)
    graph.add_node("route", lambda s: {}).add_conditional_edges("route", mode_router)
    graph.add_edge(START, "ask").add_edge("ask", "route").add_edge("done", END)
    return graph.compile(checkpointer=cp)


async def waiting(rt: Runtime, waiter: EventWaiter, graph: Any, input: Any) -> Any:
    handle = await rt.start_graph(graph, input, thread_id="t")
    async with asyncio.timeout(GUARD_S):
        event = await waiter.event("graph.interrupt", handle.run_id, node="ask")
    return handle, event


async def approve_and_finish(rt: Runtime, handle: Any, task_id: str) -> Any:
    target = SteeringTarget.graph_task(handle.run_id, task_id)
    assert (await rt.submit(command(target, SteeringKind.APPROVE))).status == "accepted"
    async with asyncio.timeout(GUARD_S):
        return await handle.result()


# -- 20: a rejected update fails the command only --------------------------------------------


@pytest.mark.parametrize(
    ("update", "says"),
    [
        ({"log": ["half"], "score": "ten"}, "score takes an int"),  # the reducer raises
    ],
)
async def test_a_rejected_update_fails_the_command_and_changes_nothing(
    rt: Runtime,
    waiter: EventWaiter,
    recorder: EventRecorder,
    checkpointer: Checkpointer,
    update: dict[str, Any],
    says: str,
) -> None:
    graph = asking_graph(checkpointer)
    handle, asked = await waiting(rt, waiter, graph, {"log": ["seed"], "score": 1, "mode": "fast"})
    before = await graph.get_state("t")
    bad = command(
        SteeringTarget.agent_run(handle.run_id), SteeringKind.UPDATE_STATE, {"update": update}
    )
    assert (await rt.submit(bad)).status == "accepted"
    event = await outcome(waiter, bad)
    assert event.type == "steering.failed" and says in (event.reason or "")
    after = await graph.get_state("t")
    assert after.values == before.values and after.checkpoint_id == before.checkpoint_id
    assert not handle.done and handle.status is RunStatus.INTERRUPTED

    result = await approve_and_finish(rt, handle, asked.task_id)
    assert result.status is RunStatus.COMPLETED
    assert result.output == {"log": ["seed", "ask:True", "done"], "score": 1, "mode": "fast"}
    recorder.assert_every_command_terminal()


async def test_an_update_with_an_unknown_key_is_refused_at_submit_and_changes_nothing(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder, checkpointer: Checkpointer
) -> None:
    """Known wrong whatever the state (the schema has no such key): refused by the run's
    graph policy at submit; it used to be accepted, then fail at the next boundary."""
    graph = asking_graph(checkpointer)
    handle, asked = await waiting(rt, waiter, graph, {"log": ["seed"], "score": 1, "mode": "fast"})
    before = await graph.get_state("t")
    bad = command(
        SteeringTarget.agent_run(handle.run_id),
        SteeringKind.UPDATE_STATE,
        {"update": {"log": ["half"], "nope": 1}},
    )
    receipt = await rt.submit(bad)
    assert receipt.status == "rejected" and receipt.policy_id == "graph"
    assert "unknown state key" in (receipt.reason or "")
    after = await graph.get_state("t")
    assert after.values == before.values and after.checkpoint_id == before.checkpoint_id
    result = await approve_and_finish(rt, handle, asked.task_id)
    assert result.output == {"log": ["seed", "ask:True", "done"], "score": 1, "mode": "fast"}
    recorder.assert_every_command_terminal()


async def test_an_update_whose_as_node_routing_raises_fails_the_command_only(
    rt: Runtime, waiter: EventWaiter, checkpointer: Checkpointer
) -> None:
    graph = asking_graph(checkpointer)
    handle, asked = await waiting(rt, waiter, graph, {"log": ["seed"], "mode": "fast"})
    before = await graph.get_state("t")
    bad = command(
        SteeringTarget.agent_run(handle.run_id),
        SteeringKind.UPDATE_STATE,
        {"update": {"mode": "sideways"}, "as_node": "route"},
    )
    await rt.submit(bad)
    event = await outcome(waiter, bad)
    assert event.type == "steering.failed" and "sideways" in (event.reason or "")
    after = await graph.get_state("t")
    assert after.values == before.values and after.next == before.next
    result = await approve_and_finish(rt, handle, asked.task_id)
    assert result.output["log"] == ["seed", "ask:True", "done"] and result.output["mode"] == "fast"


class Counted(BaseModel):
    count: int = 0
    log: Annotated[list[str], operator.add] = []


async def test_an_update_that_fails_a_pydantic_state_is_refused_at_submit(
    rt: Runtime, waiter: EventWaiter, checkpointer: Checkpointer
) -> None:
    def ask_count(state: Counted) -> dict[str, Any]:
        interrupt("more?")
        return {"count": state.count + 1}

    graph = StateGraph(Counted).add_node("ask", ask_count)
    graph.add_edge(START, "ask").add_edge("ask", END)
    compiled = graph.compile(checkpointer=checkpointer)
    handle, asked = await waiting(rt, waiter, compiled, {"count": 1})
    bad = command(
        SteeringTarget.agent_run(handle.run_id),
        SteeringKind.UPDATE_STATE,
        {"update": {"log": ["half"], "count": "many"}},
    )
    receipt = await rt.submit(bad)  # the schema refuses it whatever the state: at submit
    assert receipt.status == "rejected" and receipt.policy_id == "graph"
    assert "'count'" in (receipt.reason or "")
    good = command(
        SteeringTarget.agent_run(handle.run_id),
        SteeringKind.UPDATE_STATE,
        {"update": {"count": "5"}},
    )
    await rt.submit(good)
    assert (await outcome(waiter, good)).type == "steering.applied"
    result = await approve_and_finish(rt, handle, asked.task_id)
    assert result.status is RunStatus.COMPLETED
    assert result.output == {"count": 6, "log": []}  # validated as run input is: "5" -> 5


# -- 24: a redirect that names no node, or an unknown one, is refused -------------------------


def targets_of(run_id: str) -> dict[str, Any]:
    return {
        "node": SteeringTarget.graph_node(run_id, "ask"),
        "run": SteeringTarget.agent_run(run_id),
        "thread": SteeringTarget.thread("t"),
    }


@pytest.mark.parametrize("where", ["node", "run", "thread"])
@pytest.mark.parametrize(
    ("payload", "says"),
    [
        # ({"goto": []} never gets this far: a command naming no node is refused when built)
        ({"goto": "ghost"}, "unknown node"),
        ({"goto": ["done", "ghost"]}, "unknown node"),
        ({"instruction": "do better"}, "needs 'goto'"),
    ],
)
async def test_a_redirect_to_nowhere_or_an_unknown_node_is_refused(
    rt: Runtime,
    waiter: EventWaiter,
    recorder: EventRecorder,
    checkpointer: Checkpointer,
    where: str,
    payload: dict[str, Any],
    says: str,
) -> None:
    graph = asking_graph(checkpointer)
    handle, asked = await waiting(rt, waiter, graph, {"log": ["seed"], "mode": "fast"})
    before = await graph.get_state("t")
    redirect = command(targets_of(handle.run_id)[where], SteeringKind.REDIRECT, payload)
    receipt = await rt.submit(redirect)
    assert receipt.status == "rejected" and says in (receipt.reason or "")
    after = await graph.get_state("t")
    assert after.checkpoint_id == before.checkpoint_id and after.next == ("ask",)
    assert not handle.done and handle.status is RunStatus.INTERRUPTED  # never a silent finish
    result = await approve_and_finish(rt, handle, asked.task_id)
    assert result.output["log"] == ["seed", "ask:True", "done"]
    recorder.assert_every_command_terminal()


async def test_a_redirect_to_end_finishes_the_run_and_says_so(
    rt: Runtime, waiter: EventWaiter, checkpointer: Checkpointer
) -> None:
    graph = asking_graph(checkpointer)
    handle, _ = await waiting(rt, waiter, graph, {"log": ["seed"], "mode": "fast"})
    redirect = command(
        SteeringTarget.agent_run(handle.run_id), SteeringKind.REDIRECT, {"goto": END}
    )
    assert (await rt.submit(redirect)).status == "accepted"
    event = await outcome(waiter, redirect)
    assert event.type == "steering.applied" and event.affected["goto"] == [END]
    async with asyncio.timeout(GUARD_S):
        result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["seed"]
    goto = await waiter.event("graph.goto", handle.run_id)
    assert goto.data["goto"] == [END]  # type: ignore[attr-defined]


# -- 21: every delivery class on a graph waiting on an interrupt ------------------------------

PAYLOADS: dict[SteeringKind, dict[str, Any]] = {
    SteeringKind.APPROVE: {"reason": "fine"},
    SteeringKind.PROVIDE_CONTEXT: {"value": {"approved": "ctx"}},
    SteeringKind.REDIRECT: {"goto": "done"},
    SteeringKind.UPDATE_STATE: {"update": {"log": ["steered"]}},
}
#: the log each applied command leaves once the run is finished
APPLIED_LOG = {
    SteeringKind.APPROVE: ["seed", "ask:True", "done"],
    SteeringKind.PROVIDE_CONTEXT: ["seed", "ask:ctx", "done"],
    SteeringKind.REDIRECT: ["seed", "done"],
    SteeringKind.UPDATE_STATE: ["seed", "steered", "ask:True", "done"],
}


@pytest.mark.parametrize("where", ["task", "node", "run"])
@pytest.mark.parametrize("kind", list(PAYLOADS))
@pytest.mark.parametrize("delivery", [d for d in SteeringDelivery if d.value != "immediate"])
async def test_every_delivery_class_is_delivered_or_refused_on_a_waiting_graph(
    rt: Runtime,
    waiter: EventWaiter,
    recorder: EventRecorder,
    checkpointer: Checkpointer,
    delivery: SteeringDelivery,
    kind: SteeringKind,
    where: str,
) -> None:
    graph = asking_graph(checkpointer)
    handle, asked = await waiting(rt, waiter, graph, {"log": ["seed"], "mode": "fast"})
    target = {
        "task": SteeringTarget.graph_task(handle.run_id, asked.task_id),
        **targets_of(handle.run_id),
    }[where]
    cmd = command(target, kind, PAYLOADS[kind], delivery=delivery)
    receipt = await rt.submit(cmd)
    graph_boundary = delivery in (SteeringDelivery.NEXT_BOUNDARY, SteeringDelivery.END_OF_TURN)
    if graph_boundary:
        assert receipt.status == "accepted", receipt.reason
        assert (await outcome(waiter, cmd)).type == "steering.applied"
    else:  # an agent-loop boundary, which a graph run never reaches
        assert receipt.status == "rejected" and delivery.value in (receipt.reason or "")
    if not graph_boundary or kind is SteeringKind.UPDATE_STATE:  # still waiting
        await approve_and_finish(rt, handle, asked.task_id)
    async with asyncio.timeout(GUARD_S):
        result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    expected = APPLIED_LOG[kind] if graph_boundary else APPLIED_LOG[SteeringKind.APPROVE]
    assert result.output["log"] == expected
    recorder.assert_every_command_terminal()


async def test_end_of_turn_redirect_gives_a_finishing_graph_another_turn(
    rt: Runtime, waiter: EventWaiter, checkpointer: Checkpointer
) -> None:
    gate = asyncio.Event()

    async def slow(state: Any) -> dict[str, Any]:
        await gate.wait()
        return {"log": ["slow"]}

    graph = StateGraph(Scores).add_node("slow", slow, destinations=["extra"])
    graph.add_node("extra", done).add_edge("extra", END)
    graph.add_edge(START, "slow").add_edge("slow", END)
    compiled = graph.compile(checkpointer=checkpointer)
    handle = await rt.start_graph(compiled, {"log": []}, thread_id="t")
    await waiter.event("graph.task_started", handle.run_id, node="slow")
    again = command(
        SteeringTarget.agent_run(handle.run_id),
        SteeringKind.REDIRECT,
        {"goto": "extra"},
        delivery=SteeringDelivery.END_OF_TURN,
    )
    assert (await rt.submit(again)).status == "accepted"
    gate.set()
    assert (await outcome(waiter, again)).type == "steering.applied"
    async with asyncio.timeout(GUARD_S):
        result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert result.output["log"] == ["slow", "done"]  # "extra" ran after the graph's end


async def test_an_end_of_turn_answer_handed_over_after_a_restart_is_applied(
    tmp_path: Path, checkpointer: Checkpointer
) -> None:
    """A durable runtime closing leaves the undelivered command open in its log; the next
    runtime's run of the thread, waiting on the same interrupt, must still take it. The
    operator's pause that held it comes back with the run (as an agent run's does): the
    answer is applied once a resume lets go of it, not before."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    graph = asking_graph(checkpointer)
    waiter = EventWaiter()
    async with Runtime(testing=True, store=store, sinks=[waiter]) as rt:
        handle, asked = await waiting(rt, waiter, graph, {"log": ["seed"], "mode": "fast"})
        pause = command(SteeringTarget.agent_run(handle.run_id), SteeringKind.PAUSE)
        await rt.submit(pause)  # held at a boundary: the approve below waits behind it
        await outcome(waiter, pause)
        approve = command(
            SteeringTarget.graph_task(handle.run_id, asked.task_id),
            SteeringKind.APPROVE,
            delivery=SteeringDelivery.END_OF_TURN,
        )
        assert (await rt.submit(approve)).status == "accepted"
    waiter, recorder = EventWaiter(), EventRecorder()
    async with Runtime(testing=True, store=store, sinks=[waiter, recorder]) as rt:
        again = await rt.start_graph(graph, None, thread_id="t")
        assert again.run_id == handle.run_id
        async with asyncio.timeout(GUARD_S):
            paused = await waiter.until(lambda e: e.type == "run.paused")
        assert paused.detail["restored"] is True
        assert not [e for e in recorder.events if e.type == "steering.applied"]
        resume = command(SteeringTarget.agent_run(handle.run_id), SteeringKind.RESUME)
        assert (await rt.submit(resume)).status == "accepted"
        assert (await outcome(waiter, approve)).type == "steering.applied"
        async with asyncio.timeout(GUARD_S):
            result = await again.result()
        assert result.output["log"] == ["seed", "ask:True", "done"]
    recorder.assert_every_command_terminal()


@pytest.mark.parametrize("tenant", ["acme", "globex"])
async def test_a_continued_graph_run_gets_back_only_its_own_tenants_pause(
    tmp_path: Path, checkpointer: Checkpointer, tenant: str
) -> None:
    """A graph run continued after a restart gets back the pause its log applied, only when
    the stored run is its tenant's (as ``Runtime.applied_commands`` does for an agent run):
    the thread continued by another tenant's start was not held by a pause sent to the
    first tenant's run (it was: only a human's pause of another tenant was left out, not a
    supervisor's, a parent agent's or a test's)."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    graph = asking_graph(checkpointer)
    waiter = EventWaiter()
    async with Runtime(testing=True, store=store, sinks=[waiter]) as rt:
        handle = await rt.start_graph(
            graph, {"log": ["seed"], "mode": "fast"}, thread_id="t", tenant_id="acme"
        )
        async with asyncio.timeout(GUARD_S):
            await waiter.event("graph.interrupt", handle.run_id, node="ask")
        pause = command(SteeringTarget.agent_run(handle.run_id), SteeringKind.PAUSE)
        await rt.submit(pause)
        assert (await outcome(waiter, pause)).type == "steering.applied"
    recorder = EventRecorder()
    async with Runtime(testing=True, store=store, sinks=[recorder]) as rt:
        again = await rt.start_graph(graph, None, thread_id="t", tenant_id=tenant)
        assert again.run_id == handle.run_id
        paused = [e for e in recorder.events if e.type == "run.paused"]
        if tenant == "acme":
            assert again.status == RunStatus.PAUSED
            assert [e.detail["restored"] for e in paused] == [True]
        else:
            assert again.status != RunStatus.PAUSED
            assert paused == []
        await again.cancel(actor=TEST)
        async with asyncio.timeout(GUARD_S):
            await again.result()


async def test_an_undeliverable_command_accepted_anyway_fails_at_the_next_boundary(
    rt: Runtime, waiter: EventWaiter, checkpointer: Checkpointer
) -> None:
    """What the graph's own policy refuses at submit, but was accepted anyway (say, by an
    older version, and handed over after a restart): failed at the run's boundary, not held."""
    graph = asking_graph(checkpointer)
    handle, asked = await waiting(rt, waiter, graph, {"log": ["seed"], "mode": "fast"})
    handle.policies = []  # as if accepted before the graph's policy existed
    cmd = command(
        SteeringTarget.agent_run(handle.run_id),
        SteeringKind.UPDATE_STATE,
        {"update": {"log": ["never"]}},
        delivery=SteeringDelivery.AFTER_TOOL_RESULT,
    )
    assert (await rt.submit(cmd)).status == "accepted"
    event = await outcome(waiter, cmd)
    assert event.type == "steering.failed" and "after_tool_result" in (event.reason or "")
    result = await approve_and_finish(rt, handle, asked.task_id)
    assert result.output["log"] == ["seed", "ask:True", "done"]


async def test_a_second_answer_to_an_answered_task_fails_or_is_refused(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder, checkpointer: Checkpointer
) -> None:
    graph = asking_graph(checkpointer)
    handle, asked = await waiting(rt, waiter, graph, {"log": ["seed"], "mode": "fast"})
    target = SteeringTarget.graph_task(handle.run_id, asked.task_id)
    first, second = command(target, SteeringKind.APPROVE), command(target, SteeringKind.REJECT)
    assert (await rt.submit(first)).status == "accepted"
    receipt = await rt.submit(second)  # the task may have been answered and run already
    assert (await outcome(waiter, first)).type == "steering.applied"
    if receipt.status == "accepted":
        event = await outcome(waiter, second)
        assert event.type == "steering.failed" and "no pending interrupt" in (event.reason or "")
    else:
        assert receipt.status == "rejected" and "not pending" in (receipt.reason or "")
    async with asyncio.timeout(GUARD_S):
        result = await handle.result()
    assert result.output["log"] == ["seed", "ask:True", "done"]
    recorder.assert_every_command_terminal()


# -- the same rules for graph.update_state ----------------------------------------------------


@pytest.mark.parametrize(
    ("update", "says"),
    [
        ({"log": ["half"], "score": "ten"}, r"the reducer of 'score' \(strict\) refused"),
        ({"log": ["half"], "mode": "slow", "nope": 1}, "unknown state key"),
    ],
)
async def test_graph_update_state_that_a_reducer_refuses_raises_and_changes_nothing(
    checkpointer: Checkpointer, update: dict[str, Any], says: str
) -> None:
    graph = asking_graph(checkpointer)
    await graph.run({"log": ["seed"], "score": 1, "mode": "fast"}, thread_id="t")
    before = await graph.get_state("t")
    with pytest.raises(InvalidUpdateError, match=says):
        await graph.update_state("t", update)
    after = await graph.get_state("t")
    assert after.values == before.values and after.checkpoint_id == before.checkpoint_id


async def test_graph_update_state_on_a_pydantic_state_is_validated(
    checkpointer: Checkpointer,
) -> None:
    graph = StateGraph(Counted).add_node("count", lambda s: {"count": s.count + 1})
    compiled = (
        graph.add_edge(START, "count").add_edge("count", END).compile(checkpointer=checkpointer)
    )
    await compiled.run({"count": 1}, thread_id="t")
    with pytest.raises(InvalidUpdateError, match="'count'"):
        await compiled.update_state("t", {"count": "many"})
    assert (await compiled.get_state("t")).values["count"] == 2
    await compiled.update_state("t", {"count": "7"})  # coerced as run input is
    assert (await compiled.get_state("t")).values["count"] == 7


# -- other ways a graph command could end in the wrong state ----------------------------------


async def test_an_immediate_run_cancel_that_stops_running_tasks_is_applied(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder, checkpointer: Checkpointer
) -> None:
    gate = asyncio.Event()

    async def hold(state: Any) -> dict[str, Any]:
        await gate.wait()
        return {"log": ["hold"]}

    graph = StateGraph(Scores).add_node("hold", hold).add_node("done", done)
    graph.add_edge(START, "hold").add_edge(START, "done")
    graph.add_edge("hold", END).add_edge("done", END)
    handle = await rt.start_graph(graph.compile(checkpointer=checkpointer), {}, thread_id="t")
    await waiter.event("graph.task_started", handle.run_id, node="hold")
    receipt = await handle.cancel("stop now", immediate=True)
    async with asyncio.timeout(GUARD_S):
        result = await handle.result()
    assert result.status is RunStatus.CANCELLED
    assert recorder.terminal_state(receipt.correlation_id) == "applied"
    recorder.assert_every_command_terminal()


async def test_an_immediate_cancel_of_a_task_that_already_finished_fails(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder, checkpointer: Checkpointer
) -> None:
    """The task finished while its step still ran: it is not cancelled, and the command does
    not claim it was (the task's writes and successors stand)."""
    gate = asyncio.Event()

    async def hold(state: Any) -> dict[str, Any]:
        await gate.wait()
        return {"log": ["hold"]}

    graph = StateGraph(Scores).add_node("hold", hold).add_node("quick", logger("quick"))
    graph.add_node("after", logger("after")).add_edge("quick", "after")
    graph.add_edge(START, "hold").add_edge(START, "quick")
    graph.add_edge("hold", END).add_edge("after", END)
    handle = await rt.start_graph(graph.compile(checkpointer=checkpointer), {}, thread_id="t")
    quick = await waiter.event("graph.task_completed", handle.run_id, node="quick")
    cancel = command(
        SteeringTarget.graph_task(handle.run_id, quick.task_id),
        SteeringKind.CANCEL,
        delivery=SteeringDelivery.IMMEDIATE,
    )
    receipt = await rt.submit(cancel)
    gate.set()
    async with asyncio.timeout(GUARD_S):
        result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert result.output["log"] == ["hold", "quick", "after"]
    if receipt.status == "accepted":
        event = await outcome(waiter, cancel)
        assert event.type == "steering.failed" and "already finished" in (event.reason or "")
    recorder.assert_every_command_terminal()


class Shared(TypedDict, total=False):
    items: list[int]
    answer: Any


async def test_values_steering_puts_into_the_state_are_the_nodes_to_change(
    rt: Runtime, waiter: EventWaiter, checkpointer: Checkpointer
) -> None:
    """A command's payload is read-only; the values an update or an answer hands to the graph
    are copies a node may change in place (they were the payload's own read-only lists, and
    the node failed the run with TypeError)."""

    def ask(state: Shared) -> Shared:
        return {"answer": interrupt("ok?")}

    def use(state: Shared) -> Shared:
        state["items"].append(99)
        state["answer"]["value"]["seen"].append("node")
        return {"items": state["items"], "answer": state["answer"]}

    graph = StateGraph(Shared).add_node("ask", ask).add_node("use", use)
    graph.add_edge(START, "ask").add_edge("ask", "use").add_edge("use", END)
    handle = await rt.start_graph(
        graph.compile(checkpointer=checkpointer), {"items": [1]}, thread_id="t"
    )
    async with asyncio.timeout(GUARD_S):
        await waiter.event("graph.interrupt", handle.run_id)
        run = SteeringTarget.agent_run(handle.run_id)
        update = command(run, SteeringKind.UPDATE_STATE, {"update": {"items": [5, 6]}})
        approve = command(run, SteeringKind.APPROVE, {"value": {"seen": ["operator"]}})
        assert (await rt.submit(update)).accepted
        assert (await rt.submit(approve)).accepted
        result = await handle.result()
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == {
        "items": [5, 6, 99],
        "answer": {"approved": True, "value": {"seen": ["operator", "node"]}},
    }
    assert update.payload == {"update": {"items": [5, 6]}}  # the command is unchanged
