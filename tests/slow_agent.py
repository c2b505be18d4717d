"""A slow scripted agent for operator tests: it calls ``step`` every ``think_s`` seconds until a
steering message says ``finish``, then answers with the steering texts it saw.

Also a script: ``python tests/slow_agent.py STORE_URL RUN_ID_FILE [TENANT]`` runs one such
agent in a runtime on ``STORE_URL``, writes the run id (and the runtime id) to ``RUN_ID_FILE``
once the run's snapshot is in the store, and exits when the run has ended.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from tinyagents import Agent, RunLimits, Runtime
from tinyagents.harness import ModelRequest, ModelResponse
from tinyagents.testkit import FunctionModel, reply, tool_call


def step(n: int) -> str:
    """Do step ``n`` of the slow task."""
    return f"step {n} done"


def slow_agent(name: str = "slow", *, think_s: float = 0.05, max_steps: int = 2000) -> Agent:
    """An agent that keeps working (one ``step`` per ``think_s``) until it is told ``finish``."""

    async def think(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(think_s)
        steered = [m.content for m in request.messages if "steering" in m.metadata]
        if any("finish" in text for text in steered):
            return reply(json.dumps({"steered": steered}))
        return tool_call("step", n=len(request.messages))

    return Agent(
        name,
        FunctionModel(think, name=f"{name}-model"),
        tools=[step],
        limits=RunLimits(max_model_calls=max_steps, max_tool_calls=max_steps),
    )


async def _serve(store_url: str, out: Path, tenant: str) -> None:
    async with Runtime(store=store_url) as rt:
        handle = await rt.start(slow_agent(), "work slowly", tenant_id=tenant)
        while await rt.store.load_run(handle.run_id) is None:  # noqa: ASYNC110 - another process reads it
            await asyncio.sleep(0.02)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps({"run_id": handle.run_id, "owner": rt.runtime_id}))
        tmp.replace(out)
        result = await handle.result()
        print(json.dumps({"status": result.status.value, "output": result.output}), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    asyncio.run(
        _serve(sys.argv[1], Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "acme")
    )
