"""Crash worker for ``test_reliability``: an agent run is steered, then its process is killed.

    python agent_crash_worker.py DB

Starts run ``r-job`` of the ``clerk`` agent on a SQLite store at DB, narrows its tools and gives
it an instruction while it waits in its first tool, lets it go on into a tool that never
returns, and prints ``ready`` once the steering log says both commands were applied. The test
then SIGKILLs it.
"""

from __future__ import annotations

import asyncio
import sys

from tinyagents import Agent, Runtime, tool
from tinyagents.harness import Tool
from tinyagents.protocol import SteeringActor
from tinyagents.store import SqliteStore
from tinyagents.testkit import EventWaiter, Gate, ScriptedModel, reply, tool_call

TESTER = SteeringActor.test()  # logged in the shared scope, so get_command finds it by id alone
NARROWED = ["search", "hold_b"]
INSTRUCTION = "only ever touch billing records"


@tool
def search(query: str) -> str:
    """Search the records."""
    return f"results for {query}"


@tool
def delete(record: str) -> str:
    """Delete a record."""
    return f"deleted {record}"


def clerk_tools(first: Gate, second: Gate) -> list[Tool]:
    return [search, delete, first.tool(), second.tool()]


async def applied_in_log(db: str, correlation_ids: list[str]) -> None:
    reader = SqliteStore(db)
    await reader.open()
    try:
        while True:
            stored = [await reader.get_command(cid) for cid in correlation_ids]
            if all(c is not None and c.state == "applied" for c in stored):
                return
            await asyncio.sleep(0.01)
    finally:
        await reader.close()


async def main(db: str) -> None:
    first, second = Gate("hold_a"), Gate("hold_b")
    waiter = EventWaiter()
    async with Runtime(f"sqlite:///{db}", testing=True, sinks=[waiter]) as rt:
        model = ScriptedModel([tool_call("hold_a"), tool_call("hold_b"), reply("never")])
        agent = Agent("clerk", model, tools=clerk_tools(first, second))
        handle = await rt.start(agent, "tidy up", run_id="r-job")
        await first.entered.wait()
        receipts = [
            await handle.constrain_tools(NARROWED, actor=TESTER),
            await handle.steer(INSTRUCTION, actor=TESTER),
        ]
        first.open()
        await second.entered.wait()
        for receipt in receipts:
            await waiter.event("steering.applied", "r-job", correlation_id=receipt.correlation_id)
        # Killed before the log says 'applied', the commands would just be delivered again;
        # wait for it, so the restart has to restore them.
        await applied_in_log(db, [r.correlation_id for r in receipts])
        print("ready", flush=True)
        await asyncio.Event().wait()  # the test kills the process here


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
