"""A ``SubAgentSession`` turn held in its model call on thread ``t-crash``, for
``test_session_threads.py`` to SIGKILL.

    python session_thread_crash_worker.py DB

Runs on a ``Runtime`` with a SQLite store at DB; prints ``ready`` once the turn is in its
model call and waits to be killed.
"""

from __future__ import annotations

import asyncio
import sys

from tinyagents import Agent, Runtime, SubAgent
from tinyagents.testkit import Gate


async def main(db: str) -> None:
    gate = Gate("turn")
    async with Runtime(f"sqlite:///{db}") as rt:
        session = SubAgent(Agent("chat", gate.model("never"))).session(
            runtime=rt, thread_id="t-crash"
        )
        turn = asyncio.ensure_future(session.send("hello"))
        await gate.entered.wait()
        await rt.flush()
        print("ready", flush=True)
        await turn


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
