"""Graph-level steering through the Runtime: the lowering table of DESIGN.md."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, TypedDict

import pytest
from graphkit import LogState, logger

from tinyagents import Agent, Runtime, tool
from tinyagents.errors import ThreadBusy
from tinyagents.graph import (
    END,
    START,
    AgentNode,
    Command,
    NodeContext,
    Send,
    StateGraph,
    interrupt,
)
from tinyagents.graph.recovery import applied_by_steering
from tinyagents.harness import ModelRequest
from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringPriority,
    SteeringTarget,
)
from tinyagents.runs import RunStatus
from tinyagents.store.checkpoint import Checkpointer, MemoryCheckpointer, SqliteCheckpointer
from tinyagents.testkit import (
    EventRecorder,
    EventWaiter,
    FunctionModel,
    Gate,
    ScriptedModel,
    tool_call,
)

TEST = SteeringActor.test()


def command(
    target: Any, kind: SteeringKind, payload: dict[str, Any] | None = None, **kw: Any
) -> SteeringCommand:
    return SteeringCommand(target=target, actor=TEST, kind=kind, payload=payload or {}, **kw)


async def settled(waiter: EventWaiter, correlation_id: str) -> str:
    """Wait for the command's terminal event; return its type."""
    terminal = {"steering.applied", "steering.failed", "steering.rejected", "steering.superseded"}
    event = await waiter.until(
        lambda e: e.type in terminal and getattr(e, "correlation_id", None) == correlation_id
    )
    return event.type


def asker(name: str) -> Any:
    def node(state: Any) -> dict[str, Any]:
        answer = interrupt(f"approve {name}?")
        return {"log": [f"{name}:{answer['approved']}"]}

    node.__name__ = name
    return node


def two_questions(cp: Checkpointer, *, policy: str = "skip") -> Any:
    graph = StateGraph(LogState).add_node("left", asker("left")).add_node("right", asker("right"))
    graph.add_node("after_left", logger("after_left")).add_edge("left", "after_left")
    graph.add_edge(START, "left").add_edge(START, "right")
    graph.add_edge("after_left", END).add_edge("right", END)
    return graph.compile(checkpointer=cp, task_cancel_policy=policy)


async def both_paused(waiter: EventWaiter, run_id: str) -> dict[str, Any]:
    """The graph.interrupt events of the left and right tasks, by node."""
    left = await waiter.event("graph.interrupt", run_id, node="left")
    right = await waiter.event("graph.interrupt", run_id, node="right")
    return {"left": left, "right": right}


async def test_approving_one_parallel_task_leaves_the_other_pending(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    graph = two_questions(MemoryCheckpointer())
    handle = await rt.start_graph(graph, {}, thread_id="t")
    paused = await both_paused(waiter, handle.run_id)
    assert handle.status is RunStatus.INTERRUPTED

    approve = command(
        SteeringTarget.graph_task(handle.run_id, paused["left"].task_id), SteeringKind.APPROVE
    )
    assert (await rt.submit(approve)).status == "accepted"
    assert await settled(waiter, approve.correlation_id) == "steering.applied"
    applied = recorder.steering(approve.correlation_id)[-1]
    assert applied.affected["interrupt_id"] == paused["left"].data["interrupt_id"]
    # paused again, on right alone
    await waiter.until(
        lambda e: e.type == "graph.interrupt" and e.offset > applied.offset and e.node == "right"
    )

    state = await graph.get_state("t")
    assert [i.node for i in state.interrupts] == ["right"]  # the other one stays pending
    assert handle.status is RunStatus.INTERRUPTED and not handle.done

    reject = command(
        SteeringTarget.graph_task(handle.run_id, paused["right"].task_id),
        SteeringKind.REJECT,
        {"reason": "not now"},
    )
    await rt.submit(reject)
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert result.output["log"] == ["left:True", "right:False", "after_left"]
    recorder.assert_every_command_terminal()


async def test_resume_value_carries_value_and_reason(rt: Runtime, waiter: EventWaiter) -> None:
    answers: list[Any] = []

    def ask(state: Any) -> dict[str, Any]:
        answers.append(interrupt("?"))
        return {}

    graph = StateGraph(LogState).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    handle = await rt.start_graph(graph.compile(checkpointer=MemoryCheckpointer()), {})
    event = await waiter.event("graph.interrupt", handle.run_id)
    target = SteeringTarget.graph_task(handle.run_id, event.task_id)
    await rt.submit(command(target, SteeringKind.REJECT, {"value": 3, "reason": "too big"}))
    await handle.result()
    assert answers == [{"approved": False, "value": 3, "reason": "too big"}]


async def test_a_task_command_for_an_unknown_task_is_rejected(
    rt: Runtime, waiter: EventWaiter
) -> None:
    handle = await rt.start_graph(two_questions(MemoryCheckpointer()), {})
    await both_paused(waiter, handle.run_id)
    receipt = await rt.submit(
        command(SteeringTarget.graph_task(handle.run_id, "t-nope"), SteeringKind.APPROVE)
    )
    assert receipt.status == "rejected" and "not pending" in (receipt.reason or "")
    receipt = await rt.submit(
        command(SteeringTarget.graph_node(handle.run_id, "ghost"), SteeringKind.APPROVE)
    )
    assert receipt.status == "rejected" and "no node 'ghost'" in (receipt.reason or "")
    await rt.submit(command(SteeringTarget.agent_run(handle.run_id), SteeringKind.CANCEL))
    assert (await handle.result()).status is RunStatus.CANCELLED


def gated_chain(gate: asyncio.Event, cp: Checkpointer | None = None) -> Any:
    async def a(state: Any) -> dict[str, Any]:
        await gate.wait()
        return {"log": ["a"]}

    graph = StateGraph(LogState).add_node("a", a, destinations=["c"])
    graph.add_node("b", logger("b")).add_node("c", logger("c"))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)
    return graph.compile(checkpointer=cp or MemoryCheckpointer())


async def test_redirect_through_steering_changes_the_next_superstep(
    rt: Runtime, waiter: EventWaiter
) -> None:
    gate = asyncio.Event()
    graph = gated_chain(gate)
    handle = await rt.start_graph(graph, {}, thread_id="t")
    await waiter.event("graph.task_started", handle.run_id, node="a")
    redirect = command(
        SteeringTarget.graph_node(handle.run_id, "b"), SteeringKind.REDIRECT, {"goto": "c"}
    )
    assert (await rt.submit(redirect)).status == "accepted"
    gate.set()
    result = await handle.result()
    assert result.output["log"] == ["a", "c"]  # b never ran
    event = next(e for e in rt.steering_history(handle.run_id) if e.type == "steering.applied")
    assert event.affected["goto"] == ["c"]
    history = await graph.history("t")
    assert "steering" in [h.source for h in history]
    goto = await waiter.event("graph.goto", handle.run_id)
    assert goto.data == {"goto": ["c"], "correlation_id": redirect.correlation_id}  # type: ignore[attr-defined]
    assert goto.checkpoint_id == event.affected["checkpoint_id"]  # type: ignore[attr-defined]


async def test_update_state_through_steering_uses_the_reducers(
    rt: Runtime, waiter: EventWaiter
) -> None:
    gate = asyncio.Event()
    graph = gated_chain(gate)
    handle = await rt.start_graph(graph, {"log": ["seed"]}, thread_id="t")
    await waiter.event("graph.task_started", handle.run_id, node="a")
    update = command(
        SteeringTarget.agent_run(handle.run_id),
        SteeringKind.UPDATE_STATE,
        {"update": {"log": ["human"]}},
    )
    await rt.submit(update)
    gate.set()
    result = await handle.result()
    assert result.output["log"] == ["seed", "a", "human", "b", "c"]  # appended, not replaced
    sources = [h.source for h in await graph.history("t")]
    assert "update" in sources  # its own checkpoint
    updated = await waiter.event("graph.state_updated", handle.run_id)
    assert updated.data == {"keys": ["log"], "correlation_id": update.correlation_id}  # type: ignore[attr-defined]
    bad = command(
        SteeringTarget.agent_run(handle.run_id), SteeringKind.UPDATE_STATE, {"update": {"zzz": 1}}
    )
    assert (await rt.submit(bad)).status == "rejected"


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"update": {"zzz": 1}}, "unknown state key"),
        ({"update": {"log": ["x"]}, "as_node": "ghost"}, "as_node='ghost'): no such node"),
    ],
)
async def test_an_update_the_graph_can_never_take_is_refused_at_submit(
    rt: Runtime, waiter: EventWaiter, payload: dict[str, Any], says: str
) -> None:
    """A key the state does not have, or an ``as_node`` the graph does not have, is known
    wrong when the command is sent: it was accepted, then failed at the next boundary."""
    gate = asyncio.Event()
    graph = gated_chain(gate)
    handle = await rt.start_graph(graph, {}, thread_id="t")
    await waiter.event("graph.task_started", handle.run_id, node="a")
    for target in (SteeringTarget.agent_run(handle.run_id), SteeringTarget.thread("t")):
        receipt = await rt.submit(command(target, SteeringKind.UPDATE_STATE, payload))
        assert receipt.status == "rejected" and receipt.policy_id == "graph"
        assert says in (receipt.reason or "")
    gate.set()
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["a", "b", "c"]


def ask_after_prep(cp: Checkpointer) -> Any:
    graph = StateGraph(LogState).add_node("prep", logger("prep")).add_node("ask", asker("ask"))
    graph.add_edge(START, "prep").add_edge("prep", "ask").add_edge("ask", END)
    return graph.compile(checkpointer=cp)


async def test_a_checkpoint_id_is_judged_when_the_command_is_accepted(
    rt: Runtime, waiter: EventWaiter, tmp_path: Any
) -> None:
    """Staleness is a policy, judged at submit (DESIGN.md, docs/graph.md): a command that
    names the latest checkpoint while a step runs is accepted, and lands at the boundary after
    that step, whose checkpoint is newer. (Judged again at delivery, every command pinned
    while a step ran would fail.)"""
    gate = asyncio.Event()
    async with SqliteCheckpointer(tmp_path / "cp.db") as cp:
        graph = gated_chain(gate, cp)
        handle = await rt.start_graph(graph, {}, thread_id="t")
        await waiter.event("graph.task_started", handle.run_id, node="a")
        latest = (await graph.get_state("t")).checkpoint_id
        update = command(
            SteeringTarget.agent_run(handle.run_id),
            SteeringKind.UPDATE_STATE,
            {"update": {"log": ["pinned"]}},
            checkpoint_id=latest,
        )
        assert (await rt.submit(update)).status == "accepted"
        gate.set()
        assert await settled(waiter, update.correlation_id) == "steering.applied"
        assert (await handle.result()).output["log"] == ["a", "pinned", "b", "c"]


