"""Human-in-the-loop: pause one child of an orchestrator, steer it, resume it.

The parent never notices anything but a ``subagent.steered`` event: the human addresses the
child run directly, by its run id.

    python examples/steer_a_child.py
"""

from __future__ import annotations

import asyncio

from tinyagents import Agent, Runtime, SubAgent, SubAgentTool, tool
from tinyagents.testkit import EventWaiter, Gate, ScriptedModel, reply, tool_call


async def main() -> None:
    gate = Gate()  # holds the child inside its first tool call until we have steered it

    @tool
    async def read_ticket(ticket: str) -> str:
        """Read a support ticket."""
        await gate.wait()
        return f"{ticket}: customer reports a double charge on invoice #1042"

    child_model = ScriptedModel(
        [tool_call("read_ticket", ticket="T-7"), reply("Billing issue confirmed.")]
    )
    child = SubAgent(Agent("reader", child_model, tools=[read_ticket]), description="reads tickets")
    parent_model = ScriptedModel(
        [tool_call("reader", input="Read ticket T-7"), reply("Done: billing issue.")]
    )
    parent = Agent("orchestrator", parent_model, tools=[SubAgentTool(child)])

    events = EventWaiter()
    async with Runtime(sinks=[events]) as rt:
        handle = await rt.start(parent, "Triage ticket T-7", tenant_id="acme")
        await gate.entered.wait()  # the child is now inside read_ticket
        (child_info,) = rt.runs.tree.children(handle.run_id)
        child_handle = rt.runs.get(child_info.run_id)
        assert child_handle is not None

        await child_handle.pause()  # delivered at the child's next boundary, after the tool
        gate.open()
        await events.event("run.paused", run_id=child_handle.run_id)
        # While paused, the instruction queues; it is delivered once the child resumes.
        await child_handle.steer("Only report billing facts; ignore shipping.")
        await child_handle.resume()

        result = await handle.result()
        print("parent:", result.status.value, "-", result.output)
        seen = child_model.requests[-1].messages[-1].content
        print("the child's model saw:\n" + seen)
        for event in rt.steering_history(child_handle.run_id):
            print(f"  {event.type:<20} {event.kind.value:<16} {event.correlation_id}")


if __name__ == "__main__":
    asyncio.run(main())
