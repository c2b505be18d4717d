"""A slow scripted agent for operator tests: it calls ``step`` every ``think_s`` seconds until a
steering message says ``finish``, then answers with the steering texts it saw.

Also a script, for tests with two real processes:

- ``python tests/slow_agent.py own STORE_URL RUN_ID_FILE [TENANT]`` runs one such agent in a
  runtime on ``STORE_URL`` (``DEDUPE_HORIZON`` from the environment, if set), writes the run
  id and the runtime id to ``RUN_ID_FILE`` once the run's snapshot is in the store, and prints
  the run's result when it has ended;
- ``python tests/slow_agent.py own-graph STORE_URL RUN_ID_FILE [TENANT]`` the same with a graph
  run whose task waits on an interrupt (a refund to approve);
- ``python tests/slow_agent.py submit STORE_URL RUN_ID CID TEXT [GO_FILE]`` waits for
  ``GO_FILE`` to exist (a start line for racing submitters), submits an instruction from a
  human of tenant ``acme`` through the store and prints the receipt as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from tinyagents import (
    Agent,
    RunLimits,
    Runtime,
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.harness import ModelRequest, ModelResponse
from tinyagents.server.demo import refund_graph
from tinyagents.steering.remote import submit_through_store
from tinyagents.store import open_store
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


async def _own(store_url: str, out: Path, tenant: str, graph: bool = False) -> None:
    horizon = int(os.environ.get("DEDUPE_HORIZON", "100000"))
    async with Runtime(store=store_url, dedupe_horizon=horizon) as rt:
        if graph:  # a graph run whose task waits for an approval
            handle = await rt.start_graph(
                refund_graph(),
                {"invoice": "#7", "amount": "5 EUR"},
                thread_id="refund-7",
                tenant_id=tenant,
            )
        else:
            handle = await rt.start(slow_agent(), "work slowly", tenant_id=tenant)
        while await rt.store.load_run(handle.run_id) is None:  # noqa: ASYNC110 - another process reads it
            await asyncio.sleep(0.02)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps({"run_id": handle.run_id, "owner": rt.runtime_id}))
        tmp.replace(out)
        result = await handle.result()
        print(json.dumps({"status": result.status.value, "output": result.output}), flush=True)


async def _submit(store_url: str, run_id: str, cid: str, text: str, go: Path | None) -> None:
    store = open_store(store_url)
    await store.open()
    print("ready", flush=True)
    while go is not None and not go.exists():  # noqa: ASYNC110 - another process makes it
        await asyncio.sleep(0.005)
    try:
        cmd = SteeringCommand(
            target=SteeringTarget.agent_run(run_id),
            actor=SteeringActor.human("ops", tenant_id="acme", scopes=["agent:control"]),
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": text},
            correlation_id=cid,
        )
        receipt = await submit_through_store(store, cmd, timeout_s=60)
        print(receipt.model_dump_json(), flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    mode, args = sys.argv[1], sys.argv[2:]
    if mode in ("own", "own-graph"):
        tenant = args[2] if len(args) > 2 else "acme"
        asyncio.run(_own(args[0], Path(args[1]), tenant, graph=mode == "own-graph"))
    else:
        go_file = Path(args[4]) if len(args) > 4 else None
        asyncio.run(_submit(args[0], args[1], args[2], args[3], go_file))
