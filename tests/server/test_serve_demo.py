"""``serve --demo``'s runs (tinyagents.server.demo): the demo tree again and again, a refund
question that waits for an operator, and nothing left running once the demo is stopped."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tinyagents import (
    RunInfo,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.server import demo

TENANT = "acme"
OPERATOR = SteeringActor.human("ops", tenant_id=TENANT, scopes=["agent:control"])


@pytest.fixture
async def runtime(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Runtime]:
    monkeypatch.setattr(demo, "BETWEEN_S", 0.01)
    async with Runtime() as rt:
        yield rt


async def until(check: Callable[[], Any]) -> Any:
    """Poll ``check`` until it returns something true (30 s at most); returns that."""
    async with asyncio.timeout(60):
        while not (found := check()):  # noqa: ASYNC110 (the runtime's state, no event to wait on)
            await asyncio.sleep(0.01)
    return found


def runs(rt: Runtime, agent: str, status: str | None = None, **where: Any) -> list[RunInfo]:
    """``agent``'s runs in ``rt`` (oldest first), with ``status`` and the given fields."""
    return [
        info
        for info in rt.runs.list()
        if info.agent_id == agent
        and (status is None or info.status.value == status)
        and all(getattr(info, k) == v for k, v in where.items())
    ]


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_one_demo_tree_follows_another_with_the_demo_story(runtime: Runtime) -> None:
    task = demo.start_demo(runtime, tenant_id=TENANT, think_s=0.0)
    try:
        roots = await until(
            lambda: (
                runs(runtime, "orchestrator", depth=0)[1:]
                and runs(runtime, "orchestrator", depth=0)
            )
        )
        first = roots[0]
    finally:
        await stop(task)
    assert first.status.value == "completed"
    tree = runtime.tree(first.run_id)
    assert tree is not None
    assert [(c.info.agent_id, c.info.status.value) for c in tree.children] == [
        ("critic", "completed"),
        ("research", "limit_exceeded"),
        ("research", "completed"),
    ]
    assert {info.tenant_id for info in runtime.runs.list()} == {TENANT}


async def test_the_refund_question_waits_for_an_operator_then_the_next_one_asks(
    runtime: Runtime,
) -> None:
    task = demo.start_demo(runtime, tenant_id=TENANT, think_s=0.0)
    try:
        (question,) = await until(
            lambda: runs(runtime, "refund-approval", "interrupted", node_id="approve_refund")
        )
        graph = runtime.runs.get(question.parent_run_id or "")
        assert graph is not None
        # the task's entry says it waits as the task pauses; its graph run a moment later
        await until(lambda: graph.info.status.value == "interrupted")
        receipt = await runtime.submit(
            SteeringCommand(
                target=SteeringTarget.graph_task(graph.run_id, question.task_id or ""),
                actor=OPERATOR,
                kind=SteeringKind.APPROVE,
            )
        )
        assert receipt.status.value == "accepted", receipt
        result = await asyncio.wait_for(graph.result(), 60)
        assert result.status.value == "completed"
        assert result.output["decision"] == "refunded"
        # the next question is asked, and waits again
        await until(
            lambda: [
                r
                for r in runs(runtime, "refund-approval", "interrupted", depth=0)
                if r.run_id != graph.run_id
            ]
        )
    finally:
        await stop(task)


async def test_a_tree_left_paused_gets_a_sibling_and_stopping_the_demo_cancels_its_runs(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(demo, "STUCK_S", 0.05)
    task = demo.start_demo(runtime, tenant_id=TENANT, think_s=0.2)
    try:
        (first,) = await until(lambda: runs(runtime, "orchestrator", depth=0))
        handle = runtime.runs.get(first.run_id)
        assert handle is not None
        assert (await handle.pause(actor=OPERATOR)).status.value == "accepted"
        await until(lambda: first.status.value == "paused")
        await until(lambda: len(runs(runtime, "orchestrator", depth=0)) >= 2)
        assert first.status.value == "paused"  # still there, still paused
        await until(lambda: runs(runtime, "refund-approval", "interrupted", depth=0))
        # (a graph task's own entry keeps the status it had when its graph ended: not checked)
        live = [i for i in runtime.runs.list() if not i.status.finished and i.task_id is None]
    finally:
        await stop(task)
    assert {i.agent_id for i in live} >= {"orchestrator", "refund-approval"}
    await until(lambda: all(info.status.finished for info in live))
    assert first.status.value == "cancelled"


async def test_an_orchestrator_cancelled_as_its_critic_starts_ends_its_tree(
    runtime: Runtime,
) -> None:
    # The critic's script waits for a command; the cancel its parent passes down must count,
    # even when it arrives before the orchestrator's script has read the critic's id.
    task = demo.start_demo(runtime, tenant_id=TENANT, think_s=0.3)
    try:
        (critic,) = await until(lambda: runs(runtime, "critic"))
        handle = runtime.runs.get(critic.parent_run_id or "")
        assert handle is not None
        assert (await handle.cancel(actor=OPERATOR)).status.value == "accepted"
        result = await asyncio.wait_for(handle.result(), 60)
    finally:
        await stop(task)
    assert result.status.value == "cancelled"
    assert critic.status.finished


async def test_stopping_the_demo_leaves_a_clean_command_history(tmp_path: Any) -> None:
    """Stopping the demo cancels its runs with a cancel that applies (not one failed "target
    finished before delivery" by the runtime closing under it), and a command that cancel
    superseded says by which command."""
    from tinyagents.events import SteeringEvent

    seen: list[SteeringEvent] = []
    async with Runtime(store=f"sqlite:///{tmp_path / 'demo.db'}") as rt:
        rt.bus.add_sink(lambda e: seen.append(e) if isinstance(e, SteeringEvent) else None)
        task = demo.start_demo(rt, tenant_id=TENANT, think_s=30.0)
        try:
            (first,) = await until(lambda: runs(rt, "orchestrator", "running", depth=0))
            handle = rt.runs.get(first.run_id)
            assert handle is not None
            # the model thinks for 30 s: the steer waits, queued, for the next boundary
            steer = await handle.steer("be brief", actor=OPERATOR)
            assert steer.status.value == "accepted"
        finally:
            await stop(task)
    tree = {e.correlation_id: e for e in seen if e.run_id == first.run_id}
    cancels = [e for e in tree.values() if e.kind is SteeringKind.CANCEL]
    assert [e.type for e in cancels] == ["steering.applied"], [(e.type, e.reason) for e in cancels]
    superseded = tree[steer.correlation_id]
    assert superseded.type == "steering.superseded"
    assert superseded.reason == f"superseded by {cancels[0].correlation_id}"
