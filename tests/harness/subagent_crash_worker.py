"""A parent run whose ``SubAgentTool`` child holds an accepted, unapplied command, for
``test_agent_crash.py`` to SIGKILL.

    python subagent_crash_worker.py DB

Starts run ``root-1`` on a ``Runtime`` with a SQLite store at DB; its child waits in a model
call. Once the child and the parent each hold an accepted instruction (in the steering log),
it prints ``ready <child run id> <child's command id> <parent's command id>`` and waits to be
killed.
"""

from __future__ import annotations

import asyncio
import sys

from tinyagents import Agent, Runtime, SubAgent, SubAgentTool
from tinyagents.testkit import Gate, ScriptedModel, reply, tool_call


async def main(db: str) -> None:
    gate = Gate("child-model")
    child = SubAgent(Agent("child", gate.model("never")), description="works")
    parent = Agent(
        "parent",
        ScriptedModel([tool_call("child", input="go"), reply("never")]),
        tools=[SubAgentTool(child)],
    )
    async with Runtime(f"sqlite:///{db}") as rt:
        handle = await rt.start(parent, "task", run_id="root-1")
        await gate.entered.wait()
        (kid,) = rt.runs.tree.children("root-1")
        kid_handle = rt.runs.get(kid.run_id)
        assert kid_handle is not None
        for_child = await kid_handle.steer("child instruction")
        for_parent = await handle.steer("parent instruction")
        await rt.flush()
        print("ready", kid.run_id, for_child.correlation_id, for_parent.correlation_id, flush=True)
        await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
