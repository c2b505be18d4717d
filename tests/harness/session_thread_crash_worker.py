"""A ``SubAgentSession`` turn held in its model call on thread ``t-crash`` (or, with
``graph``, a graph run held inside its node), for ``test_session_threads_shared.py`` to
SIGKILL.

    python session_thread_crash_worker.py DB [turn|graph]

Runs on a ``Runtime`` with a SQLite store at DB; prints ``ready`` once the run is held and
waits to be killed.
"""

from __future__ import annotations

import asyncio
import operator
import sys
from typing import Annotated, TypedDict

from tinyagents import Agent, Runtime, SubAgent
from tinyagents.graph import END, START, StateGraph
from tinyagents.testkit import Gate


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


async def main(db: str, kind: str) -> None:
    gate = Gate(kind)
    async with Runtime(f"sqlite:///{db}") as rt:
        if kind == "graph":

            async def work(state: Log) -> Log:
                await gate.wait()
                return {"log": ["never"]}

            graph = StateGraph(Log).add_node("work", work)
            graph.add_edge(START, "work").add_edge("work", END)
            handle = await rt.start_graph(graph.compile(), {}, thread_id="t-crash")
            running: asyncio.Future[object] = asyncio.ensure_future(handle.result())
        else:
            session = SubAgent(Agent("chat", gate.model("never"))).session(
                runtime=rt, thread_id="t-crash"
            )
            running = asyncio.ensure_future(session.send("hello"))
        await gate.entered.wait()
        await rt.flush()
        print("ready", flush=True)
        await running


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "turn"))
