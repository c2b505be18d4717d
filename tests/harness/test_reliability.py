"""Reliability of the harness under concurrency, deep cancellation, hostile provenance fields,
restarts and misbehaving tools. Each test here failed before the fix it pins down."""

from __future__ import annotations

from tinyagents import Agent, RunLimits, RunStatus, Runtime
from tinyagents.harness.model import Usage
from tinyagents.runs.handle import RunHandle
from tinyagents.steering.commands import SteeringActor
from tinyagents.testkit import reply, tool_call
from tinyagents.testkit.fake_agent import Gate, fake_agent

OPERATOR = SteeringActor.human("alice", scopes=["agent:control"])


def endless_worker(name: str, *, usage: Usage | None = None) -> Agent:
    """An agent that would keep calling ``step`` far beyond any budget a test gives it."""
    script = [tool_call("step", n=i) for i in range(50)]
    if usage is not None:
        for response in script:
            response.usage = usage
    return fake_agent(name, script=script)


async def start_held_parent(rt: Runtime, limits: RunLimits) -> tuple[RunHandle, Gate]:
    """A parent run parked inside a tool (after one model call and one tool call)."""
    gate = Gate()
    parent = await rt.start(
        fake_agent(
            "parent", tools=[gate.tool()], script=[tool_call("hold"), reply("done")], limits=limits
        ),
        "go",
    )
    await gate.entered.wait()
    return parent, gate


# --------------------------------------------------------------------------- 12


async def test_concurrent_children_never_overspend_their_parents_model_calls(rt: Runtime):
    parent, gate = await start_held_parent(rt, RunLimits(max_model_calls=5))
    children = [await rt.start(endless_worker(f"w{i}"), "dig", parent=parent) for i in range(3)]
    results = [await child.result() for child in children]
    gate.open()
    await parent.result()

    assert parent.info.usage.model_calls <= 5
    assert sum(c.info.usage.model_calls for c in children) <= 4
    for result in results:
        assert result.status is RunStatus.LIMIT_EXCEEDED
        assert "max_model_calls" in (result.error or "")
    # At least one child was stopped by the parent's budget, not its own (the numbers say so).
    assert any(f"in run {parent.run_id}: used 5, allowed 5" in (r.error or "") for r in results)


async def test_concurrent_children_never_overspend_their_parents_tool_calls(rt: Runtime):
    parent, gate = await start_held_parent(rt, RunLimits(max_tool_calls=5))
    children = [await rt.start(endless_worker(f"w{i}"), "dig", parent=parent) for i in range(3)]
    results = [await child.result() for child in children]
    gate.open()
    await parent.result()

    assert parent.info.usage.tool_calls <= 5
    assert sum(c.info.usage.tool_calls for c in children) <= 4
    for result in results:
        assert result.status is RunStatus.LIMIT_EXCEEDED
        assert "max_tool_calls" in (result.error or "")


async def test_concurrent_children_stop_when_their_parents_tokens_are_spent(rt: Runtime):
    per_call = Usage(input_tokens=10, output_tokens=10)
    parent, gate = await start_held_parent(rt, RunLimits(max_tokens=200))
    spent_by_parent = parent.info.usage.total_tokens
    children = [
        await rt.start(endless_worker(f"w{i}", usage=per_call), "dig", parent=parent)
        for i in range(3)
    ]
    results = [await child.result() for child in children]
    gate.open()
    await parent.result()

    # Tokens are known only after a call: each child may overshoot by its one call in flight.
    assert parent.info.usage.total_tokens <= 200 + len(children) * per_call.total_tokens
    assert sum(c.info.usage.total_tokens for c in children) < 200 - spent_by_parent + 3 * 20
    for result in results:
        assert result.status is RunStatus.LIMIT_EXCEEDED
        assert "max_tokens" in (result.error or "")
