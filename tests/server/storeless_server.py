"""A server without a store, for the console's browser test of a restart: its event ids count
from 1 again in each process. ``python storeless_server.py PORT RUN_ID busy|brief`` starts one
run under ``RUN_ID`` (``busy``: steps until stopped; ``brief``: two steps, then it completes;
``ahead``: as ``busy``, and serves only once its log holds 300 events; ``stuck``: inside its
first model call for an hour), serves the operator API and the console on ``127.0.0.1:PORT`` without tokens, and prints
``serving`` once it listens."""

from __future__ import annotations

import asyncio
import itertools
import sys
from typing import Any

from operator_server import IDLE_S, busy_agent, step

from tinyagents import Agent, Runtime
from tinyagents.server import Control, bind, create_app, serving
from tinyagents.testkit import FunctionModel, reply, tool_call


def brief_agent() -> Agent:
    async def think(request: Any) -> Any:
        steps = sum(m.role == "tool" for m in request.messages)
        return tool_call("step", n=steps) if steps < 2 else reply("done")

    return Agent("brief", FunctionModel(think, name="brief-model"), tools=[step])


async def main(port: int, run_id: str, kind: str) -> None:
    think_s = IDLE_S if kind == "stuck" else 0.02
    agent = brief_agent() if kind == "brief" else busy_agent("busy", think_s=think_s)
    async with Runtime() as runtime:
        control = Control(runtime)  # (its log keeps the events from here on)
        logged, count = asyncio.Event(), itertools.count(1)
        runtime.bus.add_sink(lambda _: next(count) >= 300 and logged.set())
        await runtime.start(agent, "work", run_id=run_id)
        if kind == "ahead":
            await logged.wait()
        async with serving(create_app(control, auth=None), bind("127.0.0.1", port)):
            print("serving", flush=True)
            await asyncio.Event().wait()  # until the test kills the process


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
