"""A run anyone aborted says who did: not only the supervisor sends ``abort: true``."""

from __future__ import annotations

import pytest

from tinyagents import (
    Agent,
    RunStatus,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
    SubAgent,
    SubAgentTool,
)
from tinyagents.errors import RunAborted
from tinyagents.harness.subagent import output_or_raise
from tinyagents.protocol import ReceiptStatus
from tinyagents.testkit import Gate, ScriptedModel, reply, tool_call

OPERATOR = SteeringActor.human("alice", scopes=["agent:control"])


def abort(run_id: str, actor: SteeringActor, reason: str | None) -> SteeringCommand:
    payload: dict[str, object] = {"abort": True}
    if reason is not None:
        payload["reason"] = reason
    return SteeringCommand(
        target=SteeringTarget.agent_run(run_id),
        actor=actor,
        kind=SteeringKind.CANCEL,
        payload=payload,
    )


@pytest.mark.parametrize("who", ["human", "parent"])
async def test_a_child_aborted_by_someone_else_than_a_supervisor_names_them(who: str) -> None:
    # the parent's model read "was aborted, stopped by its supervision before it completed"
    # for any abort: a human operator's, a parent's, with no supervisor anywhere
    gate = Gate()
    child = Agent("worker", ScriptedModel([tool_call("hold"), reply("never")]), tools=[gate.tool()])
    parent_model = ScriptedModel([tool_call("worker", input="do it"), reply("done")])
    async with Runtime() as rt:
        parent = await rt.start(Agent("boss", parent_model, tools=[SubAgentTool(child)]), "go")
        await gate.entered.wait()
        (info,) = rt.runs.tree.children(parent.run_id)
        actor = OPERATOR if who == "human" else SteeringActor.parent_agent(parent.run_id, "boss")
        receipt = await rt.submit(abort(info.run_id, actor, "wrong customer"))
        assert receipt.status is ReceiptStatus.ACCEPTED
        gate.open()
        assert (await parent.result()).status is RunStatus.COMPLETED
    told = parent_model.requests[1].messages[-1]
    assert told.metadata == {"error": True}
    assert told.content == (
        f"sub-agent 'worker' (run {info.run_id}) was aborted by {actor.describe()} before it "
        "completed: wrong customer"
    )
    assert "supervis" not in told.content


async def test_a_run_aborted_without_a_reason_says_aborted_and_by_whom() -> None:
    # its error read 'cancelled by human "alice"' for an abort, and RunAborted named nobody
    gate = Gate()
    agent = Agent("worker", ScriptedModel([tool_call("hold"), reply("never")]), tools=[gate.tool()])
    async with Runtime() as rt:
        handle = await SubAgent(agent).start("go", runtime=rt)
        await gate.entered.wait()
        await rt.submit(abort(handle.run_id, OPERATOR, None))
        gate.open()
        result = await handle.result()
    assert result.status is RunStatus.ABORTED
    assert result.error == 'aborted by human "alice"'
    with pytest.raises(RunAborted) as aborted:
        await output_or_raise(handle, result)
    assert aborted.value.by == 'human "alice"'
    assert str(aborted.value).startswith(f'run {handle.run_id} was aborted by human "alice"')