async def test_stale_checkpoint_is_rejected_and_the_fork_variant_applied(
    rt: Runtime, waiter: EventWaiter
) -> None:
    graph = ask_after_prep(MemoryCheckpointer())
    handle = await rt.start_graph(graph, {}, thread_id="t")
    paused = await waiter.event("graph.interrupt", handle.run_id)
    stale = paused.checkpoint_id
    update = command(
        SteeringTarget.agent_run(handle.run_id), SteeringKind.UPDATE_STATE, {"update": {"x": 1}}
    )
    await rt.submit(update)
    assert await settled(waiter, update.correlation_id) == "steering.applied"
    latest = (await graph.get_state("t")).checkpoint_id
    assert latest != stale

    target = SteeringTarget.graph_task(handle.run_id, paused.task_id)
    old = command(target, SteeringKind.APPROVE, checkpoint_id=stale)
    receipt = await rt.submit(old)
    assert receipt.status == "rejected" and receipt.policy_id == "staleness"

    forked = command(target, SteeringKind.APPROVE, checkpoint_id=stale, fork=True)
    assert (await rt.submit(forked)).status == "accepted"
    assert await settled(waiter, forked.correlation_id) == "steering.applied"
    applied = next(
        e
        for e in rt.steering_history(handle.run_id)
        if e.type == "steering.applied" and e.correlation_id == forked.correlation_id
    )
    fork_handle = rt.runs.get(applied.affected["fork_run_id"])
    assert fork_handle is not None
    fork_result = await fork_handle.result()
    assert fork_result.output == {"log": ["prep", "ask:True"]}  # the state at the old checkpoint
    original = await graph.get_state("t")
    assert original.values == {"log": ["prep"], "x": 1} and len(original.interrupts) == 1
    await rt.submit(command(SteeringTarget.agent_run(handle.run_id), SteeringKind.CANCEL))
    assert (await handle.result()).status is RunStatus.CANCELLED


def ask_then_loop(cp: Checkpointer, laps: int) -> Any:
    """``ask`` asks for approval, then ``lap`` runs ``laps`` steps, one lap each."""

    def ask(state: Any) -> dict[str, Any]:
        interrupt("go?")
        return {"x": 0}

    def lap(state: Any) -> dict[str, Any]:
        return {"x": state["x"] + 1}

    graph = StateGraph(LogState).add_node("ask", ask).add_node("lap", lap)
    graph.add_edge(START, "ask").add_edge("ask", "lap")
    graph.add_conditional_edges("lap", lambda s: END if s["x"] >= laps else "lap", ["lap", END])
    return graph.compile(checkpointer=cp)


async def test_the_run_on_a_fork_keeps_the_runs_recursion_limit(
    rt: Runtime, waiter: EventWaiter
) -> None:
    """A fork's run was started with the graph's own limit (25 here): the run's
    ``recursion_limit`` was dropped, and a fork ran steps the run it was forked from could
    not. It keeps it now, as it keeps ``max_concurrency``: 10 laps are over a limit of 4."""
    graph = ask_then_loop(MemoryCheckpointer(), laps=10)
    handle = await rt.start_graph(graph, {}, thread_id="t", recursion_limit=4)
    paused = await waiter.event("graph.interrupt", handle.run_id)
    target = SteeringTarget.graph_task(handle.run_id, paused.task_id)
    forked = command(target, SteeringKind.APPROVE, checkpoint_id=paused.checkpoint_id, fork=True)
    assert (await rt.submit(forked)).status == "accepted"
    assert await settled(waiter, forked.correlation_id) == "steering.applied"
    applied = next(
        e
        for e in rt.steering_history(handle.run_id)
        if e.type == "steering.applied" and e.correlation_id == forked.correlation_id
    )
    fork_handle = rt.runs.get(applied.affected["fork_run_id"])
    assert fork_handle is not None
    fork_result = await fork_handle.result()
    assert fork_result.status is RunStatus.FAILED
    assert "Recursion limit of 4 reached" in (fork_result.error or "")
    await handle.cancel()
    await handle.result()


@pytest.mark.parametrize(
    ("kind", "payload", "reason"),
    [
        (SteeringKind.APPROVE, {}, "2 matching interrupts"),
    ],
)
async def test_a_fork_command_that_fails_leaves_no_fork_thread(
    rt: Runtime,
    waiter: EventWaiter,
    recorder: EventRecorder,
    tmp_path: Any,
    kind: SteeringKind,
    payload: dict[str, Any],
    reason: str,
) -> None:
    """The fork was made before the command was tried on it: a command that then failed left
    a thread ``t~<id>`` nobody had asked for, which a retry (a new id) never reused."""
    async with SqliteCheckpointer(tmp_path / "cp.db") as cp:
        graph = two_questions(cp)
        handle = await rt.start_graph(graph, {}, thread_id="t")
        stale = (await both_paused(waiter, handle.run_id))["right"].checkpoint_id
        moved_on = command(
            SteeringTarget.agent_run(handle.run_id),
            SteeringKind.UPDATE_STATE,
            {"update": {"log": ["moved"]}},
        )
        await rt.submit(moved_on)
        assert await settled(waiter, moved_on.correlation_id) == "steering.applied"
        forked = command(
            SteeringTarget.agent_run(handle.run_id),
            kind,
            payload,
            checkpoint_id=stale,
            fork=True,
        )
        assert (await rt.submit(forked)).accepted
        assert await settled(waiter, forked.correlation_id) == "steering.failed"
        assert reason in (recorder.steering(forked.correlation_id)[-1].reason or "")
        assert await cp.latest(f"t~{forked.correlation_id}") is None
        assert await cp.list(f"t~{forked.correlation_id}") == []
        await handle.cancel()
        await handle.result()


class TakenBeforeCleanup(SqliteCheckpointer):
    """Another process (a second checkpointer on the same file) takes the fork's thread just
    before this one deletes it: the race of a command handed over again elsewhere."""

    def __init__(self, path: Any) -> None:
        super().__init__(path)
        self.other = SqliteCheckpointer(path)
        self.taken: list[str] = []

    async def delete_thread(self, thread_id: str) -> None:
        await self.other.acquire(thread_id, "another process")
        self.taken.append(thread_id)
        await super().delete_thread(thread_id)

    async def aclose(self) -> None:
        await self.other.aclose()
        await super().aclose()


