"""A human's cancel and the supervisor's abort ready at one boundary: the first applied
(priority, then age) ends the run and is named as who ended it; the other is superseded by
it. It was failed "target finished before delivery" after it had been delivered, and the
run's end named nobody."""

from __future__ import annotations

import asyncio

import pytest

from tinyagents import (
    Agent,
    RunStatus,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringPriority,
    SteeringTarget,
    SupervisorSpec,
)
from tinyagents.events import RunEvent, SteeringEvent
from tinyagents.harness import ModelRequest
from tinyagents.testkit import (
    EventRecorder,
    EventWaiter,
    FunctionModel,
    Gate,
    ScriptedModel,
    reply,
    tool_call,
)

OPERATOR = SteeringActor.human("alice", scopes=["agent:control"])


@pytest.mark.parametrize(
    ("priority", "abort", "status", "error", "winner"),
    [
        # the supervisor's commands are critical: its abort, sent after, is applied first
        (SteeringPriority.NORMAL, False, RunStatus.ABORTED, "judge says stop", "supervisor"),
        (SteeringPriority.NORMAL, True, RunStatus.ABORTED, "judge says stop", "supervisor"),
        # as critical as it, the human's (older) is applied first
        (SteeringPriority.CRITICAL, False, RunStatus.CANCELLED, "human says stop", "human"),
        (SteeringPriority.CRITICAL, True, RunStatus.ABORTED, "human says stop", "human"),
    ],
)
async def test_a_cancel_and_an_abort_at_one_boundary_end_the_run_as_the_first_applied(
    priority: SteeringPriority, abort: bool, status: RunStatus, error: str, winner: str
) -> None:
    gate, go = Gate(), asyncio.Event()

    async def judge(request: ModelRequest) -> str:
        await go.wait()
        return '{"passed": false, "reason": "judge says stop"}'

    spec = SupervisorSpec(model=FunctionModel(judge), on_violation="abort")
    agent = Agent("w", ScriptedModel([tool_call("hold"), reply("never")]), tools=[gate.tool()])
    recorder, waiter = EventRecorder(), EventWaiter()
    async with Runtime(supervisor=spec, sinks=[recorder, waiter]) as rt:
        handle = await rt.start(agent, "go")
        await gate.entered.wait()
        payload: dict[str, object] = {"reason": "human says stop"}
        if abort:
            payload["abort"] = True
        human = SteeringCommand(
            target=SteeringTarget.agent_run(handle.run_id),
            actor=OPERATOR,
            kind=SteeringKind.CANCEL,
            payload=payload,
            priority=priority,
        )
        await rt.submit(human)
        go.set()  # the judge answers: the supervisor's abort joins the human's cancel
        await waiter.event("supervisor.action")
        gate.open()
        result = await handle.result()
    assert (result.status, result.error) == (status, error)
    [action] = recorder.of_type("supervisor.action")
    ours = action.data["correlation_id"]  # type: ignore[attr-defined]
    applied, loser = (ours, human.correlation_id)[:: 1 if winner == "supervisor" else -1]
    ends = {
        e.correlation_id: (e.type, e.superseded_by)
        for e in recorder.events
        if isinstance(e, SteeringEvent)
        and e.type in ("steering.applied", "steering.failed", "steering.superseded")
    }
    assert ends == {applied: ("steering.applied", None), loser: ("steering.superseded", applied)}
    [end] = [e for e in recorder.events if isinstance(e, RunEvent) and e.type == f"run.{status}"]
    by = 'middleware "supervisor"' if winner == "supervisor" else 'human "alice"'
    assert end.detail == {"by": by}