async def test_a_fork_another_process_took_before_its_cleanup_keeps_the_commands_own_error(
    rt: Runtime,
    waiter: EventWaiter,
    recorder: EventRecorder,
    tmp_path: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The command failed on its fork, and deleting the fork was ``ThreadBusy`` (another
    process took it meanwhile): that ``ThreadBusy``, raised over the command's own error,
    was what the sender was told ("already has a running writer"). The command's error is
    the one told; the fork left behind is logged and noted on it."""
    async with TakenBeforeCleanup(tmp_path / "cp.db") as cp:
        graph = two_questions(cp)
        handle = await rt.start_graph(graph, {}, thread_id="t")
        stale = (await both_paused(waiter, handle.run_id))["right"].checkpoint_id
        moved_on = command(
            SteeringTarget.agent_run(handle.run_id),
            SteeringKind.UPDATE_STATE,
            {"update": {"log": ["moved"]}},
        )
        await rt.submit(moved_on)
        assert await settled(waiter, moved_on.correlation_id) == "steering.applied"
        forked = command(
            SteeringTarget.agent_run(handle.run_id),
            SteeringKind.APPROVE,
            {},
            checkpoint_id=stale,
            fork=True,
        )
        with caplog.at_level(logging.WARNING, logger="tinyagents.graph"):
            assert (await rt.submit(forked)).accepted
            assert await settled(waiter, forked.correlation_id) == "steering.failed"
        fork = f"t~{forked.correlation_id}"
        assert cp.taken == [fork]  # the race happened
        reason = recorder.steering(forked.correlation_id)[-1].reason or ""
        assert "2 matching interrupts" in reason and "running writer" not in reason
        assert await cp.latest(fork) is not None  # the other process's, not deleted
        assert any(
            fork in r.getMessage() and "ThreadBusy" in r.getMessage() for r in caplog.records
        )
        await handle.cancel()
        await handle.result()


@pytest.mark.parametrize("fork", [False, True])
async def test_a_checkpoint_the_thread_does_not_have_is_rejected_as_unknown(
    rt: Runtime, waiter: EventWaiter, fork: bool
) -> None:
    """A checkpoint id of another thread (or of none) was taken for a fork, accepted, and
    failed once applied ("thread 't' has no checkpoint ..."); without fork it was called
    stale and the reason told the sender to set fork=True, which then failed."""
    cp = MemoryCheckpointer()
    graph = two_questions(cp)
    other = await graph.run({}, thread_id="other")
    handle = await rt.start_graph(graph, {}, thread_id="t")
    await both_paused(waiter, handle.run_id)
    for foreign in (other.checkpoint_id, "ck-nope"):
        assert foreign is not None
        cmd = command(
            SteeringTarget.agent_run(handle.run_id),
            SteeringKind.APPROVE,
            {"interrupt_id": "x"},
            checkpoint_id=foreign,
            fork=fork,
        )
        receipt = await rt.submit(cmd)
        assert receipt.status == "rejected" and receipt.policy_id == "staleness"
        assert receipt.reason == (
            f"unknown checkpoint {foreign}: thread 't' has no such checkpoint"
        )
        assert await cp.latest(f"t~{cmd.correlation_id}") is None
    assert handle.status is RunStatus.INTERRUPTED
    await handle.cancel()
    await handle.result()


@pytest.mark.parametrize(
    ("kind", "payload"),
    [(SteeringKind.CANCEL, {}), (SteeringKind.PAUSE, {}), (SteeringKind.REQUEST_STATUS, {})],
)
async def test_a_fork_of_a_kind_no_fork_takes_is_refused_at_submit(
    rt: Runtime, waiter: EventWaiter, kind: SteeringKind, payload: dict[str, Any]
) -> None:
    """Only answers, redirects and updates can be applied on a fork: the others were accepted,
    then failed ("cannot be applied on a fork") — or, for a pause, paused the run itself."""
    graph = two_questions(MemoryCheckpointer())
    handle = await rt.start_graph(graph, {}, thread_id="t")
    stale = (await both_paused(waiter, handle.run_id))["right"].checkpoint_id
    forked = command(
        SteeringTarget.agent_run(handle.run_id), kind, payload, checkpoint_id=stale, fork=True
    )
    receipt = await rt.submit(forked)
    assert receipt.status == "rejected" and receipt.policy_id == "graph"
    assert f"{kind.value} cannot be applied on a fork" in (receipt.reason or "")
    assert await graph.checkpointer.latest(f"t~{forked.correlation_id}") is None
    assert handle.status is RunStatus.INTERRUPTED
    await handle.cancel()
    await handle.result()


async def test_cancel_a_paused_task_skips_it(rt: Runtime, waiter: EventWaiter) -> None:
    graph = two_questions(MemoryCheckpointer(), policy="skip")
    handle = await rt.start_graph(graph, {}, thread_id="t")
    paused = await both_paused(waiter, handle.run_id)
    cancel = command(
        SteeringTarget.graph_task(handle.run_id, paused["left"].task_id), SteeringKind.CANCEL
    )
    await rt.submit(cancel)
    assert await settled(waiter, cancel.correlation_id) == "steering.applied"
    approve = command(
        SteeringTarget.graph_task(handle.run_id, paused["right"].task_id), SteeringKind.APPROVE
    )
    await rt.submit(approve)
    result = await handle.result()
    # left was skipped: no write and its successor never ran; right finished normally
    assert result.output["log"] == ["right:True"]
    tree = rt.tree(handle.run_id)
    assert tree is not None  # the skipped task's entry ends too (it never resumed)
    assert sorted((c.info.node_id, c.info.status) for c in tree.children) == [
        ("left", RunStatus.CANCELLED),
        ("right", RunStatus.COMPLETED),
    ]


@pytest.mark.parametrize("by", ["task", "node"])
async def test_a_second_cancel_of_a_skipped_task_fails(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder, tmp_path: Any, by: str
) -> None:
    """What a second cancel of a skipped task is answered before a restart; after one it is
    answered the same (``test_graph_crash.py::test_a_task_cancel_saved_just_before_a_sigkill_
    is_reported_applied``), not taken for the cancel that skipped it."""
    async with SqliteCheckpointer(tmp_path / "cp.db") as cp:
        graph = two_questions(cp, policy="skip")
        handle = await rt.start_graph(graph, {}, thread_id="t")
        paused = await both_paused(waiter, handle.run_id)
        target = (
            SteeringTarget.graph_task(handle.run_id, paused["right"].task_id)
            if by == "task"
            else SteeringTarget.graph_node(handle.run_id, "right")
        )
        first, again = command(target, SteeringKind.CANCEL), command(target, SteeringKind.CANCEL)
        await rt.submit(first)
        assert await settled(waiter, first.correlation_id) == "steering.applied"
        await rt.submit(again)
        assert await settled(waiter, again.correlation_id) == "steering.failed"
        assert recorder.steering(again.correlation_id)[-1].reason == (
            f"{target.describe()} already finished; nothing to cancel"
        )
        await rt.submit(
            command(
                SteeringTarget.graph_task(handle.run_id, paused["left"].task_id),
                SteeringKind.APPROVE,
            )
        )
        assert (await handle.result()).output["log"] == ["left:True", "after_left"]


async def test_cancel_a_task_with_fail_run_policy_fails_the_run(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    graph = two_questions(MemoryCheckpointer(), policy="fail_run")
    handle = await rt.start_graph(graph, {}, thread_id="t")
    paused = await both_paused(waiter, handle.run_id)
    task_id = paused["left"].task_id
    cancel = command(SteeringTarget.graph_task(handle.run_id, task_id), SteeringKind.CANCEL)
    await rt.submit(cancel)
    result = await handle.result()
    assert result.status is RunStatus.FAILED and "fail_run" in (result.error or "")
    assert await settled(waiter, cancel.correlation_id) == "steering.applied"
    # it names the task it cancelled, as a ``skip`` cancel does, and the run it ended
    affected = recorder.steering(cancel.correlation_id)[-1].affected
    assert affected["task_id"] == task_id and affected["node"] == "left"
    assert affected["policy"] == "fail_run" and affected["run_id"] == handle.run_id


async def test_immediate_cancel_stops_a_running_task_only(rt: Runtime, waiter: EventWaiter) -> None:
    never = asyncio.Event()

    async def stuck(state: Any) -> dict[str, Any]:
        await never.wait()
        return {"log": ["stuck"]}

    graph = StateGraph(LogState).add_node("stuck", stuck).add_node("fine", logger("fine"))
    graph.add_node("after", logger("after")).add_edge("stuck", "after").add_edge("after", END)
    graph.add_edge(START, "stuck").add_edge(START, "fine").add_edge("fine", END)
    handle = await rt.start_graph(graph.compile(checkpointer=MemoryCheckpointer()), {})
    started = await waiter.event("graph.task_started", handle.run_id, node="stuck")
    await waiter.event("graph.task_completed", handle.run_id, node="fine")
    cancel = command(
        SteeringTarget.graph_task(handle.run_id, started.task_id),
        SteeringKind.CANCEL,
        delivery=SteeringDelivery.IMMEDIATE,
    )
    await rt.submit(cancel)
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["fine"]
    assert await settled(waiter, cancel.correlation_id) == "steering.applied"
    await waiter.event("graph.task_cancelled", handle.run_id, node="stuck")


async def test_pause_holds_the_run_at_a_boundary_until_resume(
    rt: Runtime, waiter: EventWaiter
) -> None:
    gate = asyncio.Event()
    handle = await rt.start_graph(gated_chain(gate), {})
    await waiter.event("graph.task_started", handle.run_id, node="a")
    pause = command(SteeringTarget.agent_run(handle.run_id), SteeringKind.PAUSE)
    await rt.submit(pause)
    gate.set()
    assert await settled(waiter, pause.correlation_id) == "steering.applied"
    assert handle.status is RunStatus.PAUSED
    status = command(SteeringTarget.agent_run(handle.run_id), SteeringKind.REQUEST_STATUS)
    await rt.submit(status)
    assert await settled(waiter, status.correlation_id) == "steering.applied"
    assert not [e for e in waiter.events if e.type == "graph.task_started" and e.node == "b"]
    await rt.submit(command(SteeringTarget.agent_run(handle.run_id), SteeringKind.RESUME))
    result = await handle.result()
    assert result.output["log"] == ["a", "b", "c"]


async def test_foreground_run_keeps_its_run_id_and_takes_queued_commands(
    rt: Runtime, waiter: EventWaiter
) -> None:
    cp = MemoryCheckpointer()
    graph = ask_after_prep(cp)
    first = await graph.run({}, thread_id="t", runtime=rt)
    assert first.status == "interrupted"
    [handle] = [
        h for h in rt.runs._handles.values() if h.info.kind == "graph" and h.info.thread_id == "t"
    ]
    assert handle.status is RunStatus.INTERRUPTED
    approve = command(
        SteeringTarget.graph_task(handle.run_id, first.interrupts[0].task_id), SteeringKind.APPROVE
    )
    assert (await rt.submit(approve)).status == "accepted"  # queued: nothing runs the thread
    second = await graph.run(None, thread_id="t", runtime=rt)
    assert second.status == "completed" and second.state["log"] == ["prep", "ask:True"]
    assert await settled(waiter, approve.correlation_id) == "steering.applied"
    assert handle.status is RunStatus.COMPLETED  # the same run continued
    tree = rt.tree(handle.run_id)
    assert tree is not None  # the continued run took over the paused task's entry
    assert [(c.info.node_id, c.info.status) for c in tree.children] == [
        ("prep", RunStatus.COMPLETED),
        ("ask", RunStatus.COMPLETED),
    ]


async def test_thread_command_waits_for_the_next_run_of_the_thread(
    rt: Runtime, waiter: EventWaiter
) -> None:
    graph = gated_chain(asyncio.Event(), MemoryCheckpointer())
    update = command(
        SteeringTarget.thread("later"), SteeringKind.UPDATE_STATE, {"update": {"log": ["early"]}}
    )
    assert (await rt.submit(update)).status == "deferred"
    gate_open = asyncio.Event()
    gate_open.set()
    handle = await rt.start_graph(gated_chain(gate_open), {}, thread_id="later")
    result = await handle.result()
    assert result.output["log"] == ["early", "a", "b", "c"]
    assert await settled(waiter, update.correlation_id) == "steering.applied"
    del graph


async def test_events_and_run_tree(rt: Runtime, recorder: EventRecorder) -> None:
    graph = StateGraph(LogState).add_node("a", logger("a")).add_node("b", logger("b"))
    compiled = graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END).compile()
    result = await compiled.run({}, runtime=rt)
    assert result.status == "completed"
    types = recorder.types("graph.")
    assert types[0] == "graph.started" and types[-1] == "graph.completed"
    assert types.count("graph.task_started") == 2 and types.count("graph.step") == 2
    [run] = [i for i in rt.runs.list() if i.kind == "graph" and i.task_id is None]
    tree = rt.tree(run.run_id)
    assert tree is not None
    tasks = [(c.info.node_id, c.info.kind, c.info.status) for c in tree.children]
    assert tasks == [("a", "graph", RunStatus.COMPLETED), ("b", "graph", RunStatus.COMPLETED)]
    assert all(c.info.task_id and c.info.task_id.startswith("t-") for c in tree.children)


async def test_provide_context_resumes_with_its_value_or_text(
    rt: Runtime, waiter: EventWaiter
) -> None:
    answers: list[Any] = []

    def ask(state: Any) -> dict[str, Any]:
        answers.append(interrupt("which invoice?"))
        answers.append(interrupt("anything else?"))
        return {}

    graph = StateGraph(LogState).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    handle = await rt.start_graph(graph.compile(checkpointer=MemoryCheckpointer()), {})
    event = await waiter.event("graph.interrupt", handle.run_id)
    target = SteeringTarget.graph_task(handle.run_id, event.task_id)
    first = command(target, SteeringKind.PROVIDE_CONTEXT, {"value": {"invoice": 1042}})
    await rt.submit(first)
    assert await settled(waiter, first.correlation_id) == "steering.applied"
    await waiter.until(
        lambda e: e.type == "graph.interrupt" and e.data["value"] == "anything else?"
    )
    await rt.submit(command(target, SteeringKind.PROVIDE_CONTEXT, {"text": "no, thanks"}))
    assert (await handle.result()).status is RunStatus.COMPLETED
    assert answers == [{"invoice": 1042}, {"invoice": 1042}, "no, thanks"]


@pytest.mark.parametrize("by", ["task", "node"])
async def test_an_approve_naming_another_interrupt_is_refused_saying_which_are_pending(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder, by: str
) -> None:
    # It was accepted, then failed at once: a paused task asks what it asks until it is
    # answered, so an answer to another question can never apply. Refused at submit, the
    # reason names the id asked for and the pending ones.
    graph = two_questions(MemoryCheckpointer())
    handle = await rt.start_graph(graph, {}, thread_id="t")
    paused = await both_paused(waiter, handle.run_id)
    target = (
        SteeringTarget.graph_task(handle.run_id, paused["left"].task_id)
        if by == "task"
        else SteeringTarget.graph_node(handle.run_id, "left")
    )
    approve = command(target, SteeringKind.APPROVE, {"interrupt_id": "i-not-this-one"})
    receipt = await rt.submit(approve)
    assert receipt.status == "rejected" and receipt.policy_id == "graph"
    assert receipt.reason is not None and "'i-not-this-one'" in receipt.reason
    assert paused["left"].data["interrupt_id"] in receipt.reason
    assert paused["right"].data["interrupt_id"] not in receipt.reason  # not this target's
    assert [e.type for e in recorder.steering(approve.correlation_id)] == [
        "steering.requested",
        "steering.rejected",
    ]
    assert handle.status is RunStatus.INTERRUPTED  # nothing answered
    right = command(
        SteeringTarget.graph_task(handle.run_id, paused["right"].task_id),
        SteeringKind.APPROVE,
        {"interrupt_id": paused["right"].data["interrupt_id"]},
    )
    assert (await rt.submit(right)).accepted  # the pending one is taken


async def test_an_answer_naming_an_interrupt_its_running_task_has_not_asked_yet_is_taken(
    rt: Runtime, waiter: EventWaiter
) -> None:
    """While a task runs, the question an answer names may still come: judged when it does."""
    gate = asyncio.Event()

    async def ask(state: Any) -> dict[str, Any]:
        await gate.wait()
        return {"log": [str(interrupt("ok?")["approved"])]}

    graph = StateGraph(LogState).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    handle = await rt.start_graph(graph.compile(checkpointer=MemoryCheckpointer()), {})
    started = await waiter.event("graph.task_started", handle.run_id)
    approve = command(
        SteeringTarget.graph_task(handle.run_id, started.task_id),
        SteeringKind.APPROVE,
        {"interrupt_id": "i-not-asked-yet"},
    )
    assert (await rt.submit(approve)).accepted
    gate.set()
    assert await settled(waiter, approve.correlation_id) == "steering.failed"
    await handle.cancel()


async def test_a_task_command_reaches_the_interrupt_inside_its_sub_graph(
    rt: Runtime, waiter: EventWaiter
) -> None:
    def review(state: Any) -> dict[str, Any]:
        return {"log": [f"{state['log'][0]}:{interrupt('ok?')['approved']}"]}

    child = StateGraph(LogState).add_node("review", review).add_edge(START, "review")
    graph = StateGraph(LogState).add_node("fan", lambda s: None)
    graph.add_node("sub", child.add_edge("review", END).compile()).add_edge(START, "fan")
    graph.add_conditional_edges("fan", lambda s: [Send("sub", {"log": [j]}) for j in ("j1", "j2")])
    compiled = graph.add_edge("sub", END).compile(checkpointer=MemoryCheckpointer())
    handle = await rt.start_graph(compiled, {}, thread_id="t")
    one = await waiter.event("graph.interrupt", handle.run_id)
    await waiter.until(lambda e: e.type == "graph.interrupt" and e.task_id != one.task_id)
    pending = (await compiled.get_state("t")).interrupts
    assert len(pending) == 2 and all(i.ns.startswith("sub:t-") for i in pending)
    first, second = pending
    parent_task = first.ns.split(":", 1)[1]  # the sub-graph's task in the parent graph
    approve = command(SteeringTarget.graph_task(handle.run_id, parent_task), SteeringKind.APPROVE)
    assert (await rt.submit(approve)).status == "accepted"
    applied = await waiter.event("steering.applied", correlation_id=approve.correlation_id)
    assert applied.affected["interrupt_id"] == first.id
    await waiter.until(lambda e: e.type == "graph.interrupt" and e.offset > applied.offset)
    assert [i.id for i in (await compiled.get_state("t")).interrupts] == [second.id]
    # the child's own task id names it too
    reject = command(SteeringTarget.graph_task(handle.run_id, second.task_id), SteeringKind.REJECT)
    await rt.submit(reject)
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert result.output["log"] == ["j1:True", "j2:False"]


async def _resting(handle: Any) -> None:
    """Until the run rests on its interrupts (its status, which no event says)."""
    while handle.status is not RunStatus.INTERRUPTED:  # noqa: ASYNC110
        await asyncio.sleep(0.01)


def reviewed(gate: asyncio.Event | None = None, **sub_compile: Any) -> Any:
    """START → sub (a sub-graph compiled with ``sub_compile`` whose ``review`` asks "ok?",
    once ``gate`` is set)."""

    async def review(state: Any) -> dict[str, Any]:
        if gate is not None:
            await gate.wait()
        return {"log": [f"review:{interrupt('ok?')['approved']}"]}

    child = StateGraph(LogState).add_node("review", review).add_edge(START, "review")
    sub = child.add_edge("review", END).compile(**sub_compile)
    graph = StateGraph(LogState).add_node("sub", sub).add_edge(START, "sub")
    return graph.add_edge("sub", END).compile(checkpointer=MemoryCheckpointer())


@pytest.mark.parametrize("persistent", [True, None])
@pytest.mark.parametrize("kind", [SteeringKind.APPROVE, SteeringKind.REJECT])
@pytest.mark.parametrize("sent", ["at_rest", "while_running"])
async def test_a_task_command_reaches_the_interrupt_of_its_persistent_sub_graph(
    rt: Runtime,
    waiter: EventWaiter,
    recorder: EventRecorder,
    persistent: Any,
    kind: SteeringKind,
    sent: str,
) -> None:
    """The calling task's id names the question its sub-graph asks. A ``checkpointer=True``
    sub-graph's namespace has no task ids (``"sub"``): the answer was refused at submit as
    one its task does not ask (the run rests), or accepted while the task ran and failed
    when it landed, where a per-call sub-graph's is applied. The task holding the question
    names it either way."""
    gate = asyncio.Event()
    graph = reviewed(gate, checkpointer=persistent)
    handle = await rt.start_graph(graph, {}, thread_id="t")
    started = await waiter.event("graph.task_started", handle.run_id, node="sub")
    answer = command(SteeringTarget.graph_task(handle.run_id, started.task_id), kind)
    if sent == "while_running":
        receipt = await rt.submit(answer)
        gate.set()
    else:
        gate.set()
        await waiter.event("graph.interrupt", handle.run_id)
        await asyncio.wait_for(_resting(handle), 60)
        receipt = await rt.submit(answer)
    assert receipt.status == "accepted", receipt.reason
    applied = await waiter.event("steering.applied", correlation_id=answer.correlation_id)
    [question] = [
        e for e in recorder.events if e.type == "graph.interrupt" and e.offset < applied.offset
    ]
    assert (question.data["ns"] == "sub") is bool(persistent)
    assert applied.affected["interrupt_id"] == question.data["interrupt_id"]
    assert applied.affected["task_id"] == question.task_id
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert result.output["log"] == [f"review:{kind is SteeringKind.APPROVE}"]
    recorder.assert_every_command_terminal()


async def test_a_task_command_to_a_foreground_run_resting_in_a_persistent_sub_graph(
    rt: Runtime, recorder: EventRecorder
) -> None:
    """A foreground run that returned ``interrupted`` rests with its inbox open: the answer to
    the calling task passes the submit-time check and is applied by the next run."""
    graph = reviewed(checkpointer=True)
    stopped = await graph.run({}, thread_id="t", runtime=rt)
    assert stopped.status == "interrupted"
    [question] = stopped.interrupts
    run_id = next(i.run_id for i in rt.runs.list() if i.thread_id == "t")
    [calling] = [
        e.task_id
        for e in recorder.events
        if e.type == "graph.task_started" and getattr(e, "node", None) == "sub"
    ]
    approve = command(SteeringTarget.graph_task(run_id, calling), SteeringKind.APPROVE)
    receipt = await rt.submit(approve)
    assert receipt.status == "accepted", receipt.reason
    result = await graph.run(None, thread_id="t", runtime=rt)
    assert result.status == "completed" and result.state["log"] == ["review:True"]
    [applied] = [
        e for e in recorder.steering(approve.correlation_id) if e.type == "steering.applied"
    ]
    assert applied.affected["interrupt_id"] == question.id
    recorder.assert_every_command_terminal()


def nested_reviewed(
    gate: asyncio.Event | None = None,
    persistent: bool | None = True,
    asking: list[NodeContext] | None = None,
    entered: asyncio.Event | None = None,
) -> Any:
    """START → outer (a per-call sub-graph) whose node ``mid`` runs a sub-graph (compiled with
    ``checkpointer=persistent``) whose ``review`` asks "ok?" (once ``gate`` is set; it puts
    its context in ``asking`` and sets ``entered`` first): with ``checkpointer=True`` the
    question's namespace, ``"outer|mid"``, names neither enclosing task."""

    async def review(state: Any, ctx: NodeContext) -> dict[str, Any]:
        if asking is not None:
            asking.append(ctx)
        if entered is not None:
            entered.set()
        if gate is not None:
            await gate.wait()
        return {"log": [f"review:{interrupt('ok?')['approved']}"]}

    inner = StateGraph(LogState).add_node("review", review).add_edge(START, "review")
    mid = inner.add_edge("review", END).compile(checkpointer=persistent)
    outer = StateGraph(LogState).add_node("mid", mid).add_edge(START, "mid").compile()
    graph = StateGraph(LogState).add_node("outer", outer).add_edge(START, "outer")
    return graph.add_edge("outer", END).compile(checkpointer=MemoryCheckpointer())


async def _enclosing_tasks(graph: Any, thread_id: str) -> tuple[str, str]:
    """The ids of the top-level task ``outer`` and of its sub-graph's task ``mid``."""
    snapshot = await graph.get_state(thread_id, subgraphs=True)
    [outer] = snapshot.tasks
    [mid] = outer.state.tasks
    assert (outer.name, mid.name) == ("outer", "mid")
    return outer.id, mid.id


@pytest.mark.parametrize("persistent", [True, None])
@pytest.mark.parametrize("level", ["enclosing", "own"])
@pytest.mark.parametrize("kind", [SteeringKind.APPROVE, SteeringKind.PROVIDE_CONTEXT])
async def test_an_answer_to_a_nested_task_sent_while_it_runs_lands_on_its_question(
    rt: Runtime,
    waiter: EventWaiter,
    recorder: EventRecorder,
    persistent: bool | None,
    level: str,
    kind: SteeringKind,
) -> None:
    """parent → outer (per-call) → mid (per-call or ``checkpointer=True``) → review, which is
    running (held by a gate) when the answer to ``mid``'s task or to its own is sent: the
    check at submit knew only the top-level tasks and the questions asked, so the answer was
    refused ("not pending"), for a per-call sub-graph too. A task running at any level of
    the run is known now: the answer is accepted, and lands on the question asked."""
    gate, entered, asking = asyncio.Event(), asyncio.Event(), []
    graph = nested_reviewed(gate, persistent, asking, entered)
    handle = await rt.start_graph(graph, {}, thread_id="t")
    await asyncio.wait_for(entered.wait(), 60)
    _, mid = await _enclosing_tasks(graph, "t")
    [review] = asking
    task = {"enclosing": mid, "own": review.task_id}[level]
    payload = {"value": {"approved": True}} if kind is SteeringKind.PROVIDE_CONTEXT else {}
    answer = command(SteeringTarget.graph_task(handle.run_id, task), kind, payload)
    stray = command(SteeringTarget.graph_task(handle.run_id, "t-none"), kind, payload)
    refused = await rt.submit(stray)  # a task running nowhere in the run still is not
    assert refused.status == "rejected" and "is not pending" in (refused.reason or "")
    receipt = await rt.submit(answer)
    assert receipt.status == "accepted", receipt.reason
    assert handle.status is RunStatus.RUNNING  # sent while the task runs, not at rest
    gate.set()
    applied = await waiter.event("steering.applied", correlation_id=answer.correlation_id)
    [question] = [
        e for e in recorder.events if e.type == "graph.interrupt" and e.offset < applied.offset
    ]
    assert (question.data["ns"] == "outer|mid") is bool(persistent)
    assert applied.affected["interrupt_id"] == question.data["interrupt_id"]
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert result.output["log"] == ["review:True"]
    recorder.assert_every_command_terminal()


async def test_an_answer_to_a_nested_task_that_asks_nothing_fails_when_it_lands(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    """Accepted while the sub-graph's task runs, the answer is judged at the step's end: a
    task that asked nothing leaves it nothing to answer, and it fails there."""
    gate, entered, asking = asyncio.Event(), asyncio.Event(), []

    async def work(state: Any, ctx: NodeContext) -> dict[str, Any]:
        asking.append(ctx)
        entered.set()
        await gate.wait()
        return {"log": ["work"]}

    inner = StateGraph(LogState).add_node("work", work).add_edge(START, "work").compile()
    graph = StateGraph(LogState).add_node("outer", inner).add_edge(START, "outer")
    graph = graph.add_edge("outer", END).compile(checkpointer=MemoryCheckpointer())
    handle = await rt.start_graph(graph, {}, thread_id="t")
    await asyncio.wait_for(entered.wait(), 60)
    [ctx] = asking
    answer = command(SteeringTarget.graph_task(handle.run_id, ctx.task_id), SteeringKind.APPROVE)
    receipt = await rt.submit(answer)
    assert receipt.status == "accepted", receipt.reason
    gate.set()
    assert await settled(waiter, answer.correlation_id) == "steering.failed"
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["work"]
    recorder.assert_every_command_terminal()


@pytest.mark.parametrize("level", ["top", "enclosing", "own"])
@pytest.mark.parametrize("kind", [SteeringKind.APPROVE, SteeringKind.REJECT])
async def test_a_task_command_at_any_enclosing_level_reaches_a_persistent_sub_graphs_question(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder, level: str, kind: SteeringKind
) -> None:
    """parent → outer (a per-call sub-graph) → mid (a ``checkpointer=True`` one that asks): the
    namespace ``"outer|mid"`` has no task ids, so the enclosing task ``mid`` of ``outer``'s
    sub-graph named the question nowhere and an answer to it was refused at submit. Each
    task the question passes through names it now (``Interrupt.enclosing``), as the
    top-level task and the asking one did already."""
    graph = nested_reviewed()
    handle = await rt.start_graph(graph, {}, thread_id="t")
    question = await waiter.event("graph.interrupt", handle.run_id)
    await asyncio.wait_for(_resting(handle), 60)
    assert question.data["ns"] == "outer|mid"
    outer, mid = await _enclosing_tasks(graph, "t")
    [pending] = (await graph.get_state("t")).interrupts
    assert pending.enclosing == (outer, mid)  # outermost first
    assert question.data["enclosing"] == [outer, mid]  # what a watcher may answer through
    task = {"top": outer, "enclosing": mid, "own": pending.task_id}[level]
    answer = command(SteeringTarget.graph_task(handle.run_id, task), kind)
    receipt = await rt.submit(answer)
    assert receipt.status == "accepted", receipt.reason
    applied = await waiter.event("steering.applied", correlation_id=answer.correlation_id)
    assert applied.affected["interrupt_id"] == question.data["interrupt_id"]
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert result.output["log"] == [f"review:{kind is SteeringKind.APPROVE}"]
    recorder.assert_every_command_terminal()


async def test_a_task_command_to_a_foreground_run_resting_two_levels_down(
    rt: Runtime, recorder: EventRecorder
) -> None:
    """A foreground run resting on the question: the enclosing task's answer passes the check
    at submit (the run read back from its checkpoint knows the question's tasks) and the
    next run applies it."""
    graph = nested_reviewed()
    stopped = await graph.run({}, thread_id="t", runtime=rt)
    assert stopped.status == "interrupted"
    [question] = stopped.interrupts
    _, mid = await _enclosing_tasks(graph, "t")
    run_id = next(i.run_id for i in rt.runs.list() if i.thread_id == "t")
    approve = command(SteeringTarget.graph_task(run_id, mid), SteeringKind.APPROVE)
    receipt = await rt.submit(approve)
    assert receipt.status == "accepted", receipt.reason
    result = await graph.run(None, thread_id="t", runtime=rt)
    assert result.status == "completed" and result.state["log"] == ["review:True"]
    [applied] = [
        e for e in recorder.steering(approve.correlation_id) if e.type == "steering.applied"
    ]
    assert applied.affected["interrupt_id"] == question.id
    recorder.assert_every_command_terminal()


@pytest.mark.parametrize("level", ["node", "top", "enclosing", "own"])
async def test_a_fork_answer_at_any_enclosing_level_reaches_a_persistent_sub_graphs_question(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder, level: str
) -> None:
    """The same answer made against the paused checkpoint with ``fork=True``: on the fork the
    question was matched by its own task and node only, so the top-level node (``outer``,
    which the live run's answer reaches) found nothing there ("0 matching interrupts").
    The fork matches as the live run does: each pending question with its top-level task."""
    graph = nested_reviewed()
    handle = await rt.start_graph(graph, {}, thread_id="t")
    question = await waiter.event("graph.interrupt", handle.run_id)
    await asyncio.wait_for(_resting(handle), 60)
    outer, mid = await _enclosing_tasks(graph, "t")
    if level == "node":
        target = SteeringTarget.graph_node(handle.run_id, "outer")
    else:
        task = {"top": outer, "enclosing": mid, "own": question.task_id}[level]
        target = SteeringTarget.graph_task(handle.run_id, task)
    checkpoint = (await graph.get_state("t")).checkpoint_id
    forked = command(target, SteeringKind.APPROVE, checkpoint_id=checkpoint, fork=True)
    receipt = await rt.submit(forked)
    assert receipt.status == "accepted", receipt.reason
    assert await settled(waiter, forked.correlation_id) == "steering.applied"
    applied = await waiter.event("steering.applied", correlation_id=forked.correlation_id)
    fork_handle = rt.runs.get(applied.affected["fork_run_id"])
    assert fork_handle is not None
    fork_result = await fork_handle.result()
    assert fork_result.status is RunStatus.COMPLETED, fork_result.error
    assert fork_result.output["log"] == ["review:True"]
    await handle.cancel()
    await handle.result()


async def test_start_graph_on_a_busy_thread_is_thread_busy_and_registers_nothing(
    rt: Runtime, waiter: EventWaiter
) -> None:
    gate = asyncio.Event()
    graph = gated_chain(gate)
    first = await rt.start_graph(graph, {}, thread_id="t")
    await waiter.event("graph.task_started", first.run_id, node="a")
    before = rt.runs.list()
    with pytest.raises(ThreadBusy):
        await rt.start_graph(graph, {}, thread_id="t")
    with pytest.raises(ThreadBusy):
        await graph.run({}, thread_id="t", runtime=rt)
    assert rt.runs.list() == before
    gate.set()
    assert (await first.result()).output["log"] == ["a", "b", "c"]
    # one writer: the input's checkpoint, its first step, three nodes' steps; no fork
    assert len(await graph.history("t")) == 5


@pytest.mark.parametrize(
    ("policy", "log", "outcomes"),
    [
        ("first_accepted", ["a", "c"], ["steering.applied", "steering.superseded"]),
        ("highest_priority", ["a", "d"], ["steering.superseded", "steering.applied"]),
        ("error", ["a", "c"], ["steering.applied", "steering.rejected"]),
    ],
)
async def test_redirect_conflict_of_the_compiled_graph_decides_between_redirects(
    rt: Runtime, waiter: EventWaiter, policy: str, log: list[str], outcomes: list[str]
) -> None:
    gate = asyncio.Event()

    async def a(state: Any) -> dict[str, Any]:
        await gate.wait()
        return {"log": ["a"]}

    graph = StateGraph(LogState).add_node("a", a, destinations=["c", "d"])
    for name in "bcd":
        graph.add_node(name, logger(name)).add_edge(name, END)
    graph.add_edge(START, "a").add_edge("a", "b")
    compiled = graph.compile(checkpointer=MemoryCheckpointer(), redirect_conflict=policy)
    handle = await rt.start_graph(compiled, {})
    await waiter.event("graph.task_started", handle.run_id, node="a")
    target = SteeringTarget.graph_node(handle.run_id, "b")
    to_c = command(target, SteeringKind.REDIRECT, {"goto": "c"})
    to_d = command(target, SteeringKind.REDIRECT, {"goto": "d"}, priority=SteeringPriority.HIGH)
    receipts = [await rt.submit(cmd) for cmd in (to_c, to_d)]
    # Under 'error' the queue refuses the second redirect before it is accepted.
    assert [r.status for r in receipts] == [
        "accepted",
        "rejected" if policy == "error" else "accepted",
    ]
    gate.set()
    assert (await handle.result()).output["log"] == log
    assert [await settled(waiter, c.correlation_id) for c in (to_c, to_d)] == outcomes


async def test_cancel_on_a_node_cancels_its_tasks_not_the_run(
    rt: Runtime, waiter: EventWaiter
) -> None:
    graph = two_questions(MemoryCheckpointer(), policy="skip")
    handle = await rt.start_graph(graph, {}, thread_id="t")
    paused = await both_paused(waiter, handle.run_id)
    cancel = command(SteeringTarget.graph_node(handle.run_id, "left"), SteeringKind.CANCEL)
    await rt.submit(cancel)
    applied = await waiter.event("steering.applied", correlation_id=cancel.correlation_id)
    assert applied.affected["task_ids"] == [paused["left"].task_id]
    assert handle.status is RunStatus.INTERRUPTED  # still waiting on right
    approve = command(SteeringTarget.graph_node(handle.run_id, "right"), SteeringKind.APPROVE)
    await rt.submit(approve)
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["right:True"]
    again = command(SteeringTarget.graph_node(handle.run_id, "left"), SteeringKind.CANCEL)
    await rt.submit(again)
    assert await settled(waiter, again.correlation_id) == "steering.failed"


async def test_immediate_cancel_on_a_node_stops_its_running_tasks(
    rt: Runtime, waiter: EventWaiter
) -> None:
    never = asyncio.Event()

    async def stuck(arg: int) -> dict[str, Any]:
        await never.wait()
        return {"log": [f"stuck{arg}"]}

    graph = StateGraph(LogState).add_node("stuck", stuck).add_node("fine", logger("fine"))
    graph.add_edge(START, "fine").add_edge("fine", END).add_edge("stuck", END)
    graph.add_conditional_edges(START, lambda s: [Send("stuck", i) for i in range(2)])
    handle = await rt.start_graph(graph.compile(checkpointer=MemoryCheckpointer()), {})
    await waiter.event("graph.task_completed", handle.run_id, node="fine")
    cancel = command(
        SteeringTarget.graph_node(handle.run_id, "stuck"),
        SteeringKind.CANCEL,
        delivery=SteeringDelivery.IMMEDIATE,
    )
    await rt.submit(cancel)
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["fine"]
    applied = await waiter.event("steering.applied", correlation_id=cancel.correlation_id)
    assert len(applied.affected["task_ids"]) == 2 and applied.affected["was_running"] is True


async def test_a_resumed_task_leaves_no_interrupted_entry_behind(
    rt: Runtime, waiter: EventWaiter
) -> None:
    """A task that paused on its interrupt and then finished has one entry in the run tree,
    ``completed``: not a leftover ``interrupted`` one beside a new one (the finished graph
    would otherwise show a child that never ends, and its tree would never be released)."""
    graph = two_questions(MemoryCheckpointer())
    handle = await rt.start_graph(graph, {}, thread_id="t")
    paused = await both_paused(waiter, handle.run_id)
    for name, kind in (("left", SteeringKind.APPROVE), ("right", SteeringKind.APPROVE)):
        cmd = command(SteeringTarget.graph_task(handle.run_id, paused[name].task_id), kind)
        await rt.submit(cmd)
        assert await settled(waiter, cmd.correlation_id) == "steering.applied"
    assert (await handle.result()).status is RunStatus.COMPLETED
    tree = rt.tree(handle.run_id)
    assert tree is not None
    entries = sorted((c.info.node_id, c.info.status) for c in tree.children)
    assert entries == [
        ("after_left", RunStatus.COMPLETED),
        ("left", RunStatus.COMPLETED),
        ("right", RunStatus.COMPLETED),
    ]
    assert all(c.info.status.finished for c in tree.children)


async def test_a_finished_graph_whose_tasks_paused_is_released() -> None:
    """The retention window releases a graph run whose tasks paused and resumed (a leftover
    ``interrupted`` entry kept its whole tree in memory for good)."""
    async with Runtime(testing=True, retain_finished=0) as rt:
        waiter = EventWaiter()
        rt.bus.add_sink(waiter)
        handle = await rt.start_graph(two_questions(MemoryCheckpointer()), {}, thread_id="t")
        paused = await both_paused(waiter, handle.run_id)
        for name in ("left", "right"):
            target = SteeringTarget.graph_task(handle.run_id, paused[name].task_id)
            await rt.submit(command(target, SteeringKind.APPROVE))
        assert (await handle.result()).status is RunStatus.COMPLETED
        await rt.release_finished()
        assert rt.tree(handle.run_id) is None and len(rt.runs) == 0


async def test_graph_completed_of_a_failed_run_says_why(
    rt: Runtime, recorder: EventRecorder
) -> None:
    def broken(state: Any) -> dict[str, Any]:
        raise ValueError("the ledger is locked")

    graph = StateGraph(LogState).add_node("broken", broken)
    compiled = graph.add_edge(START, "broken").add_edge("broken", END).compile()
    result = await compiled.run({}, runtime=rt)
    assert result.status == "failed"
    [completed] = [e for e in recorder.events if e.type == "graph.completed"]
    assert completed.data["status"] == "failed"
    assert completed.data["error"] == "ValueError: the ledger is locked"


async def test_cancelling_one_paused_task_leaves_the_approval_of_the_other(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    """A reviewer approves LEFT and cancels RIGHT, back to back: the cancel aimed at task
    RIGHT superseded the approval aimed at LEFT (one queue per run), and the run waited on
    LEFT for ever."""
    graph = two_questions(MemoryCheckpointer())
    handle = await rt.start_graph(graph, {}, thread_id="t")
    paused = await both_paused(waiter, handle.run_id)
    approve = command(
        SteeringTarget.graph_task(handle.run_id, paused["left"].task_id), SteeringKind.APPROVE
    )
    cancel = command(
        SteeringTarget.graph_task(handle.run_id, paused["right"].task_id), SteeringKind.CANCEL
    )
    assert (await rt.submit(approve)).accepted and (await rt.submit(cancel)).accepted
    assert await settled(waiter, approve.correlation_id) == "steering.applied"
    assert await settled(waiter, cancel.correlation_id) == "steering.applied"
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert result.output["log"] == ["left:True", "after_left"]
    recorder.assert_every_command_terminal()


@pytest.mark.parametrize("then", ["approve", "cancel"])
async def test_the_step_that_takes_an_answer_names_its_command_in_its_checkpoint(
    rt: Runtime, waiter: EventWaiter, then: str
) -> None:
    """LEFT is approved, then RIGHT is approved after LEFT ran (or cancelled at the same
    boundary). The records of the unfinished step were rebuilt without the commands that
    gave their answers, so the step's checkpoint named none of LEFT's approval in
    ``resumed_by``: after a crash before the store heard it was applied, the approval was
    handed over again and failed (no pending interrupt) instead of being reported applied."""
    cp = MemoryCheckpointer()
    handle = await rt.start_graph(two_questions(cp), {}, thread_id="t")
    paused = await both_paused(waiter, handle.run_id)
    approve = command(
        SteeringTarget.graph_task(handle.run_id, paused["left"].task_id), SteeringKind.APPROVE
    )
    right = SteeringTarget.graph_task(handle.run_id, paused["right"].task_id)
    if then == "approve":
        await rt.submit(approve)
        applied = await waiter.event("steering.applied", correlation_id=approve.correlation_id)
        await waiter.until(  # LEFT ran; the step waits on RIGHT alone
            lambda e: e.type == "graph.interrupt" and e.offset > applied.offset
        )
        other = command(right, SteeringKind.APPROVE)
    else:
        other = command(right, SteeringKind.CANCEL)
        await rt.submit(approve)
    await rt.submit(other)
    assert (await handle.result()).status is RunStatus.COMPLETED
    found = await applied_by_steering(cp, "t", handle.run_id)
    assert approve.correlation_id in found
    if then == "approve":
        assert found[approve.correlation_id] == found[other.correlation_id]  # the same step


async def test_a_fork_of_a_graph_run_without_checkpointer_is_rejected_at_submit(
    rt: Runtime, waiter: EventWaiter
) -> None:
    """``fork=True`` skips the staleness check, so a fork of a run that saves nothing was
    accepted, and the run itself then failed on an AssertionError."""
    gate = asyncio.Event()

    async def slow(state: Any) -> dict[str, Any]:
        await gate.wait()
        return {"log": ["a"]}

    graph = StateGraph(LogState).add_node("a", slow).add_node("b", logger("b"))
    compiled = graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END).compile()
    handle = await rt.start_graph(compiled, {})
    await waiter.event("graph.task_started", handle.run_id, node="a")
    fork = command(
        SteeringTarget.agent_run(handle.run_id),
        SteeringKind.UPDATE_STATE,
        {"update": {"log": ["x"]}},
        checkpoint_id="cp-any",
        fork=True,
    )
    receipt = await rt.submit(fork)
    assert receipt.status == "rejected" and "has no checkpointer" in (receipt.reason or "")
    gate.set()
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["a", "b"]


async def test_a_resting_run_whose_thread_was_finished_through_the_api_goes_on(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    """A foreground run rests interrupted with a command queued for it; the thread is then
    finished through the API (``update_state(as_node=END)``). The next start of the thread
    got a new run id: the resting run stayed interrupted and its command open for ever."""
    graph = StateGraph(LogState).add_node("a", asker("a")).add_node("b", logger("b"))
    compiled = (
        graph.add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", END)
        .compile(checkpointer=MemoryCheckpointer())
    )
    rested = await compiled.run({}, thread_id="t", runtime=rt)
    assert rested.status == "interrupted"
    (resting,) = [i for i in rt.runs.list() if i.kind == "graph" and i.task_id is None]
    queued = command(
        SteeringTarget.agent_run(resting.run_id), SteeringKind.UPDATE_STATE, {"update": {"x": 7}}
    )
    assert (await rt.submit(queued)).accepted
    await compiled.update_state("t", {"log": ["closed by api"]}, as_node=END)
    mark = recorder.events[-1].offset
    handle = await rt.start_graph(compiled, {"log": ["next"]}, thread_id="t")
    assert handle.run_id == resting.run_id  # the resting run goes on, with its queue
    asked = await waiter.until(
        lambda e: e.type == "graph.interrupt" and e.offset > mark and e.run_id == handle.run_id
    )
    await rt.submit(
        command(SteeringTarget.graph_task(handle.run_id, asked.task_id), SteeringKind.REJECT)
    )
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert rt.router.state(queued.correlation_id) in ("applied", "failed")
    assert rt.open_commands() == []
    recorder.assert_every_command_terminal()


async def test_cancelling_a_task_by_its_id_inside_a_sub_graph_skips_the_sub_graph(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    """The task id a sub-graph's ``graph.interrupt`` event gives names that question for an
    approval; a cancel by the same id failed "already finished; nothing to cancel" and the
    question stayed pending. It cancels the top-level task running the sub-graph."""
    inner = StateGraph(LogState).add_node("i1", asker("i1")).add_edge(START, "i1")
    graph = StateGraph(LogState).add_node("sub", inner.add_edge("i1", END).compile())
    graph.add_node("top", asker("top")).add_edge(START, "sub").add_edge(START, "top")
    compiled = (
        graph.add_edge("sub", END).add_edge("top", END).compile(checkpointer=MemoryCheckpointer())
    )
    handle = await rt.start_graph(compiled, {}, thread_id="t")
    asked = await waiter.event("graph.interrupt", handle.run_id, node="i1")
    await waiter.event("graph.interrupt", handle.run_id, node="top")
    cancel = command(SteeringTarget.graph_task(handle.run_id, asked.task_id), SteeringKind.CANCEL)
    assert (await rt.submit(cancel)).accepted
    assert await settled(waiter, cancel.correlation_id) == "steering.applied"
    assert [i.node for i in (await compiled.get_state("t")).interrupts] == ["top"]
    top = next(i for i in (await compiled.get_state("t")).interrupts if i.node == "top")
    await rt.submit(
        command(SteeringTarget.graph_task(handle.run_id, top.task_id), SteeringKind.APPROVE)
    )
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["top:True"]
    recorder.assert_every_command_terminal()


class _Doc(TypedDict, total=False):
    topic: str
    draft: str


def _nested_work(entered: asyncio.Event, gate: asyncio.Event, seen: list[NodeContext]) -> Any:
    """START → outer (a sub-graph whose ``work`` waits on ``gate``) and side (logs), → END."""

    async def work(state: Any, ctx: NodeContext) -> dict[str, Any]:
        seen.append(ctx)
        entered.set()
        await gate.wait()
        return {"log": ["work"]}

    inner = StateGraph(LogState).add_node("work", work).add_edge(START, "work")
    graph = StateGraph(LogState).add_node("outer", inner.add_edge("work", END).compile())
    graph.add_node("side", logger("side")).add_edge(START, "outer").add_edge(START, "side")
    graph.add_edge("outer", END).add_edge("side", END)
    return graph.compile(checkpointer=MemoryCheckpointer())


async def test_an_immediate_cancel_of_a_nested_running_task_stops_its_top_level_task(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    """A cancel naming a sub-graph's task while it ran was refused at submit ("not
    pending"): only answers reached it. As for a top-level running task, an immediate cancel
    stops it now; as for a sub-graph's task paused on a question, what it cancels is the
    top-level task running the sub-graph (skipped: no writes; the rest of the run goes on)."""
    entered, gate, seen = asyncio.Event(), asyncio.Event(), []
    graph = _nested_work(entered, gate, seen)
    handle = await rt.start_graph(graph, {}, thread_id="t")
    await asyncio.wait_for(entered.wait(), 60)
    [ctx] = seen
    cancel = command(
        SteeringTarget.graph_task(handle.run_id, ctx.task_id),
        SteeringKind.CANCEL,
        delivery=SteeringDelivery.IMMEDIATE,
    )
    receipt = await rt.submit(cancel)
    assert receipt.status == "accepted", receipt.reason
    applied = await waiter.event("steering.applied", correlation_id=cancel.correlation_id)
    [outer] = [e for e in recorder.events if e.type == "graph.task_started" and e.node == "outer"]
    assert applied.affected["task_id"] == outer.task_id != ctx.task_id
    assert applied.affected["node"] == "outer"
    assert applied.affected["sub_graph_task_id"] == ctx.task_id
    assert applied.affected["was_running"] is True
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["side"]
    assert not gate.is_set()  # stopped while it waited, not let finish
    recorder.assert_every_command_terminal()


async def test_a_queued_cancel_of_a_nested_running_task_fails_once_it_finished(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    """Sent ``next_boundary`` it is accepted (it was refused at submit) and lands after the
    step, as one for a running top-level task: the task finished, so there is nothing to
    cancel, and it fails saying so."""
    entered, gate, seen = asyncio.Event(), asyncio.Event(), []
    graph = _nested_work(entered, gate, seen)
    handle = await rt.start_graph(graph, {}, thread_id="t")
    await asyncio.wait_for(entered.wait(), 60)
    [ctx] = seen
    cancel = command(SteeringTarget.graph_task(handle.run_id, ctx.task_id), SteeringKind.CANCEL)
    receipt = await rt.submit(cancel)
    assert receipt.status == "accepted", receipt.reason
    gate.set()
    failed = await waiter.until(
        lambda e: e.type == "steering.failed" and e.correlation_id == cancel.correlation_id
    )
    assert "already finished; nothing to cancel" in failed.reason
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert sorted(result.output["log"]) == ["side", "work"]
    recorder.assert_every_command_terminal()


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        (SteeringKind.ADD_INSTRUCTION, {"text": "hurry"}),
        (SteeringKind.REDIRECT, {"goto": "side"}),
        (SteeringKind.UPDATE_STATE, {"update": {"log": ["x"]}}),
    ],
)
async def test_what_cannot_reach_a_nested_running_function_task_is_refused_saying_why(
    rt: Runtime, kind: SteeringKind, payload: dict[str, Any]
) -> None:
    """An instruction reaches an agent node's run only, as for a top-level task, and the
    reason says the node is a function; a redirect or an update acts on the top-level
    graph, not on the sub-graph the task runs in, and the reason says that (it said
    "not pending")."""
    entered, gate, seen = asyncio.Event(), asyncio.Event(), []
    graph = _nested_work(entered, gate, seen)
    handle = await rt.start_graph(graph, {}, thread_id="t")
    await asyncio.wait_for(entered.wait(), 60)
    [ctx] = seen
    steer = command(SteeringTarget.graph_task(handle.run_id, ctx.task_id), kind, payload)
    receipt = await rt.submit(steer)
    gate.set()
    assert receipt.status == "rejected"
    reason = receipt.reason or ""
    assert "not pending" not in reason
    if kind is SteeringKind.ADD_INSTRUCTION:
        assert (
            "node 'work'" in reason and "not an agent node (a function, in a sub-graph)" in reason
        )
    else:
        assert "task of a sub-graph" in reason and "node 'outer'" in reason
    assert (await handle.result()).status is RunStatus.COMPLETED


async def test_an_instruction_to_a_nested_agent_nodes_task_reaches_its_agent_run(
    rt: Runtime,
) -> None:
    """An agent node inside a sub-graph: its task was "not pending" for an instruction (its
    agent run known nowhere). It goes to the node's running agent run, as a top-level agent
    node's does."""
    gate = Gate()

    @tool
    async def outline() -> str:
        """Sketch an outline."""
        return "1. cats"

    async def respond(request: ModelRequest) -> Any:
        if len(model.requests) == 1:
            await gate.wait()
            return tool_call("outline")  # the loop goes on: the instruction reaches call 2
        return "second draft"

    model = FunctionModel(respond)
    writer = AgentNode(Agent("writer", model=model, tools=[outline]), input="topic", output="draft")
    inner = StateGraph(_Doc).add_node("writer", writer).add_edge(START, "writer")
    graph = StateGraph(_Doc).add_node("outer", inner.add_edge("writer", END).compile())
    graph = graph.add_edge(START, "outer").add_edge("outer", END).compile()
    handle = await rt.start_graph(graph, {"topic": "cats"})
    await gate.entered.wait()
    [agent_run] = [i for i in rt.runs.list() if i.kind == "agent" and i.node_id == "writer"]
    assert agent_run.task_id is not None
    steer = command(
        SteeringTarget.graph_task(handle.run_id, agent_run.task_id),
        SteeringKind.ADD_INSTRUCTION,
        {"text": "mention dogs too"},
    )
    receipt = await rt.submit(steer)
    assert receipt.status == "accepted", receipt.reason
    assert receipt.run_id == agent_run.run_id
    gate.open()
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output["draft"] == "second draft"
    assert any("mention dogs too" in str(m.content) for m in model.requests[1].messages)


async def test_two_senders_forks_under_one_correlation_id_are_two_forks(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    """Two scopes' commands under one id are two commands: both forked into one thread named
    after the id, so the second was reported applied (``applied_before_restart``, with no
    restart) on the first one's fork and its own answer was never given."""
    graph = StateGraph(LogState).add_node("prep", logger("prep")).add_node("ask", asker("ask"))
    compiled = (
        graph.add_edge(START, "prep")
        .add_edge("prep", "ask")
        .add_edge("ask", END)
        .compile(checkpointer=MemoryCheckpointer())
    )
    handle = await rt.start_graph(compiled, {}, thread_id="t", tenant_id="acme")
    stale = (await waiter.event("graph.interrupt", handle.run_id)).checkpoint_id
    moved_on = command(
        SteeringTarget.agent_run(handle.run_id), SteeringKind.UPDATE_STATE, {"update": {"x": 0}}
    )
    await rt.submit(moved_on)
    await settled(waiter, moved_on.correlation_id)
    human = SteeringActor.human("dana", tenant_id="acme", scopes=["agent:control"])
    forks = {}
    for actor, kind in ((human, SteeringKind.APPROVE), (TEST, SteeringKind.REJECT)):
        cmd = SteeringCommand(
            target=SteeringTarget.agent_run(handle.run_id),
            actor=actor,
            kind=kind,
            checkpoint_id=stale,
            fork=True,
            correlation_id="c-same",
        )
        assert (await rt.submit(cmd)).accepted
        applied = await waiter.until(
            lambda e, a=actor: (
                e.type == "steering.applied" and e.correlation_id == "c-same" and e.actor == a
            )
        )
        assert "applied_before_restart" not in applied.affected
        fork_run = rt.runs.get(applied.affected["fork_run_id"])
        assert fork_run is not None
        forks[kind] = (applied.affected["fork_thread_id"], (await fork_run.result()).output)
    (human_thread, approved), (test_thread, rejected) = forks.values()
    assert human_thread != test_thread and test_thread == "t~c-same"
    assert approved["log"] == ["prep", "ask:True"] and rejected["log"] == ["prep", "ask:False"]
    await handle.cancel()
    await handle.result()


async def test_a_graph_run_below_a_run_takes_its_parents_tenant(rt: Runtime) -> None:
    """``start_graph(..., parent=<an acme run>)`` with no tenant_id registered the graph run
    as tenant "default" (refused now: a sub-run belongs to its parent's tenant); a tenant
    given that is not the parent's is refused before anything is saved on the thread."""
    from tinyagents.errors import ConfigurationError
    from tinyagents.runs import RunHandle, RunInfo

    parent = await rt.register(RunHandle(RunInfo(run_id="p-1", tenant_id="acme"), submitter=rt))
    graph = StateGraph(LogState).add_node("a", logger("a")).add_edge(START, "a")
    compiled = graph.add_edge("a", END).compile(checkpointer=MemoryCheckpointer())
    child = await rt.start_graph(compiled, {}, thread_id="t", parent=parent)
    assert child.info.tenant_id == "acme" and child.info.parent_run_id == "p-1"
    assert (await child.result()).status is RunStatus.COMPLETED
    with pytest.raises(ConfigurationError, match="belongs to its parent's tenant"):
        await rt.start_graph(compiled, {}, thread_id="t-2", parent=parent, tenant_id="globex")
    assert (await compiled.get_state("t-2")).checkpoint_id is None  # nothing saved


@pytest.mark.parametrize("how", ["redirect", "cancel"])
async def test_a_paused_task_the_run_leaves_behind_ends_cancelled_at_once(
    rt: Runtime, waiter: EventWaiter, how: str
) -> None:
    """A task paused on its interrupt that a redirect drops, or a cancel skips, never resumes:
    its entry ends ``cancelled`` (with a ``graph.task_cancelled`` event) at that boundary,
    not left ``interrupted`` beside the tasks the run still waits on until the run ends."""
    graph = two_questions(MemoryCheckpointer())
    handle = await rt.start_graph(graph, {}, thread_id="t")
    paused = await both_paused(waiter, handle.run_id)
    run = SteeringTarget.agent_run(handle.run_id)
    steer = (
        command(run, SteeringKind.REDIRECT, {"goto": "right"})
        if how == "redirect"
        else command(
            SteeringTarget.graph_task(handle.run_id, paused["left"].task_id), SteeringKind.CANCEL
        )
    )
    await rt.submit(steer)
    applied = await waiter.event("steering.applied", correlation_id=steer.correlation_id)
    # paused again, on right alone (for a redirect: a new task of the next step)
    asked = await waiter.until(
        lambda e: e.type == "graph.interrupt" and e.offset > applied.offset and e.node == "right"
    )
    tree = rt.tree(handle.run_id)
    assert tree is not None
    interrupted = [c.info.task_id for c in tree.children if c.info.status is RunStatus.INTERRUPTED]
    assert interrupted == [asked.task_id]  # only the task the run still waits on
    assert {c.info.task_id: c.info.status for c in tree.children}[paused["left"].task_id] is (
        RunStatus.CANCELLED
    )
    dropped = [paused["left"].task_id] + ([paused["right"].task_id] if how == "redirect" else [])
    cancelled = [e.task_id for e in waiter.events if e.type == "graph.task_cancelled"]
    assert sorted(cancelled) == sorted(dropped)
    await rt.submit(
        command(SteeringTarget.graph_node(handle.run_id, "right"), SteeringKind.APPROVE)
    )
    assert (await handle.result()).output["log"] == ["right:True"]


@pytest.mark.parametrize("kind", [SteeringKind.REDIRECT, SteeringKind.UPDATE_STATE])
async def test_a_command_sent_while_paused_lands_at_the_boundary_the_run_is_held_at(
    rt: Runtime, waiter: EventWaiter, kind: SteeringKind
) -> None:
    """Pause, look, steer, resume: what was sent while the run was held at a boundary is
    applied at that boundary when it resumes, before the next superstep runs — not one step
    later, after a node already ran on the state it was meant to change."""
    gate = asyncio.Event()
    handle = await rt.start_graph(gated_chain(gate), {}, thread_id="t")
    await waiter.event("graph.task_started", handle.run_id, node="a")
    run = SteeringTarget.agent_run(handle.run_id)
    pause = command(run, SteeringKind.PAUSE)
    await rt.submit(pause)
    gate.set()
    await waiter.event("steering.applied", correlation_id=pause.correlation_id)
    payload = {"goto": "c"} if kind is SteeringKind.REDIRECT else {"update": {"log": ["human"]}}
    steer = command(run, kind, payload)
    assert (await rt.submit(steer)).status == "accepted"
    await rt.submit(command(run, SteeringKind.RESUME))
    result = await handle.result()
    applied = await waiter.event("steering.applied", correlation_id=steer.correlation_id)
    assert applied.affected["checkpoint_id"]
    expected = ["a", "c"] if kind is SteeringKind.REDIRECT else ["a", "human", "b", "c"]
    assert result.output["log"] == expected


AGENT_ONLY = [
    (SteeringKind.ADD_INSTRUCTION, {"text": "be brief"}),
    (SteeringKind.REPLACE_INSTRUCTION, {"text": "be brief"}),
    (SteeringKind.ASK_CLARIFYING_QUESTION, {"question": "why?"}),
    (SteeringKind.CONSTRAIN_TOOLS, {"tools": ["search"]}),
    (SteeringKind.CONSTRAIN_MODEL, {"models": ["m"]}),
    (SteeringKind.UPDATE_BUDGET, {"max_model_calls": 2}),
    (SteeringKind.PAUSE, {}),
]


@pytest.mark.parametrize(("kind", "payload"), AGENT_ONLY)
async def test_agent_only_commands_to_a_function_node_are_refused_at_submit(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder, kind: SteeringKind, payload: Any
) -> None:
    """Only an agent node's child run takes these; a function node has none. They were
    accepted, then failed at the next boundary ("has no meaning for ...")."""
    handle = await rt.start_graph(two_questions(MemoryCheckpointer()), {}, thread_id="t")
    paused = await both_paused(waiter, handle.run_id)
    for target in (
        SteeringTarget.graph_node(handle.run_id, "left"),
        SteeringTarget.graph_task(handle.run_id, paused["left"].task_id),
    ):
        cmd = command(target, kind, payload)
        receipt = await rt.submit(cmd)
        assert receipt.status == "rejected" and receipt.policy_id == "graph"
        reason = receipt.reason or ""
        assert "node 'left'" in reason and "not an agent node" in reason
        assert "update_state" in reason  # what to send instead
        assert [e.type for e in recorder.steering(cmd.correlation_id)][-1] == "steering.rejected"
    await rt.submit(command(SteeringTarget.agent_run(handle.run_id), SteeringKind.CANCEL))
    assert (await handle.result()).status is RunStatus.CANCELLED
    recorder.assert_every_command_terminal()


@pytest.mark.parametrize(("kind", "payload"), [k for k in AGENT_ONLY if k[0] != "pause"])
async def test_agent_only_commands_to_a_graph_run_or_its_thread_are_refused_at_submit(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder, kind: SteeringKind, payload: Any
) -> None:
    handle = await rt.start_graph(two_questions(MemoryCheckpointer()), {}, thread_id="t")
    await both_paused(waiter, handle.run_id)
    for target in (SteeringTarget.agent_run(handle.run_id), SteeringTarget.thread("t")):
        receipt = await rt.submit(command(target, kind, payload))
        assert receipt.status == "rejected" and receipt.policy_id == "graph"
        assert f"graph run {handle.run_id} itself" in (receipt.reason or "")
        assert "graph_node" in (receipt.reason or "")
    await rt.submit(command(SteeringTarget.agent_run(handle.run_id), SteeringKind.CANCEL))
    assert (await handle.result()).status is RunStatus.CANCELLED
    recorder.assert_every_command_terminal()


async def test_an_instruction_for_an_agent_node_not_running_yet_is_accepted_and_fails_late(
    rt: Runtime, waiter: EventWaiter
) -> None:
    """Whether an agent node is running when the command lands depends on timing: that one
    is accepted, and fails at the boundary with its reason, as documented."""
    gate = asyncio.Event()

    async def first(state: Any) -> dict[str, Any]:
        await gate.wait()
        return {"log": ["first"]}

    graph = StateGraph(LogState).add_node("first", first)
    writer = Agent("writer", model=ScriptedModel(["x"]))
    graph.add_node(
        "writer", AgentNode(writer, input=lambda s: "go", output=lambda o, s: {"log": [o]})
    )
    graph.add_edge(START, "first").add_edge("first", "writer").add_edge("writer", END)
    handle = await rt.start_graph(graph.compile(checkpointer=MemoryCheckpointer()), {})
    await waiter.event("graph.task_started", handle.run_id, node="first")
    cmd = command(
        SteeringTarget.graph_node(handle.run_id, "writer"),
        SteeringKind.ADD_INSTRUCTION,
        {"text": "hi"},
    )
    assert (await rt.submit(cmd)).status == "accepted"
    gate.set()
    assert await settled(waiter, cmd.correlation_id) == "steering.failed"
    assert (await handle.result()).output["log"] == ["first", "x"]


async def test_a_run_cancel_supersedes_what_was_delivered_with_the_pause_holding_the_run(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    """Commands taken at the boundary together with a pause wait behind it; a run cancel
    sent while paused ended them ``failed`` ("the graph run ended before this command"),
    where DESIGN.md says a cancel supersedes every pending non-cancel command of its target."""
    gate = asyncio.Event()
    handle = await rt.start_graph(gated_chain(gate), {}, thread_id="t")
    await waiter.event("graph.task_started", handle.run_id, node="a")
    run = SteeringTarget.agent_run(handle.run_id)
    pause = command(run, SteeringKind.PAUSE, priority=SteeringPriority.HIGH)
    behind = [
        command(run, SteeringKind.UPDATE_STATE, {"update": {"log": ["u"]}}),
        command(
            SteeringTarget.graph_node(handle.run_id, "b"), SteeringKind.REDIRECT, {"goto": "c"}
        ),
        command(run, SteeringKind.REQUEST_STATUS),
    ]
    for cmd in (pause, *behind):
        assert (await rt.submit(cmd)).status == "accepted"
    gate.set()
    assert await settled(waiter, pause.correlation_id) == "steering.applied"
    cancel = command(run, SteeringKind.CANCEL)
    await rt.submit(cancel)
    assert (await handle.result()).status is RunStatus.CANCELLED
    assert await settled(waiter, cancel.correlation_id) == "steering.applied"
    for cmd in behind:
        last = recorder.steering(cmd.correlation_id)[-1]
        assert last.type == "steering.superseded", (cmd.kind, last.type, last.reason)
        assert cancel.correlation_id in (last.reason or "")
    recorder.assert_every_command_terminal()


@pytest.mark.parametrize(
    ("kind", "payload", "answer"),
    [
        (SteeringKind.APPROVE, {}, True),
        (SteeringKind.REJECT, {"reason": "no"}, False),
    ],
)
async def test_an_answer_sent_to_a_thread_before_its_run_resumes_is_used_when_it_does(
    tmp_path: Any, kind: SteeringKind, payload: dict[str, Any], answer: bool
) -> None:
    """A restart: the thread's last checkpoint holds a pending interrupt and no run is live.
    The operator's answer to the thread waits for the thread (as LangGraph's
    ``Command(resume=...)`` waits for the next invoke) and answers the interrupt when a run
    resumes it — in the new process, with a durable store."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    async with SqliteCheckpointer(tmp_path / "cp.db") as cp:
        graph = ask_after_prep(cp)
        async with Runtime(testing=True, store=store) as first:
            assert (await graph.run({}, thread_id="t", runtime=first)).status == "interrupted"
        async with Runtime(testing=True, store=store) as rt:
            recorder = EventRecorder()
            rt.bus.add_sink(recorder)
            cmd = command(SteeringTarget.thread("t"), kind, payload)
            assert (await rt.submit(cmd)).status == "deferred"  # no live run on the thread
            result = await graph.run(None, thread_id="t", runtime=rt)
            assert result.status == "completed"
            assert result.state["log"] == ["prep", f"ask:{answer}"]
            assert recorder.steering(cmd.correlation_id)[-1].type == "steering.applied"
            recorder.assert_every_command_terminal()


async def test_a_held_thread_answer_the_resumed_run_made_moot_says_how_to_answer(
    rt: Runtime, recorder: EventRecorder
) -> None:
    """The run resumed with its own ``Command(resume=...)``: the held answer has nothing left
    to answer, and its reason says how a thread's interrupt is answered (it only said "no
    pending interrupt")."""
    graph = ask_after_prep(MemoryCheckpointer())
    assert (await graph.run({}, thread_id="t")).status == "interrupted"  # no runtime: no run
    pending = (await graph.get_state("t")).interrupts[0]
    cmd = command(SteeringTarget.thread("t"), SteeringKind.APPROVE)
    assert (await rt.submit(cmd)).status == "deferred"
    own = Command(resume={pending.id: {"approved": False}})
    result = await graph.run(own, thread_id="t", runtime=rt)
    assert result.state["log"] == ["prep", "ask:False"]  # the run's own answer
    last = recorder.steering(cmd.correlation_id)[-1]
    assert last.type == "steering.failed"
    reason = last.reason or ""
    assert "thread t has no pending interrupt to approve" in reason
    assert "graph.run(None, thread_id=" in reason and "Command(resume=" in reason


async def test_a_task_cancel_while_paused_supersedes_what_waits_behind_the_pause_for_it(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder
) -> None:
    """An approval of a task, delivered with a pause and held behind it, is a pending command
    of that task: a cancel of the task sent while paused supersedes it (it failed after the
    resume: "no pending interrupt"), and leaves the approval of the other task alone."""
    graph = two_questions(MemoryCheckpointer(), policy="skip")
    handle = await rt.start_graph(graph, {}, thread_id="t")
    paused = await both_paused(waiter, handle.run_id)
    run = SteeringTarget.agent_run(handle.run_id)
    left = SteeringTarget.graph_task(handle.run_id, paused["left"].task_id)
    right = SteeringTarget.graph_task(handle.run_id, paused["right"].task_id)
    pause = command(run, SteeringKind.PAUSE, priority=SteeringPriority.HIGH)
    approve_left = command(left, SteeringKind.APPROVE)
    approve_right = command(right, SteeringKind.APPROVE)
    for cmd in (pause, approve_left, approve_right):
        assert (await rt.submit(cmd)).status == "accepted"
    assert await settled(waiter, pause.correlation_id) == "steering.applied"
    cancel = command(left, SteeringKind.CANCEL)
    await rt.submit(cancel)
    assert await settled(waiter, cancel.correlation_id) == "steering.applied"
    await rt.submit(command(run, SteeringKind.RESUME))
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["right:True"]
    last = recorder.steering(approve_left.correlation_id)[-1]
    assert last.type == "steering.superseded", (last.type, last.reason)
    assert cancel.correlation_id in (last.reason or "")
    assert recorder.steering(approve_right.correlation_id)[-1].type == "steering.applied"
    recorder.assert_every_command_terminal()


async def test_a_command_still_queued_when_the_run_ends_fails_before_graph_completed(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    gate = asyncio.Event()

    async def last(state: Any) -> dict[str, Any]:
        await gate.wait()
        raise ValueError("the last node fails")

    graph = StateGraph(LogState).add_node("a", logger("a")).add_node("last", last)
    graph.add_edge(START, "a").add_edge("a", "last").add_edge("last", END)
    handle = await rt.start_graph(graph.compile(), {}, thread_id="t")
    await waiter.event("graph.task_started", handle.run_id, node="last")
    # Due at the next superstep, which never comes: the run fails first.
    redirect = command(
        SteeringTarget.agent_run(handle.run_id), SteeringKind.REDIRECT, {"goto": "a"}
    )
    assert (await rt.submit(redirect)).status == "accepted"
    gate.set()
    result = await handle.result()

    assert result.status is RunStatus.FAILED
    assert recorder.lifecycle(redirect.correlation_id) == ["requested", "accepted", "failed"]
    [failed] = recorder.steering(redirect.correlation_id)[-1:]
    assert failed.reason == "target finished before delivery"
    types = [e.type for e in recorder.events if e.run_id == handle.run_id]
    assert types.index("steering.failed") < types.index("graph.completed")
    assert types[-1] == "graph.completed"  # nothing of the run's after its end


@pytest.mark.parametrize("when", ["next_boundary", "immediate", "while_paused"])
async def test_a_cancelled_graph_run_names_who_cancelled_it(
    rt: Runtime, waiter: EventWaiter, recorder: EventRecorder, when: str
) -> None:
    # an agent run's end names the sender of the cancel that ended it (detail.by); a graph
    # run's said only the reason, or (cancelled while paused) not even that
    alice = SteeringActor.human("alice", scopes=["agent:control"])
    gate = asyncio.Event()
    handle = await rt.start_graph(gated_chain(gate), {})
    run = SteeringTarget.agent_run(handle.run_id)
    await waiter.event("graph.task_started", handle.run_id, node="a")
    if when == "while_paused":
        pause = command(run, SteeringKind.PAUSE)
        await rt.submit(pause)
        gate.set()
        assert await settled(waiter, pause.correlation_id) == "steering.applied"
    delivery = SteeringDelivery.IMMEDIATE if when == "immediate" else SteeringDelivery.NEXT_BOUNDARY
    cancel = SteeringCommand(
        target=run,
        actor=alice,
        kind=SteeringKind.CANCEL,
        payload={"reason": "wrong customer"},
        delivery=delivery,
    )
    await rt.submit(cancel)
    gate.set()
    result = await handle.result()
    assert result.status is RunStatus.CANCELLED
    said = f'run {handle.run_id} was cancelled by human "alice": wrong customer'
    assert result.error == f"RunCancelled: {said}"
    [end] = [e for e in recorder.events if e.type == "graph.completed"]
    assert end.data["by"] == 'human "alice"'
    assert end.data["error"] == f"RunCancelled: {said}"
